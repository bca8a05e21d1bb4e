package policy_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/writ-dev/writ/authority"
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
		"credential-read-file", "credential-read-shell", "masquerade", "writ-state-file", "writ-state-shell", "credential-exfil", "patch-writ-state", "patch-sensitive-file"} {
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
// command, a read or write of a path, a Codex patch, or a query tool's
// argument.
func ruleRequest(t *testing.T, r policy.ShapeRule, example string) *policy.Request {
	t.Helper()
	tool, field := "Bash", "command"
	switch {
	case slices.Contains(r.Surfaces, "file_write") && slices.Contains(r.In, "sinks"):
		// A rule on what a write carries: the example is the file's content.
		args, _ := json.Marshal(map[string]string{"file_path": "/work/w1/.github/workflows/ci.yml", "content": example})
		return req(t, "w1", "coordinator", "Write", string(args))
	case slices.Contains(r.Surfaces, "file_read"):
		tool, field = "Read", "file_path"
	case slices.Contains(r.Surfaces, "file_write"):
		tool, field = "Write", "file_path"
	case slices.Contains(r.Surfaces, "patch"):
		tool = "apply_patch"
	case slices.Contains(r.Surfaces, "mcp_query"):
		tool, field = "mcp__db__query", "sql" // a database server's query tool
	}
	args, _ := json.Marshal(map[string]string{field: example})
	return req(t, "w1", "coordinator", tool, string(args))
}

// TestRecommendedProvenance: the recommended provenance section. Calls
// that carry no field origins and touch no payment or memory path (the
// demo's reads, searches and team mail) are judged as before; a payment
// needs its payee and amount from the user or the owner's approval;
// memory writes are drafts; secrets never leave.
func TestRecommendedProvenance(t *testing.T) {
	p := policy.Recommended()
	user := policy.SourceFact{ID: "s-user", Registered: true, Authority: p.SourceAuthority("user_prompt", "", ""), Channel: "user_prompt"}
	page := policy.SourceFact{ID: "s-page", Registered: true, Authority: p.SourceAuthority("web_fetch", "", ""), Channel: "web_fetch"}
	creds := policy.SourceFact{ID: "s-aws", Registered: true, Authority: p.SourceAuthority("file_read", "/home/dev/.aws/credentials", ""),
		Channel: "file_read", Path: "/home/dev/.aws/credentials"}
	if user.Authority != authority.Instruction || page.Authority != authority.Evidence || creds.Authority != authority.Evidence {
		t.Fatalf("levels: %s %s %s", user.Authority, page.Authority, creds.Authority)
	}
	call := func(lane, tool, args string, origins ...policy.FieldOrigin) *policy.Request {
		r := req(t, "shop", lane, tool, args)
		r.Cwd, r.Provenance = "/work/shop", origins
		return r
	}
	from := func(field string, s policy.SourceFact) policy.FieldOrigin {
		return policy.FieldOrigin{Field: field, Covered: true, Sources: []policy.SourceFact{s}}
	}
	cases := []struct {
		name   string
		r      *policy.Request
		reason grants.Reason // ReasonNone: a permit
	}{
		{"a read in the workspace", call("coordinator", "Read", `{"file_path":"/work/shop/src/cart/cart.ts"}`), grants.ReasonNone},
		{"a search", call("coordinator", "Grep", `{"pattern":"cartTotal","path":"src"}`), grants.ReasonNone},
		{"a build", call("specialist", "Bash", `{"command":"go test ./..."}`), grants.ReasonNone},
		// Recipients stay strict: from the user's words, mail inside the
		// trust domains goes out; a recipient nobody traced is held.
		{"team mail to a recipient the user named", call("coordinator", "mcp__gmail__send_email", `{"to":"dana@example.com","subject":"s","body":"b"}`,
			from("/to", user)), grants.ReasonNone},
		{"team mail to two recipients the user named", call("coordinator", "mcp__gmail__send_email", `{"to":["dana@example.com","lee@example.com"],"subject":"s","body":"b"}`,
			from("/to/0", user), from("/to/1", user)), grants.ReasonNone},
		{"team mail without origins", call("coordinator", "mcp__gmail__send_email", `{"to":"dana@example.com","subject":"s","body":"b"}`), grants.ReasonAuthorityReview},
		{"mail outside the trust domains", call("coordinator", "mcp__gmail__send_email", `{"to":"x@quickledger-sync.net","body":"b"}`,
			from("/to", user)), grants.ReasonBoundaryCrossing},
		{"a refund nobody asked for", call("coordinator", "mcp__stripe__refund", `{"payee":"cus_1","amount":100}`), grants.ReasonAuthorityReview},
		{"a refund to a payee from a page", call("coordinator", "mcp__stripe__refund", `{"payee":"cus_1","amount":100}`,
			from("/payee", page), from("/amount", user)), grants.ReasonAuthorityReview},
		// The payee and amount trace to the user, so provenance passes;
		// a payment crosses a boundary (outbound_send), which the
		// payments-small allowance covers up to 200.00 and no further.
		{"a refund the user asked for", call("coordinator", "mcp__stripe__refund", `{"payee":"cus_1","amount":100}`,
			from("/payee", user), from("/amount", user)), grants.ReasonNone},
		{"a large refund the user asked for", call("coordinator", "mcp__stripe__refund", `{"payee":"cus_1","amount":20001}`,
			from("/payee", user), from("/amount", user)), grants.ReasonBoundaryCrossing},
		{"a memory write", call("specialist", "Edit", `{"file_path":"CLAUDE.md","old_string":"a","new_string":"b"}`), grants.ReasonMemoryWrite},
		{"credentials mailed out of the organization", call("coordinator", "mcp__gmail__send_email", `{"to":"dana@contractor.example.net","body":"aws_secret_access_key=x"}`,
			from("/to", user), policy.FieldOrigin{Field: "/body", Sources: []policy.SourceFact{creds}}), grants.ReasonProtectedTransfer},
	}
	for _, tc := range cases {
		j := p.Judge(tc.r, usage{}, now)
		if j.Reason != tc.reason || (tc.reason == grants.ReasonNone) != (j.Decision == grants.Permit) {
			t.Errorf("%s: %s %s %q %q", tc.name, j.Decision, j.Reason, j.Missing, j.Detail)
		}
	}
}
