package policy_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestDefaultRulebook: the recommended policy ships a rule for each
// known-dangerous form, every rule has at least one positive and one
// near-miss example, and through the whole engine (a policy holding only
// that rule) each positive is denied or escalated by the rule and no near
// miss is.
func TestDefaultRulebook(t *testing.T) {
	rec := policy.Recommended()
	forms := map[string]bool{}
	for _, r := range rec.ShapeRules {
		forms[r.ID] = true
	}
	for _, id := range []string{"log-wipe", "encoded-exec", "curl-pipe-shell", "reverse-shell",
		"credential-read-file", "credential-read-shell", "masquerade", "writ-state-file", "writ-state-shell"} {
		if !forms[id] {
			t.Errorf("the default rulebook has no %s rule", id)
		}
	}
	for _, r := range rec.ShapeRules {
		t.Run(r.ID, func(t *testing.T) {
			if len(r.Examples.Hit) == 0 || len(r.Examples.Miss) == 0 {
				t.Fatalf("rule %s needs a positive and a near-miss example", r.ID)
			}
			only := *rec
			only.ShapeRules = []policy.ShapeRule{r}
			p, err := policy.Parse(only.Canonical())
			if err != nil {
				t.Fatal(err)
			}
			want := grants.Deny
			if r.Action == "escalate" {
				want = grants.ApprovalRequired
			}
			for _, ex := range r.Examples.Hit {
				j := p.Judge(ruleRequest(t, r, ex), usage{}, now)
				if j.Decision != want || !slices.Contains(j.Rules, "shape:"+r.ID) {
					t.Errorf("hit %q: %s %s %v", ex, j.Decision, j.Reason, j.Rules)
				}
			}
			for _, ex := range r.Examples.Miss {
				j := p.Judge(ruleRequest(t, r, ex), usage{}, now)
				if slices.Contains(j.Rules, "shape:"+r.ID) {
					t.Errorf("near miss %q matched: %s %v", ex, j.Decision, j.Rules)
				}
			}
		})
	}
}

// ruleRequest builds the call a rule's example stands for: a shell
// command, or a read or write of a path.
func ruleRequest(t *testing.T, r policy.ShapeRule, example string) *policy.Request {
	t.Helper()
	tool, field := "Bash", "command"
	switch {
	case slices.Contains(r.Surfaces, "file_read"):
		tool, field = "Read", "file_path"
	case slices.Contains(r.Surfaces, "file_write"):
		tool, field = "Write", "file_path"
	}
	args, _ := json.Marshal(map[string]string{field: example})
	return req(t, "w1", "coordinator", tool, string(args))
}
