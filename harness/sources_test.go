package harness_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// The fields a source registration reads: the prompt, the start's source
// and cwd, and tool_response in any shape.
func TestDecodeSourceFields(t *testing.T) {
	in, err := harness.Decode(bytes.NewReader(readFixture(t, "claude-code/user_prompt_submit.json")))
	if err != nil {
		t.Fatal(err)
	}
	if !in.IsSourceEvent() || in.IsToolEvent() || !strings.Contains(string(in.Prompt), "FR7630006000011234567890189") ||
		in.WorkDir() != "/home/dev/shop" || in.CheckSession() != nil {
		t.Fatalf("UserPromptSubmit: %+v", in)
	}
	in, err = harness.Decode(bytes.NewReader(readFixture(t, "codex/session_start.json")))
	if err != nil {
		t.Fatal(err)
	}
	if !in.IsSourceEvent() || in.Source != "startup" || in.WorkDir() != "/home/dev/ledger" {
		t.Fatalf("Codex SessionStart: %+v", in)
	}
	in, err = harness.Decode(bytes.NewReader(readFixture(t, "codex/post_bash.json")))
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := harness.ResponseText(in.ToolResponse, 1<<20); !strings.Contains(string(text), "12 passed") {
		t.Fatalf("Codex tool_response (a string): %q", text)
	}

	// A harness changing the type of an informational field must not make
	// the event malformed: the field reads as absent.
	odd := `{"session_id":"s","hook_event_name":"UserPromptSubmit","cwd":42,"prompt":{"text":"hi"},"source":null,"tool_response":[1,"x"]}`
	in, err = harness.Decode(strings.NewReader(odd))
	if err != nil {
		t.Fatalf("odd types: %v", err)
	}
	if in.Cwd != "" || in.Prompt != "" || in.Source != "" || string(in.ToolResponse) != `[1,"x"]` {
		t.Fatalf("odd types decoded as %+v", in)
	}
	for cwd, want := range map[string]string{
		"/home/dev/shop/": "/home/dev/shop", "relative/dir": "", "": "", "/a/../b": "/b", "/bad\x01dir": "",
	} {
		raw, _ := json.Marshal(map[string]string{"hook_event_name": "SessionStart", "cwd": cwd})
		in, err := harness.Decode(bytes.NewReader(raw))
		if err != nil || in.WorkDir() != want {
			t.Errorf("cwd %q: WorkDir %q (want %q), %v", cwd, in.WorkDir(), want, err)
		}
	}
	if err := (harness.HookInput{HookEventName: "SessionStart"}).CheckSession(); err == nil {
		t.Fatal("a session event without session_id passed")
	}
}

func TestClassifyTool(t *testing.T) {
	cwd := "/home/dev/shop"
	tests := []struct {
		tool, input string
		want        harness.ToolSource
	}{
		{"WebFetch", `{"url":"https://x"}`, harness.ToolSource{Channel: "web_fetch"}},
		{"WebSearch", `{"query":"q"}`, harness.ToolSource{Channel: "web_fetch"}},
		{"Read", `{"file_path":"/etc/hosts"}`, harness.ToolSource{Channel: "file_read", Path: "/etc/hosts"}},
		{"Read", `{"file_path":"src/../README.md"}`, harness.ToolSource{Channel: "file_read", Path: "/home/dev/shop/README.md"}},
		{"NotebookRead", `{"notebook_path":"/n/a.ipynb"}`, harness.ToolSource{Channel: "file_read", Path: "/n/a.ipynb"}},
		{"Grep", `{"pattern":"x","path":"/srv"}`, harness.ToolSource{Channel: "file_read", Path: "/srv"}},
		{"Glob", `{"pattern":"*.go"}`, harness.ToolSource{Channel: "file_read", Path: cwd}},
		{"Task", `{"prompt":"look"}`, harness.ToolSource{Channel: "peer_message"}},
		{"Agent", `{"prompt":"look"}`, harness.ToolSource{Channel: "peer_message"}},
		{"Bash", `{"command":"ls"}`, harness.ToolSource{Channel: "tool_result"}},
		{"mcp__github__get_issue", `{}`, harness.ToolSource{Channel: "tool_result"}},
		{"Write", `{"file_path":"a","content":"x"}`, harness.ToolSource{Channel: "derived", Write: true}},
		{"apply_patch", `{"command":"x"}`, harness.ToolSource{Channel: "derived", Write: true}},
	}
	for _, tc := range tests {
		if got := harness.ClassifyTool(tc.tool, json.RawMessage(tc.input), cwd); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.tool, tc.input, got, tc.want)
		}
	}
	// No cwd: a relative path cannot be made absolute.
	if got := harness.ClassifyTool("Read", json.RawMessage(`{"file_path":"a.txt"}`), ""); got.Path != "" {
		t.Fatalf("relative path without cwd: %+v", got)
	}
}

func TestWritten(t *testing.T) {
	cwd := "/p"
	patch := "*** Begin Patch\n*** Update File: src/balance.rs\n@@ fn balance\n-    old()\n+    new_line_one()\n+    new_line_two()\n*** End Patch\n"
	pin, _ := json.Marshal(map[string]string{"command": patch})
	tests := []struct {
		tool, input, path, content string
		ok                         bool
	}{
		{"Write", `{"file_path":"/p/a.md","content":"hello"}`, "/p/a.md", "hello", true},
		{"Edit", `{"file_path":"b.md","old_string":"x","new_string":"y"}`, "/p/b.md", "y", true},
		{"MultiEdit", `{"file_path":"/p/c","edits":[{"old_string":"a","new_string":"one"},{"old_string":"b","new_string":"two"}]}`, "/p/c", "one\ntwo", true},
		{"NotebookEdit", `{"notebook_path":"/p/n.ipynb","new_source":"print(1)"}`, "/p/n.ipynb", "print(1)", true},
		{"apply_patch", string(pin), "/p/src/balance.rs", "    new_line_one()\n    new_line_two()\n", true},
		{"Write", `{"file_path":"/p/a.md","content":""}`, "/p/a.md", "", false},
		{"Bash", `{"command":"ls"}`, "", "", false},
	}
	for _, tc := range tests {
		path, content, ok := harness.Written(tc.tool, json.RawMessage(tc.input), cwd)
		if path != tc.path || string(content) != tc.content || ok != tc.ok {
			t.Errorf("%s: %q %q %v, want %q %q %v", tc.tool, path, content, ok, tc.path, tc.content, tc.ok)
		}
	}
}

func TestResponseText(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`"plain text"`, "plain text"},
		{`{"stdout":"PASS","stderr":"","interrupted":false,"code":0}`, "PASS\n0"},
		{`{"result":"page","nested":{"k":["a",{"b":"c"}],"n":1.50}}`, "page\na\nc\n1.50"},
		{`[{"type":"text","text":"from the subagent"}]`, "text\nfrom the subagent"},
		{`42`, "42"},
		{`true`, "true"},
		{`null`, ""},
		{``, ""},
		{`{}`, ""},
		{`{"interrupted":false}`, ""},
	}
	for _, tc := range tests {
		if got, cut := harness.ResponseText(json.RawMessage(tc.raw), 1<<20); string(got) != tc.want || cut {
			t.Errorf("%s: %q (cut %v), want %q", tc.raw, got, cut, tc.want)
		}
	}
	// Bounded at a rune boundary.
	long, _ := json.Marshal(strings.Repeat("é", 100))
	got, cut := harness.ResponseText(long, 51)
	if !cut || len(got) != 50 || !utf8.Valid(got) {
		t.Fatalf("bounded: %d bytes, cut %v, valid %v", len(got), cut, utf8.Valid(got))
	}
	obj, _ := json.Marshal(map[string]any{"a": strings.Repeat("x", 80), "b": strings.Repeat("y", 80)})
	if got, cut := harness.ResponseText(obj, 100); !cut || len(got) != 100 || !strings.HasPrefix(string(got), strings.Repeat("x", 80)+"\n") {
		t.Fatalf("bounded object: %q %v", got, cut)
	}
}

// The reason texts of provenance refusals say where the value came from,
// what to do next and the grounds, bounded.
func TestProvenanceReasons(t *testing.T) {
	channels := func(id string) (string, bool) {
		switch id {
		case "s-web":
			return "web_fetch", true
		case "s-env":
			return "file_read", true
		}
		return "", false
	}
	tooLow := grants.Envelope{
		Decision: grants.Deny, Reason: grants.ReasonAuthorityTooLow, Recovery: grants.RecoverNone, Seq: 31,
		Missing: "/to traced to instruction",
		Detail:  "rule pay-recipient: /to is evidence (source s-web)",
		Grounds: []string{
			"field=/amount model_made authority=evidence",
			"field=/to source=s-file authority=instruction counter=source/s-file=0 transform=raw",
			"field=/to source=s-web authority=evidence counter=source/s-web=0 transform=raw",
			"field=/to source=s-web authority=evidence counter=source/s-web=0 transform=base64",
		},
	}
	r := harness.RefusalReasonWith("mcp__bank__pay", tooLow, channels)
	for _, want := range []string{
		"authority_too_low", "The value of /to came from web_fetch content (source s-web, evidence)",
		"below the instruction authority", "ask the user to confirm this value", "re-encoded",
		"Grounds: field=/to source=s-file", "(+1 more)", "receipt 31",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("authority_too_low lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "s-file authority=instruction counter=source/s-file=0 transform=raw came from") || strings.Contains(r, "content (source s-file") {
		t.Errorf("a source at the required level was blamed:\n%s", r)
	}
	// Without a lookup the id is still named.
	if r := harness.RefusalReason("mcp__bank__pay", tooLow); !strings.Contains(r, "content of source s-web, evidence") {
		t.Errorf("no lookup:\n%s", r)
	}

	// A structured result's field is named with the source.
	body := tooLow
	body.Grounds = []string{"field=/to source=s-web authority=evidence counter=source/s-web=0 transform=raw whole from=mcp__mail__get_inbox:/messages/1/body"}
	if r := harness.RefusalReasonWith("pay", body, channels); !strings.Contains(r, "came from web_fetch content (source s-web, evidence; field /messages/1/body of a mcp__mail__get_inbox result)") {
		t.Errorf("result field:\n%s", r)
	}

	modelMade := tooLow
	modelMade.Grounds = []string{"field=/to model_made authority=evidence"}
	if r := harness.RefusalReasonWith("pay", modelMade, channels); !strings.Contains(r, "/to traced to nothing registered: it counts as model-made") {
		t.Errorf("model-made:\n%s", r)
	}

	review := tooLow
	review.Decision, review.Reason, review.ReviewID, review.Recovery = grants.ApprovalRequired, grants.ReasonAuthorityReview, "rv-1", grants.RecoverRefreshApproval
	r = harness.RefusalReasonWith("pay", review, channels)
	for _, want := range []string{"review rv-1", "A person has to decide", "web_fetch content", "ask the user to confirm", "owner may instead approve"} {
		if !strings.Contains(r, want) {
			t.Errorf("authority_review lacks %q:\n%s", want, r)
		}
	}

	protected := grants.Envelope{
		Decision: grants.Deny, Reason: grants.ReasonProtectedTransfer, Recovery: grants.RecoverNone,
		Missing: "/body free of protected content", Detail: "/body carries protected source s-env across boundary:egress",
		Grounds: []string{`field=/body source=s-env authority=evidence counter=source/s-env=2 transform=base64 partial`},
	}
	r = harness.RefusalReasonWith("send_mail", protected, channels)
	for _, want := range []string{"protected_transfer", "protected source (file_read content (source s-env))", "through /body", "do not send it", "transform=base64"} {
		if !strings.Contains(r, want) {
			t.Errorf("protected_transfer lacks %q:\n%s", want, r)
		}
	}

	memory := grants.Envelope{
		Decision: grants.ApprovalRequired, Reason: grants.ReasonMemoryWrite, ReviewID: "rv-9", Recovery: grants.RecoverRefreshApproval,
		Missing: "owner review of a write to memory path */memory/*",
	}
	r = harness.RefusalReasonWith("Write", memory, nil)
	for _, want := range []string{"memory_write_review", "draft awaiting the owner's approval", "A person has to decide", "do not write the same content another way"} {
		if !strings.Contains(r, want) {
			t.Errorf("memory_write_review lacks %q:\n%s", want, r)
		}
	}

	// Bounded: long pointers and many grounds do not blow up the text;
	// quoted values parse.
	long := tooLow
	field := "/" + strings.Repeat("k", 500)
	long.Missing = field + " traced to instruction"
	long.Grounds = nil
	for i := 0; i < 50; i++ {
		long.Grounds = append(long.Grounds, fmt.Sprintf(`field=%s source="s web %d %s" authority=evidence counter=none transform=raw`, field, i, strings.Repeat("z", 40)))
	}
	r = harness.RefusalReasonWith("pay", long, channels)
	if len(r) > 2600 || strings.Contains(r, "\n") || !strings.Contains(r, "(+47 more)") || !strings.Contains(r, "(+46 more sources)") {
		t.Errorf("long grounds: %d bytes:\n%s", len(r), r)
	}

	// Other reasons are unchanged by grounds.
	plain := grants.Envelope{Decision: grants.Deny, Reason: grants.ReasonDeniedByPolicy, Grounds: []string{"field=/x model_made authority=evidence"}}
	if r := harness.RefusalReasonWith("Bash", plain, channels); strings.Contains(r, "Grounds") || strings.Contains(r, "model-made") {
		t.Errorf("denied_by_policy: %s", r)
	}
}

func TestFailPrompt(t *testing.T) {
	a := harness.FailPrompt(errStr("cannot reach\nthe issuer"))
	if a.Exit != harness.ExitBlock || a.Stdout != nil || a.Stderr != "writ: cannot reach the issuer — the prompt was not sent; submit it again" {
		t.Fatalf("%+v", a)
	}
}

type errStr string

func (e errStr) Error() string { return string(e) }

// TestResultResource: a grant target names the resource a result came
// from in the form the issuer accepts as a source path; a shell or list
// target names none.
func TestResultResource(t *testing.T) {
	for target, want := range map[string]string{
		"path:/home/u/bills/a.txt": "/home/u/bills/a.txt", "url:https://x.example/a": "url:https://x.example/a",
		"raw:m-1": "raw:m-1", "email:a@b.example": "email:a@b.example", "shell:sha256:00": "",
		`list:["email:a@b"]`: "", "": "", "path:~/x": "", "raw:a\x01b": "",
	} {
		if got := harness.ResultResource(target); got != want {
			t.Errorf("ResultResource(%q) = %q, want %q", target, got, want)
		}
	}
}
