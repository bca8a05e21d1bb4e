package issuer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestGrantCommandForwardsTheCall: the leader forwards the call's
// arguments flattened (a pure function of the arguments, not of the
// policy) with the label, amount, bytes and resolution context.
func TestGrantCommandForwardsTheCall(t *testing.T) {
	amount := uint64(42)
	body, _ := json.Marshal(api.GrantRequest{V: 1, Lane: "coordinator", Tool: "mcp__stripe__refund", IdempotencyKey: "k",
		Args: json.RawMessage(`{ "payee": "cus_1", "amount": 42.0 }`), TargetLabel: "order 7", Amount: &amount, Bytes: 9,
		Cwd: "/work/w1", ResolvedTarget: "/work/w1/x"})
	c, rerr := grantCommand("w1", body)
	if rerr != nil {
		t.Fatal(rerr)
	}
	want, _ := args.Flatten([]byte(`{"amount":42,"payee":"cus_1"}`))
	if !c.Args.Carried || len(c.Args.Leaves) != 2 || c.Args.Leaves[0] != want.Leaves[0] || c.Args.Leaves[1] != want.Leaves[1] {
		t.Errorf("args %+v", c.Args)
	}
	if c.TargetLabel != "order 7" || !c.HasAmount || c.Amount != 42 || c.Bytes != 9 || c.Cwd != "/work/w1" || c.Resolved != "/work/w1/x" {
		t.Errorf("command %+v", c)
	}
	d, _ := args.Digest("mcp__stripe__refund", []byte(`{"amount":42,"payee":"cus_1"}`))
	if c.Digest != d {
		t.Errorf("digest %s", c.Digest)
	}
}

// TestPolicyRequestFieldsRefused: malformed engine fields are refused
// before anything is proposed, with the field named.
func TestPolicyRequestFieldsRefused(t *testing.T) {
	grant := func(extra string) []byte {
		return []byte(`{"v":1,"lane":"coordinator","tool":"Read","args":{"file_path":"a"},"idempotency_key":"k"` + extra + `}`)
	}
	many := `{"xs":[` + strings.TrimSuffix(strings.Repeat("1,", args.MaxLeaves+1), ",") + `]}`
	cases := []struct {
		name  string
		body  []byte
		spend bool
		field string
		why   grants.Reason
	}{
		{"relative cwd", grant(`,"cwd":"work/w1"`), false, "cwd", grants.ReasonInvalidRequest},
		{"control character in the label", grant(`,"target_label":"a\u0007b"`), false, "target_label", grants.ReasonInvalidRequest},
		{"label too long", grant(`,"target_label":"` + strings.Repeat("x", maxLabelLen+1) + `"`), false, "target_label", grants.ReasonInvalidRequest},
		{"relative resolved target", grant(`,"resolved_target":"x"`), false, "resolved_target", grants.ReasonInvalidRequest},
		{"negative amount", grant(`,"amount":-1`), false, "body", grants.ReasonInvalidRequest},
		{"too many argument values", []byte(`{"v":1,"lane":"coordinator","tool":"Read","args":` + many + `,"idempotency_key":"k"}`), false, "args", grants.ReasonRequestTooLarge},
		{"spend context with a digest", []byte(`{"v":1,"grant_id":"g","idempotency_key":"k","digest":"` + strings.Repeat("ab", 32) + `","cwd":"/w"}`), true, "args", grants.ReasonInvalidRequest},
		{"spend context without args", []byte(`{"v":1,"grant_id":"g","idempotency_key":"k","cwd":"/w"}`), true, "args", grants.ReasonInvalidRequest},
		{"spend relative cwd", []byte(`{"v":1,"grant_id":"g","idempotency_key":"k","args":{},"cwd":"w"}`), true, "cwd", grants.ReasonInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rerr *requestError
			if tc.spend {
				_, _, rerr = spendCommand("w1", tc.body)
			} else {
				_, rerr = grantCommand("w1", tc.body)
			}
			if rerr == nil || rerr.reason != tc.why || rerr.missing != tc.field {
				t.Fatalf("got %+v; want %s naming %s", rerr, tc.why, tc.field)
			}
		})
	}
}

// TestPolicyCommandNamesTheField: an invalid document never reaches the
// log; the refusal names the field.
func TestPolicyCommandNamesTheField(t *testing.T) {
	_, rerr := policyCommand("op", []byte(`{"v":1,"policy":{"version":2,"default_ttl":"1m","lanes":{"a":{}},"surfaces":[{"id":"s","tools":["x"],"operation":"o","consequence":"nope"}]}}`))
	if rerr == nil || !strings.Contains(rerr.detail, "surfaces[0].consequence") {
		t.Fatalf("policyCommand = %+v", rerr)
	}
}

// TestPolicyCommandWritesTheBuiltinRules: the entry a policy request
// proposes carries writ's built-in rules, whatever the document said; a
// document that redefines one, and a version 1 document, never reach the
// log, and the refusal says what to do. The initial policy goes the same
// way (Config.Validate refuses a bad one before anything starts).
func TestPolicyCommandWritesTheBuiltinRules(t *testing.T) {
	body := func(doc []byte) []byte { return []byte(`{"v":1,"policy":` + string(doc) + `}`) }
	c, rerr := policyCommand("operator:o", body(policy.Recommended().Canonical()))
	if rerr != nil {
		t.Fatal(rerr)
	}
	p, err := policy.Parse(c.Policy)
	if err != nil || !policy.HasBuiltins(p) {
		t.Fatalf("the proposed entry lacks the built-in rules: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(c.Policy, &doc); err != nil {
		t.Fatal(err)
	}
	doc["shape_rules"].([]any)[0].(map[string]any)["action"] = "escalate"
	w, _ := json.Marshal(doc)
	weakened := string(w)
	for name, tc := range map[string]struct{ doc, want string }{
		"redefined built-in rule": {weakened, `shape_rules[0].id: "writ-operator-command" is a built-in rule`},
		"version 1":               {`{"version":1,"default_ttl":"1m","lanes":{"coordinator":{"tools":["*"]}}}`, "write a version 2 document"},
	} {
		if _, rerr := policyCommand("operator:o", body([]byte(tc.doc))); rerr == nil || rerr.missing != "policy" || !strings.Contains(rerr.detail, tc.want) {
			t.Errorf("%s: got %+v; want a refusal naming policy with %q", name, rerr, tc.want)
		}
		cfg := DefaultConfig()
		cfg.InitialPolicy = []byte(tc.doc)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s as the initial policy: %v", name, err)
		}
	}
}

// TestSpendCommandForwardsArgs: a spend with args forwards them flattened,
// with its resolution context.
func TestSpendCommandForwardsArgs(t *testing.T) {
	c, canon, rerr := spendCommand("w1", []byte(`{"v":1,"grant_id":"g","idempotency_key":"k","args":{"file_path":"a"},"cwd":"/w","resolved_target":"/w/a"}`))
	if rerr != nil || string(canon) != `{"file_path":"a"}` || !c.Args.Carried || len(c.Args.Leaves) != 1 || c.Cwd != "/w" || c.Resolved != "/w/a" {
		t.Fatalf("spendCommand = %+v %s %v", c, canon, rerr)
	}
}

// TestPolicyCommandDetail: a document that does not validate is refused
// before it is proposed, with every problem in the detail under one
// "policy: invalid" (not "policy: policy: invalid").
func TestPolicyCommandDetail(t *testing.T) {
	body, _ := json.Marshal(api.PolicyRequest{V: api.Version, Policy: json.RawMessage(
		`{"version":2,"default_ttl":"1m","unpinned":"maybe","lanes":{"a":{"surfaces":["nope"]}},"surfaces":[{"id":"s","tools":["x"],"operation":"o","consequence":"local_read"}]}`)})
	_, rerr := policyCommand("operator", body)
	if rerr == nil {
		t.Fatal("an invalid document was accepted")
	}
	d := rerr.detail
	if !strings.HasPrefix(d, "policy: invalid: 2 problems: ") || strings.Count(d, "policy:") != 1 ||
		!strings.Contains(d, "unpinned: ") || !strings.Contains(d, `lanes.a.surfaces[0]: "nope"`) {
		t.Fatalf("detail %q", d)
	}
}
