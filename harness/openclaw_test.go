package harness

import (
	"errors"
	"testing"
)

// OpenClaw's tools reach writ under the names and argument names the
// default policy's surfaces and the provenance readers know; other tools
// keep their own names; the key is the gateway session and toolCallId.
func TestOpenClawCallMapping(t *testing.T) {
	for _, c := range []struct{ tool, params, wantTool, wantArgs string }{
		{"exec", `{"command":"ls","workdir":"/w"}`, "Bash", `{"command":"ls","workdir":"/w"}`},
		{"read", `{"path":"/etc/hosts"}`, "Read", `{"file_path":"/etc/hosts"}`},
		{"write", `{"path":"a.txt","content":"x"}`, "Write", `{"content":"x","file_path":"a.txt"}`},
		{"edit", `{"path":"a","oldText":"x","newText":"y"}`, "Edit", `{"file_path":"a","new_string":"y","old_string":"x"}`},
		{"apply_patch", `{"input":"*** Begin Patch"}`, "apply_patch", `{"patch":"*** Begin Patch"}`},
		{"web_fetch", `{"url":"https://example.com"}`, "WebFetch", `{"url":"https://example.com"}`},
		{"message", `{"to":"#ops","text":"hi"}`, "message", `{"text":"hi","to":"#ops"}`},
		{"read", `{"path":"a","file_path":"b"}`, "Read", `{"file_path":"b","path":"a"}`},
		{"session_status", ``, "session_status", `{}`},
	} {
		call, err := OpenClawCall("agent:main:s1", "call_1", c.tool, []byte(c.params))
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.params, err)
		}
		if call.Tool != c.wantTool || string(call.Args) != c.wantArgs {
			t.Errorf("%s %s: got %s %s, want %s %s", c.tool, c.params, call.Tool, call.Args, c.wantTool, c.wantArgs)
		}
		if call.IdempotencyKey() != "openclaw:agent:main:s1:call_1" {
			t.Errorf("key %q", call.IdempotencyKey())
		}
	}
	for _, bad := range []struct{ session, id, tool, params string }{
		{"", "c", "exec", `{}`}, {"s", "", "exec", `{}`}, {"s", "c", "", `{}`},
		{"s", "c", "exec", `[1]`}, {"s", "c\n", "exec", `{}`}, {"s", "c", "exec", `{"a":1,"a":2}`}, {"s", "c", "read", `{"path":"a","path":"b"}`},
	} {
		if _, err := OpenClawCall(bad.session, bad.id, bad.tool, []byte(bad.params)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: want ErrMalformed, got %v", bad, err)
		}
	}
}
