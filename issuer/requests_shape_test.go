package issuer

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
)

// A grant request's args must be an object, and no request body may name a
// field twice: encoding/json keeps the last of two equal keys (matched
// without regard to case), so such a body could mean one thing to a
// reader that keeps the first and another to the issuer.
func TestRequestShapeRefusals(t *testing.T) {
	const ok = `{"v":1,"lane":"coordinator","tool":"Bash","args":{"command":"ls"},"idempotency_key":"k1"}`
	if _, err := grantCommand("w1", []byte(ok)); err != nil {
		t.Fatalf("a well-formed request is refused: %v", err)
	}
	cases := []struct {
		name, body, field string
	}{
		{"args null", `{"v":1,"lane":"coordinator","tool":"Bash","args":null,"idempotency_key":"k1"}`, "args"},
		{"args a number", `{"v":1,"lane":"coordinator","tool":"Bash","args":42,"idempotency_key":"k1"}`, "args"},
		{"args a string", `{"v":1,"lane":"coordinator","tool":"Bash","args":"x","idempotency_key":"k1"}`, "args"},
		{"args an array", `{"v":1,"lane":"coordinator","tool":"Bash","args":[1],"idempotency_key":"k1"}`, "args"},
		{"args true", `{"v":1,"lane":"coordinator","tool":"Bash","args":true,"idempotency_key":"k1"}`, "args"},
		{"tool twice", `{"v":1,"lane":"coordinator","tool":"Read","tool":"Bash","args":{},"idempotency_key":"k1"}`, "tool"},
		{"tool twice, other case", `{"v":1,"lane":"coordinator","tool":"Read","Tool":"Bash","args":{},"idempotency_key":"k1"}`, "Tool"},
		{"args twice", `{"v":1,"lane":"coordinator","tool":"Bash","args":{"command":"ls"},"args":{"command":"rm -rf /"},"idempotency_key":"k1"}`, "args"},
		{"key twice", `{"v":1,"lane":"coordinator","tool":"Bash","args":{},"idempotency_key":"k1","idempotency_key":"k2"}`, "idempotency_key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grantCommand("w1", []byte(tc.body))
			if err == nil {
				t.Fatalf("accepted %s", tc.body)
			}
			if err.reason != grants.ReasonInvalidRequest || err.missing != tc.field {
				t.Fatalf("refused as %s on %q (%s), want invalid_request on %q", err.reason, err.missing, err.detail, tc.field)
			}
		})
	}
	spends := []struct{ name, body, field string }{
		{"spend args a number", `{"v":1,"grant_id":"g-1","args":42,"idempotency_key":"s1"}`, "args"},
		{"spend grant twice", `{"v":1,"grant_id":"g-1","grant_id":"g-2","args":{},"idempotency_key":"s1"}`, "grant_id"},
	}
	for _, tc := range spends {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := spendCommand("w1", []byte(tc.body))
			if err == nil || !strings.Contains(err.missing, tc.field) {
				t.Fatalf("spend %s: got %v, want a refusal on %q", tc.body, err, tc.field)
			}
		})
	}
}
