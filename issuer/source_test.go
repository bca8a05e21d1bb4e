package issuer

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

func TestSourceCommand(t *testing.T) {
	d := events.Sum([]byte("the content"))
	hex := d.String()
	origins := func(n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "o" + strconv.Itoa(i)
		}
		b, _ := json.Marshal(ids)
		return string(b)
	}
	cases := []struct {
		name, body string
		missing    string // "" for accepted
	}{
		{"user prompt", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"` + hex + `"}`, ""},
		{"upper-case digest", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"` + strings.ToUpper(hex) + `"}`, ""},
		{"file", `{"v":1,"id":"f1","channel":"file_read","scope":"session","session":"s1","content_digest":"` + hex + `","path":"/work/w1/a.md"}`, ""},
		{"derived", `{"v":1,"id":"d1","channel":"derived","content_digest":"` + hex + `","origins":` + origins(api.MaxSourceOrigins) + `,"model_made":true}`, ""},
		{"too many origins", `{"v":1,"id":"d1","channel":"derived","content_digest":"` + hex + `","origins":` + origins(api.MaxSourceOrigins+1) + `}`, "origins"},
		{"self origin", `{"v":1,"id":"d1","channel":"derived","content_digest":"` + hex + `","origins":["d1"]}`, "origins"},
		{"repeated origin", `{"v":1,"id":"d1","channel":"derived","content_digest":"` + hex + `","origins":["a","a"]}`, "origins"},
		{"bad origin", `{"v":1,"id":"d1","channel":"derived","content_digest":"` + hex + `","origins":["a b"]}`, "origins"},
		{"bad id", `{"v":1,"id":"a.b","channel":"user_prompt","content_digest":"` + hex + `"}`, "id"},
		{"no id", `{"v":1,"channel":"user_prompt","content_digest":"` + hex + `"}`, "id"},
		{"no channel", `{"v":1,"id":"u1","content_digest":"` + hex + `"}`, "channel"},
		{"unknown channel", `{"v":1,"id":"u1","channel":"telepathy","content_digest":"` + hex + `"}`, "channel"},
		{"bad scope", `{"v":1,"id":"u1","channel":"user_prompt","scope":"global","content_digest":"` + hex + `"}`, "scope"},
		{"no digest", `{"v":1,"id":"u1","channel":"user_prompt"}`, "content_digest"},
		{"short digest", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"abcd"}`, "content_digest"},
		{"zero digest", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"` + zeroHash + `"}`, "content_digest"},
		{"relative path", `{"v":1,"id":"f1","channel":"file_read","content_digest":"` + hex + `","path":"a.md"}`, "path"},
		{"authority claimed", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"` + hex + `","authority":"policy"}`, "body"},
		{"owner claimed", `{"v":1,"id":"u1","channel":"user_prompt","content_digest":"` + hex + `","owner":"w2"}`, "body"},
		{"control char in tool", `{"v":1,"id":"t1","channel":"tool_result","tool":"a\u0001b","content_digest":"` + hex + `"}`, "tool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, e := sourceCommand("w1", []byte(tc.body))
			if tc.missing == "" {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				if c.Op != fsm.OpSource || c.Caller != "w1" || c.ContentDigest != d || (c.Scope != "task" && c.Scope != "session") {
					t.Fatalf("command %+v", c)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted: %+v", c)
			}
			checkRefusal(t, []byte(tc.body), e)
			if e.missing != tc.missing {
				t.Fatalf("refusal names %q, want %q: %s", e.missing, tc.missing, e.detail)
			}
		})
	}
}

func TestGrantCommandTraces(t *testing.T) {
	grant := func(prov string) string {
		return `{"v":1,"lane":"coordinator","tool":"send_email","args":{"to":"a@example.com"},"idempotency_key":"k","provenance":` + prov + `}`
	}
	matches := func(n int) string {
		ms := make([]string, n)
		for i := range ms {
			ms[i] = `{"source":"s` + strconv.Itoa(i) + `","transform":"raw"}`
		}
		return "[" + strings.Join(ms, ",") + "]"
	}
	traces := func(n int) string {
		ts := make([]string, n)
		for i := range ts {
			ts[i] = `{"field":"/f` + strconv.Itoa(i) + `"}`
		}
		return "[" + strings.Join(ts, ",") + "]"
	}
	cases := []struct {
		name, prov string
		refused    bool
	}{
		{"one", `[{"field":"/to","covered":true,"matches":[{"source":"u1","transform":"raw"}]}]`, false},
		{"every transform and part", `[{"field":"/to","matches":[{"source":"a","transform":"raw"},{"source":"b","transform":"base64"},{"source":"c","transform":"hex"},{"source":"d","transform":"percent","part":"path"},{"source":"e","transform":"dns_labels","part":"host"},{"source":"f","transform":"dns_labels+hex","part":"host"}]}]`, false},
		{"no matches", `[{"field":"/to"}]`, false},
		{"max traces", traces(api.MaxTraces), false},
		{"too many traces", traces(api.MaxTraces + 1), true},
		{"max matches", `[{"field":"/to","matches":` + matches(api.MaxTraceMatches) + `}]`, false},
		{"too many matches", `[{"field":"/to","matches":` + matches(api.MaxTraceMatches+1) + `}]`, true},
		{"not a pointer", `[{"field":"to"}]`, true},
		{"empty field", `[{"field":""}]`, true},
		{"repeated field", `[{"field":"/to"},{"field":"/to"}]`, true},
		{"bad source", `[{"field":"/to","matches":[{"source":"a/b","transform":"raw"}]}]`, true},
		{"no transform", `[{"field":"/to","matches":[{"source":"a"}]}]`, true},
		{"unknown transform", `[{"field":"/to","matches":[{"source":"a","transform":"rot13"}]}]`, true},
		{"unknown part", `[{"field":"/to","matches":[{"source":"a","transform":"raw","part":"fragment"}]}]`, true},
		{"level claimed", `[{"field":"/to","authority":"policy"}]`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, e := grantCommand("w1", []byte(grant(tc.prov)))
			if !tc.refused {
				if e != nil {
					t.Fatalf("refused: %+v", e)
				}
				var want []api.FieldTrace
				if err := json.Unmarshal([]byte(tc.prov), &want); err != nil {
					t.Fatal(err)
				}
				checkTraces(t, []byte(tc.prov), want, c.Traces)
				return
			}
			if e == nil {
				t.Fatalf("accepted: %+v", c.Traces)
			}
			checkRefusal(t, []byte(tc.prov), e)
		})
	}
}

// The issuer's check and the state machine both accept every channel of
// authority.Channels, and nothing else.
func TestSourceChannelsAgree(t *testing.T) {
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: int64(time.Second), Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.Recommended().Canonical()}}})
	digest := events.Sum([]byte("content")).String()
	index := uint64(2)
	// register answers a registration as the issuer and the state machine
	// do: the issuer's refusal (it checks a source against the state
	// machine's rules before proposing it), or the state machine's answer.
	register := func(id, channel string, origins ...string) grants.Envelope {
		t.Helper()
		body, err := json.Marshal(api.SourceRequest{V: api.Version, ID: id, Channel: channel, ContentDigest: digest, Origins: origins})
		if err != nil {
			t.Fatal(err)
		}
		c, rerr := sourceCommand("w1", body)
		if rerr != nil {
			return rerr.envelope()
		}
		index++
		return fsm.Apply(s, index, fsm.Batch{Time: int64(index) * int64(time.Second), Node: "n1", Commands: []fsm.Command{c}})[0]
	}
	for i, ch := range authority.Channels() {
		var origins []string
		if ch == authority.ChannelDerived {
			origins = []string{"s0"}
		}
		if env := register("s"+strconv.Itoa(i), ch, origins...); env.Decision != grants.Permit {
			t.Errorf("channel %q: the state machine refused it: %+v", ch, env)
		}
	}
	for i, ch := range []string{"secrets", "Model_Output", "model-output", "web"} {
		if authority.KnownChannel(ch) {
			t.Errorf("authority.KnownChannel(%q) holds", ch)
		}
		if env := register("x"+strconv.Itoa(i), ch); env.Decision == grants.Permit {
			t.Errorf("channel %q: the state machine accepted it", ch)
		}
	}
	for _, ch := range authority.Channels() {
		if !authority.KnownChannel(ch) {
			t.Errorf("authority.KnownChannel(%q) does not hold", ch)
		}
	}
}
