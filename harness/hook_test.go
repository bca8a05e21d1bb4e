package harness_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeFixtures(t *testing.T) {
	tests := []struct {
		file, harness, event, tool, agentType string
		tool_event                            bool
	}{
		{"claude-code/pre_bash.json", harness.ClaudeCode, "PreToolUse", "Bash", "", true},
		{"claude-code/pre_write.json", harness.ClaudeCode, "PreToolUse", "Write", "", true},
		{"claude-code/pre_edit.json", harness.ClaudeCode, "PreToolUse", "Edit", "", true},
		{"claude-code/pre_webfetch.json", harness.ClaudeCode, "PreToolUse", "WebFetch", "", true},
		{"claude-code/pre_mcp.json", harness.ClaudeCode, "PreToolUse", "mcp__github__create_issue", "", true},
		{"claude-code/pre_subagent_explore_bash.json", harness.ClaudeCode, "PreToolUse", "Bash", "Explore", true},
		{"claude-code/pre_subagent_general_edit.json", harness.ClaudeCode, "PreToolUse", "Edit", "general-purpose", true},
		{"claude-code/post_bash.json", harness.ClaudeCode, "PostToolUse", "Bash", "", true},
		{"claude-code/post_failure_bash.json", harness.ClaudeCode, "PostToolUseFailure", "Bash", "", true},
		{"claude-code/session_start.json", harness.ClaudeCode, "SessionStart", "", "", false},
		{"claude-code/user_prompt_submit.json", harness.ClaudeCode, "UserPromptSubmit", "", "", false},
		{"claude-code/post_webfetch.json", harness.ClaudeCode, "PostToolUse", "WebFetch", "", true},
		{"codex/session_start.json", harness.Codex, "SessionStart", "", "", false},
		{"codex/user_prompt_submit.json", harness.Codex, "UserPromptSubmit", "", "", false},
		{"codex/pre_bash.json", harness.Codex, "PreToolUse", "Bash", "", true},
		{"codex/pre_apply_patch.json", harness.Codex, "PreToolUse", "apply_patch", "", true},
		{"codex/post_bash.json", harness.Codex, "PostToolUse", "Bash", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			raw := readFixture(t, tc.file)
			in, err := harness.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if in.HookEventName != tc.event || in.IsToolEvent() != tc.tool_event {
				t.Fatalf("event %q tool=%v", in.HookEventName, in.IsToolEvent())
			}
			if !tc.tool_event {
				if _, err := in.Call(tc.harness); !errors.Is(err, harness.ErrMalformed) {
					t.Fatalf("Call on a non-tool event: %v", err)
				}
				return
			}
			c, err := in.Call(tc.harness)
			if err != nil {
				t.Fatal(err)
			}
			if c.Tool != tc.tool || c.AgentType != tc.agentType || c.Session == "" || c.CallID == "" {
				t.Fatalf("call %+v", c)
			}
			// The args are the canonical form of tool_input.
			var doc struct {
				ToolInput json.RawMessage `json:"tool_input"`
			}
			_ = json.Unmarshal(raw, &doc)
			want, _ := args.CanonicalJSON(doc.ToolInput)
			if !bytes.Equal(c.Args, want) {
				t.Fatalf("args %s, want %s", c.Args, want)
			}
			if k := c.IdempotencyKey(); k != tc.harness+":"+c.Session+":"+c.CallID {
				t.Fatalf("key %q", k)
			}
			if s := c.GrantSession(); tc.agentType == "" && s != c.Session || tc.agentType != "" && s != c.Session+"/"+in.AgentID {
				t.Fatalf("grant session %q", s)
			}
		})
	}
}

// The PostToolUse hook must bind to the PreToolUse grant: same key, same
// canonical args, whatever else the post event carries.
func TestPostEventFindsThePreCall(t *testing.T) {
	pre, err := harness.Decode(bytes.NewReader(readFixture(t, "claude-code/pre_bash.json")))
	if err != nil {
		t.Fatal(err)
	}
	post, err := harness.Decode(bytes.NewReader(readFixture(t, "claude-code/post_bash.json")))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := pre.Call(harness.ClaudeCode)
	b, _ := post.Call(harness.ClaudeCode)
	if a.IdempotencyKey() != b.IdempotencyKey() || !bytes.Equal(a.Args, b.Args) || a.Tool != b.Tool {
		t.Fatalf("pre %+v\npost %+v", a, b)
	}
	if o, ok := harness.PostOutcome(post.HookEventName); !ok || o != grants.OutcomeConfirmed {
		t.Fatalf("PostToolUse outcome %q %v", o, ok)
	}
	if o, ok := harness.PostOutcome(harness.EventPostToolUseFailure); !ok || o != grants.OutcomeFailed {
		t.Fatalf("PostToolUseFailure outcome %q %v", o, ok)
	}
	if _, ok := harness.PostOutcome(harness.EventPreToolUse); ok {
		t.Fatal("PreToolUse has no outcome")
	}
	if v := harness.Verifier(harness.ClaudeCode); v != "harness:claude-code" {
		t.Fatalf("verifier %q", v)
	}
}

func TestDecodeMalformed(t *testing.T) {
	ok := `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t","tool_input":{"command":"ls"}}`
	big := `{"hook_event_name":"PreToolUse","pad":"` + strings.Repeat("x", harness.MaxHookInput) + `"}`
	tests := []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"blank", " \n\t", "empty"},
		{"not json", "PreToolUse Bash", "not a JSON object"},
		{"array", `[` + ok + `]`, "not a JSON object"},
		{"truncated", ok[:40], "unexpected EOF"},
		{"trailing", ok + ok, "trailing"},
		{"no event", `{"session_id":"s"}`, "hook_event_name"},
		{"event not a string", `{"hook_event_name":7}`, "hook_event_name"},
		{"too large", big, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := harness.Decode(strings.NewReader(tc.in))
			if !errors.Is(err, harness.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
	// Fields writ does not use may have any type.
	if _, err := harness.Decode(strings.NewReader(`{"hook_event_name":"PreToolUse","cwd":7,"transcript_path":null,"duration_ms":"x","tool_response":[1]}`)); err != nil {
		t.Fatalf("unused fields broke decoding: %v", err)
	}
}

func TestCallMalformed(t *testing.T) {
	base := map[string]any{
		"session_id": "s-1", "hook_event_name": "PreToolUse", "tool_name": "Bash",
		"tool_use_id": "toolu_1", "tool_input": map[string]any{"command": "ls"},
	}
	tests := []struct {
		name  string
		patch map[string]any
		raw   string // replaces tool_input verbatim when set
		want  string
	}{
		{"no session", map[string]any{"session_id": ""}, "", "session_id"},
		{"no tool", map[string]any{"tool_name": nil}, "", "tool_name"},
		{"no tool_use_id", map[string]any{"tool_use_id": ""}, "", "tool_use_id"},
		{"no tool_input", map[string]any{"tool_input": nil}, "", "tool_input"},
		{"tool_input a string", map[string]any{"tool_input": "ls"}, "", "tool_input"},
		{"tool_input an array", map[string]any{"tool_input": []any{1}}, "", "tool_input"},
		{"control char in tool", map[string]any{"tool_name": "Ba\nsh"}, "", "tool_name"},
		{"session too long", map[string]any{"session_id": strings.Repeat("s", 129)}, "", "session_id"},
		{"tool_input too large", map[string]any{"tool_input": map[string]any{"content": strings.Repeat("x", args.MaxBytes)}}, "", "binds at most"},
		{"duplicate keys in tool_input", nil, `{"command":"ls","command":"rm -rf /"}`, "duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{}
			for k, v := range base {
				m[k] = v
			}
			for k, v := range tc.patch {
				if v == nil {
					delete(m, k)
				} else {
					m[k] = v
				}
			}
			raw, _ := json.Marshal(m)
			if tc.raw != "" {
				delete(m, "tool_input")
				raw, _ = json.Marshal(m)
				raw = append(raw[:len(raw)-1], []byte(`,"tool_input":`+tc.raw+`}`)...)
			}
			in, err := harness.Decode(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			_, err = in.Call(harness.ClaudeCode)
			if !errors.Is(err, harness.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
}

func TestIdempotencyKey(t *testing.T) {
	k := harness.IdempotencyKey(harness.ClaudeCode, "5b0c6a9e-2f41-4c8e-9d3a-7e1f0b2c4d6a", "toolu_01Hq8XkVb3n2Wc4TzR7yPmLd")
	if k != "claude-code:5b0c6a9e-2f41-4c8e-9d3a-7e1f0b2c4d6a:toolu_01Hq8XkVb3n2Wc4TzR7yPmLd" {
		t.Fatalf("key %q", k)
	}
	if harness.IdempotencyKey(harness.Codex, "s", "t") == harness.IdempotencyKey(harness.ClaudeCode, "s", "t") {
		t.Fatal("harnesses share keys")
	}
	long := harness.IdempotencyKey(harness.MCP, strings.Repeat("s", 100), strings.Repeat("c", 100))
	spaced := harness.IdempotencyKey(harness.MCP, "s", `"id with space"`)
	for _, k := range []string{long, spaced} {
		if len(k) > harness.MaxKeyLen || !strings.HasPrefix(k, "mcp:sha256:") {
			t.Fatalf("key %q (%d bytes)", k, len(k))
		}
	}
	// The hash separates the two ids.
	if harness.IdempotencyKey(harness.MCP, "ab", "c d") == harness.IdempotencyKey(harness.MCP, "a", "bc d") {
		t.Fatal("ambiguous hashed key")
	}
	if long != harness.IdempotencyKey(harness.MCP, strings.Repeat("s", 100), strings.Repeat("c", 100)) {
		t.Fatal("key is not a pure function")
	}
	// A subagent's session that would be too long binds the session alone.
	c := harness.Call{Session: strings.Repeat("s", 100), AgentID: strings.Repeat("a", 40)}
	if c.GrantSession() != c.Session {
		t.Fatalf("grant session %q", c.GrantSession())
	}
}
