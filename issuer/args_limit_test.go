package issuer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
)

// An argument-size refusal states the real size and the limit, once,
// without stacked "policy: ..." prefixes.
func TestArgsTooLargeStatesSizes(t *testing.T) {
	values := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	cases := []struct {
		name, args string
		want       []string
	}{
		{"too many values", values(5000), []string{"args: 5000 values", fmt.Sprintf("limit is %d values", args.MaxLeaves)}},
		{"values in objects", `{"a":` + values(args.MaxLeaves) + `,"b":{"c":"x"}}`, []string{fmt.Sprintf("args: %d values", args.MaxLeaves+1)}},
		{"path too long", `{"a":{"` + strings.Repeat("k", 1100) + `":1}}`, []string{"a field path is 1103 bytes long", fmt.Sprintf("limit is %d bytes", args.MaxPath)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rerr := flatten([]byte(tc.args))
			if rerr == nil {
				t.Fatal("accepted")
			}
			if rerr.reason != grants.ReasonRequestTooLarge || rerr.missing != "args" {
				t.Fatalf("reason %s missing %s", rerr.reason, rerr.missing)
			}
			for _, w := range tc.want {
				if !strings.Contains(rerr.detail, w) {
					t.Errorf("detail %q does not state %q", rerr.detail, w)
				}
			}
			if strings.Contains(rerr.detail, "policy:") {
				t.Errorf("detail %q carries policy's prefixes", rerr.detail)
			}
		})
	}
}

// A refused policy document names the field once: "policy: invalid: ...",
// not "policy: policy: invalid: ...".
func TestPolicyRefusalPrefixOnce(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"unknown field", `{"version":2,"bogus":1}`, "policy: invalid: "},
		{"not an object", `[1]`, "policy: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rerr := policyCommand("operator:alice", []byte(`{"v":1,"policy":`+tc.doc+`}`))
			if rerr == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(rerr.detail, tc.want) || strings.Count(rerr.detail, "policy: ") != 1 {
				t.Fatalf("detail %q: want it to start %q and say \"policy: \" once", rerr.detail, tc.want)
			}
		})
	}
}
