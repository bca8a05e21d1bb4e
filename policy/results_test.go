package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

const (
	chatTool = "mcp__chat__read_channel_messages"
	bankTool = "mcp__bank__get_transactions"
)

// resultFact is a source of tool's structured result registered to the
// caller, the value found in it whole (or not) and in the given fields.
func resultFact(p *policy.Policy, id, channel, tool string, whole bool, refs ...policy.ResultRef) policy.SourceFact {
	f := fact(p, id, channel, "", tool)
	f.Whole, f.Fields = whole, refs
	return f
}

func ref(ptr string, whole bool) policy.ResultRef {
	return policy.ResultRef{Pointer: ptr, Whole: whole}
}

// TestResultFieldAuthority: a value equal to the whole of a field the
// policy attests for the tool that produced the result steers a call; the
// same value found only inside content, in a field no schema names, in a
// result of another tool, in a derived source or through a decoding does
// not. Each case names the invariant it pins.
func TestResultFieldAuthority(t *testing.T) {
	p := loadPolicy(t, "testdata/results.yaml")
	prompt := fact(p, "s-prompt", "user_prompt", "", "")
	prompt.Whole = true
	cases := []struct {
		name    string
		tool    string
		args    string
		origins []policy.FieldOrigin
		want    grants.Decision
		reason  grants.Reason
		grounds string // a grounds line must contain it
	}{
		{
			name: "attested sender is a permitted recipient",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice","body":"hi"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/3/sender", true)))},
			want: grants.Permit, grounds: "authority=instruction counter=source/s-chat=0 transform=raw whole from=" + chatTool + ":/messages/3/sender attested",
		},
		{
			name: "a name only inside a message body is refused",
			tool: "mcp__chat__send_message", args: `{"recipient":"mallory"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/1/body", false)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow, grounds: "from=" + chatTool + ":/messages/1/body",
		},
		{
			name: "a body that is exactly a name stays content",
			tool: "mcp__chat__send_message", args: `{"recipient":"mallory"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/1/body", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			// The residual risk: an injected body may pick among the
			// identities the system attests; the recipient passes, and
			// everything else the call carries is judged on its own.
			name: "attested identity named by an injected body: recipient permitted, link from the body refused",
			tool: "mcp__chat__send_message", args: `{"recipient":"bob","link":"https://evil.example/x"}`,
			origins: []policy.FieldOrigin{
				origin("/recipient", true, resultFact(p, "s-chat", "tool_result", chatTool, true,
					ref("/messages/0/sender", true), ref("/messages/1/body", false))),
				origin("/link", true, resultFact(p, "s-chat", "tool_result", chatTool, false, ref("/messages/1/body", false))),
			},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow, grounds: "field=/link source=s-chat authority=evidence",
		},
		{
			name: "attested identity named by an injected body, nothing else carried: permitted",
			tool: "mcp__chat__send_message", args: `{"recipient":"bob"}`,
			origins: []policy.FieldOrigin{
				origin("/recipient", true, resultFact(p, "s-chat", "tool_result", chatTool, true,
					ref("/messages/1/body", false), ref("/messages/0/sender", true))),
			},
			want: grants.Permit, grounds: "from=" + chatTool + ":/messages/0/sender attested",
		},
		{
			name: "an attested pointer in another tool's result lends nothing",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-other", "tool_result", "mcp__chat__read_threads", true, ref("/messages/3/sender", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "a field no schema names keeps the channel's level",
			tool: "mcp__chat__send_message", args: `{"recipient":"general"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/3/channel", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "an attested pointer on a derived source lends nothing",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-notes", "derived", chatTool, true, ref("/messages/3/sender", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "an attested field the value does not wholly come from lends nothing",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice-evil"}`,
			origins: []policy.FieldOrigin{origin("/recipient", false,
				resultFact(p, "s-chat", "tool_result", chatTool, false, ref("/messages/3/sender", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "an unregistered source lends nothing whatever it claims",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true, func() policy.SourceFact {
				f := resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/3/sender", true))
				f.Registered = false
				return f
			}())},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "wildcard is an array index only",
			tool: "mcp__chat__send_message", args: `{"recipient":"alice"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/last/sender", true)))},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow,
		},
		{
			name: "counterparty of a past transaction is a permitted payee; the amount still needs its own ground",
			tool: "mcp__bank__send_money", args: `{"recipient":"GB29NWBK60161331926819","amount":50}`,
			origins: []policy.FieldOrigin{
				origin("/recipient", true, resultFact(p, "s-bank", "tool_result", bankTool, true, ref("/transactions/0/counterparty/iban", true))),
			},
			want: grants.Permit, grounds: "from=" + bankTool + ":/transactions/0/counterparty/iban attested",
		},
		{
			name: "an IBAN quoted in a transaction reference is refused",
			tool: "mcp__bank__send_money", args: `{"recipient":"DE89370400440532013000","amount":50}`,
			origins: []policy.FieldOrigin{
				origin("/recipient", true, resultFact(p, "s-bank", "tool_result", bankTool, true, ref("/transactions/1/reference", false))),
			},
			want: grants.Deny, reason: grants.ReasonAuthorityTooLow, grounds: "from=" + bankTool + ":/transactions/1/reference",
		},
		{
			name: "the user's own word still counts beside content",
			tool: "mcp__chat__send_message", args: `{"recipient":"carol"}`,
			origins: []policy.FieldOrigin{origin("/recipient", true, prompt,
				resultFact(p, "s-chat", "tool_result", chatTool, true, ref("/messages/2/body", false)))},
			want: grants.Permit,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := p.Judge(traced(t, tc.tool, tc.args, tc.origins...), usage{}, now)
			if j.Decision != tc.want || j.Reason != tc.reason {
				t.Fatalf("got %s %s (%s), want %s %s; grounds %q", j.Decision, j.Reason, j.Detail, tc.want, tc.reason, j.Grounds)
			}
			if tc.grounds != "" && !strings.Contains(strings.Join(j.Grounds, "\n"), tc.grounds) {
				t.Fatalf("no grounds line contains %q: %q", tc.grounds, j.Grounds)
			}
		})
	}
}

// TestResultFieldsWithoutSchemas: a policy without result schemas judges
// a request whose sources report result fields exactly as one whose
// sources do not (only the grounds name the field): declaring is the only
// way to widen.
func TestResultFieldsWithoutSchemas(t *testing.T) {
	p := loadPolicy(t, "testdata/results.yaml")
	bare := *p
	bare.Results = nil
	q := mustParse(t, string(bare.Canonical()))
	with := traced(t, "mcp__chat__send_message", `{"recipient":"alice"}`, origin("/recipient", true,
		resultFact(q, "s-chat", "tool_result", chatTool, true, ref("/messages/3/sender", true))))
	without := traced(t, "mcp__chat__send_message", `{"recipient":"alice"}`, origin("/recipient", true,
		resultFact(q, "s-chat", "tool_result", chatTool, true)))
	a, b := q.Judge(with, usage{}, now), q.Judge(without, usage{}, now)
	if a.Decision != grants.Deny || a.Reason != b.Reason || a.Decision != b.Decision || a.Detail != b.Detail {
		t.Fatalf("with fields %s %s %q; without %s %s %q", a.Decision, a.Reason, a.Detail, b.Decision, b.Reason, b.Detail)
	}
	if strings.Join(b.Grounds, "\n") == strings.Join(a.Grounds, "\n") || strings.Contains(strings.Join(a.Grounds, "\n"), "attested") {
		t.Fatalf("grounds: with %q, without %q", a.Grounds, b.Grounds)
	}
}

// TestResultFieldClass: the class and level the policy gives a result
// field, by channel, tool and concrete pointer.
func TestResultFieldClass(t *testing.T) {
	p := loadPolicy(t, "testdata/results.yaml")
	for _, tc := range []struct {
		channel, tool, ptr string
		class              string
		level              authority.Level
	}{
		{"tool_result", chatTool, "/messages/0/sender", policy.ClassAttested, authority.Instruction},
		{"tool_result", chatTool, "/messages/12/sender", policy.ClassAttested, authority.Instruction},
		{"tool_result", chatTool, "/messages/012/sender", "", authority.Evidence},
		{"tool_result", chatTool, "/messages/0/sender/x", "", authority.Evidence},
		{"tool_result", chatTool, "/messages/0", "", authority.Evidence},
		{"tool_result", chatTool, "/messages/0/body", policy.ClassContent, authority.Evidence},
		{"tool_result", "mcp__chat__list_members", "/members/4", policy.ClassAttested, authority.Instruction},
		{"tool_result", "mcp__chat__list_members", "/messages/0/sender", "", authority.Evidence},
		{"web_fetch", chatTool, "/messages/0/sender", "", authority.Evidence},
		{"file_read", chatTool, "/messages/0/sender", "", authority.Evidence},
		{"tool_result", "mcp__unknown__x", "/messages/0/sender", "", authority.Evidence},
	} {
		class, level := p.ResultFieldClass(tc.channel, tc.tool, tc.ptr)
		if class != tc.class || level != tc.level {
			t.Errorf("ResultFieldClass(%s, %s, %s) = %q %s, want %q %s", tc.channel, tc.tool, tc.ptr, class, level, tc.class, tc.level)
		}
	}
}

// TestResultSchemaValidation: every malformed schema is refused with an
// error naming its field, and a valid one round-trips its canonical form.
func TestResultSchemaValidation(t *testing.T) {
	base := loadPolicy(t, "testdata/results.yaml")
	for _, tc := range []struct {
		name   string
		schema policy.ResultSchema
		field  string
	}{
		{"unknown surface", policy.ResultSchema{Surface: "nope", Fields: []policy.ResultField{{Pointer: "/a", Class: "content"}}}, "results[3].surface"},
		{"no fields", policy.ResultSchema{Surface: "chat_read"}, "results[3].fields"},
		{"bad class", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/a", Class: "trusted"}}}, "results[3].fields[0].class"},
		{"attested without level", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/a", Class: "attested"}}}, "results[3].fields[0].authority"},
		{"attested at evidence", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/a", Class: "attested", Authority: "evidence"}}}, "results[3].fields[0].authority"},
		{"content with a level", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/a", Class: "content", Authority: "instruction"}}}, "results[3].fields[0].authority"},
		{"relative pointer", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "a", Class: "content"}}}, "results[3].fields[0].pointer"},
		{"root pointer", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/", Class: "content"}}}, "results[3].fields[0].pointer"},
		{"partial wildcard", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/m/x*", Class: "content"}}}, "results[3].fields[0].pointer"},
		{"bad escape", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: "/m/~2", Class: "content"}}}, "results[3].fields[0].pointer"},
		{"overlap", policy.ResultSchema{Surface: "chat_read", Fields: []policy.ResultField{
			{Pointer: "/m/*/from", Class: "attested", Authority: "instruction"}, {Pointer: "/m/0/from", Class: "content"}}}, "results[3].fields[1].pointer"},
		{"bad tool pattern", policy.ResultSchema{Surface: "chat_read", Tools: []string{""}, Fields: []policy.ResultField{{Pointer: "/a", Class: "content"}}}, "results[3].tools[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := *base
			doc.Results = append(append([]policy.ResultSchema(nil), base.Results...), tc.schema)
			_, err := policy.Parse(doc.Canonical())
			if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
		})
	}
	again := mustParse(t, string(base.Canonical()))
	if string(again.Canonical()) != string(base.Canonical()) || len(again.Results) != 3 {
		t.Fatalf("canonical form does not round-trip")
	}
}

// TestRecommendedResultSchemas: the recommended policy attests the
// identities mail, chat, bank and drive systems set themselves, and keeps
// as content what the author of a mail, an invitation or a file chooses.
func TestRecommendedResultSchemas(t *testing.T) {
	p := policy.Recommended()
	for _, tc := range []struct {
		tool, ptr string
		class     string
	}{
		{"mcp__slack__read_channel_messages", "/3/sender", policy.ClassAttested},
		{"mcp__slack__read_channel_messages", "/3/body", policy.ClassContent},
		{"mcp__slack__get_users_in_channel", "/0", policy.ClassAttested},
		{"mcp__workspace__get_received_emails", "/0/sender", policy.ClassAttested},
		{"mcp__workspace__get_received_emails", "/0/recipients/1", policy.ClassContent},
		{"mcp__workspace__get_received_emails", "/0/cc/0", policy.ClassContent},
		{"mcp__workspace__get_received_emails", "/0/body", policy.ClassContent},
		{"mcp__workspace__get_day_calendar_events", "/0/participants/2", policy.ClassContent},
		{"mcp__bank__get_most_recent_transactions", "/4/recipient", policy.ClassAttested},
		{"mcp__bank__get_most_recent_transactions", "/4/subject", policy.ClassContent},
		{"mcp__drive__list_files", "/0/owner", policy.ClassAttested},
		{"mcp__drive__list_files", "/0/filename", policy.ClassContent},
		{"mcp__other__read_channel_messages_v2", "/0/sender", ""},
	} {
		class, level := p.ResultFieldClass("tool_result", tc.tool, tc.ptr)
		if class != tc.class || (class == policy.ClassAttested) != (level == authority.Instruction) {
			t.Errorf("%s %s: %q %s, want %q", tc.tool, tc.ptr, class, level, tc.class)
		}
	}
}

// FuzzResultFields: any declared pattern and any reported pointer judge
// without panicking and deterministically; a field lends a level only
// when it is attested, whole, and from a registered tool_result source,
// and never lowers a source's own level.
func FuzzResultFields(f *testing.F) {
	f.Add("/messages/*/sender", "attested", "/messages/3/sender", true, "tool_result", true)
	f.Add("/a/*/*", "content", "/a/0/1", true, "tool_result", true)
	f.Add("/x~1y/*", "attested", "/x~1y/01", false, "derived", true)
	f.Add("/*", "attested", "/-1", true, "tool_result", false)
	f.Fuzz(func(t *testing.T, pattern, class, ptr string, whole bool, channel string, registered bool) {
		base := loadPolicy(t, "testdata/results.yaml")
		doc := *base
		doc.Results = []policy.ResultSchema{{Surface: "chat_read", Fields: []policy.ResultField{{Pointer: pattern, Class: class, Authority: "policy"}}}}
		if class == policy.ClassContent {
			doc.Results[0].Fields[0].Authority = ""
		}
		p, err := policy.Parse(doc.Canonical())
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		src := resultFact(p, "s1", channel, chatTool, true, ref(ptr, whole))
		src.Registered = registered
		r := traced(t, "mcp__chat__send_message", `{"recipient":"x"}`, origin("/recipient", true, src))
		j := p.Judge(r, usage{}, now)
		if again := p.Judge(r, usage{}, now); j.Decision != again.Decision || strings.Join(j.Grounds, "\n") != strings.Join(again.Grounds, "\n") {
			t.Fatal("not deterministic")
		}
		lends := class == policy.ClassAttested && whole && registered && channel == "tool_result"
		if j.Decision == grants.Permit && !lends {
			t.Fatalf("permitted without an attested whole field: %q %q %q %v %q %v", pattern, class, ptr, whole, channel, registered)
		}
		_, _ = p.ResultFieldClass(channel, chatTool, ptr)
	})
}
