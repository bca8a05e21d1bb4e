package harness_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/harness"
)

const writCmd = "/opt/writ/bin/worker-agent hook claude-code"

func claudeSpec(cmd string) harness.HookSpec {
	return harness.HookSpec{
		Events: harness.ClaudeCodeEvents, Matcher: "*", Command: cmd, Timeout: 30,
		Owns: harness.OwnsCommand(harness.ClaudeCode),
	}
}

// existing is a settings file with unknown keys, hooks of its own (one
// sharing an event with writ) and a non-ASCII, HTML-ish string.
const existing = `{
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(npm test:*)"
    ],
    "deny": [
      "Read(./.env)"
    ]
  },
  "hooks": {
    "PostToolUse": [
      {
        "matcher": "Write|Edit",
        "hooks": [
          {
            "type": "command",
            "command": "npx prettier --write \"$CLAUDE_PROJECT_DIR\" && echo <ok> ✓"
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done"
          }
        ]
      }
    ]
  },
  "statusLine": {
    "type": "command",
    "command": "~/.claude/statusline.sh",
    "padding": 0
  },
  "cleanupPeriodDays": 20.5
}
`

func TestInstallKeepsEverythingAndIsIdempotent(t *testing.T) {
	out, changed, err := harness.InstallHooks([]byte(existing), claudeSpec(writCmd))
	if err != nil || !changed {
		t.Fatalf("install: changed=%v err=%v", changed, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// Top-level key order is kept.
	if got := topKeys(t, out); !reflect.DeepEqual(got, []string{"model", "permissions", "hooks", "statusLine", "cleanupPeriodDays"}) {
		t.Fatalf("key order %v", got)
	}
	hooks := doc["hooks"].(map[string]any)
	// The user's hooks are untouched; writ's are appended.
	post := hooks["PostToolUse"].([]any)
	if len(post) != 2 || post[0].(map[string]any)["matcher"] != "Write|Edit" {
		t.Fatalf("PostToolUse groups: %v", post)
	}
	wantEvents := []string{"PreToolUse", "PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart"}
	if !reflect.DeepEqual(harness.ClaudeCodeEvents, wantEvents) {
		t.Fatalf("Claude Code events %v", harness.ClaudeCodeEvents)
	}
	for _, ev := range harness.ClaudeCodeEvents {
		groups := hooks[ev].([]any)
		g := groups[len(groups)-1].(map[string]any)
		h := g["hooks"].([]any)[0].(map[string]any)
		// Tool events get the matcher; the prompt and the session start
		// get a group without one, which runs for every prompt and every
		// kind of start.
		matcher, hasMatcher := g["matcher"]
		if harness.IsToolEventName(ev) && matcher != "*" || !harness.IsToolEventName(ev) && hasMatcher {
			t.Fatalf("%s: writ group matcher %v", ev, g)
		}
		if h["type"] != "command" || h["command"] != writCmd || h["timeout"] != float64(30) {
			t.Fatalf("%s: writ group %v", ev, g)
		}
	}
	if len(hooks["Stop"].([]any)) != 1 {
		t.Fatalf("Stop changed: %v", hooks["Stop"])
	}
	for _, want := range []string{`"cleanupPeriodDays": 20.5`, `echo <ok> ✓`, `"padding": 0`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lost %q", want)
		}
	}

	again, changed, err := harness.InstallHooks(out, claudeSpec(writCmd))
	if err != nil || changed || string(again) != string(out) {
		t.Fatalf("second install changed the file: changed=%v err=%v", changed, err)
	}
	// A new binary path updates writ's entries in place.
	moved, changed, err := harness.InstallHooks(out, claudeSpec("'/home/dev/my tools/worker-agent' hook claude-code --config /etc/writ/w1.json"))
	if err != nil || !changed {
		t.Fatalf("reinstall: %v %v", changed, err)
	}
	if strings.Count(string(moved), "worker-agent") != len(harness.ClaudeCodeEvents) || strings.Contains(string(moved), "/opt/writ") {
		t.Fatalf("reinstall did not update in place:\n%s", moved)
	}

	back, changed, err := harness.UninstallHooks(moved, harness.OwnsCommand(harness.ClaudeCode))
	if err != nil || !changed {
		t.Fatalf("uninstall: %v %v", changed, err)
	}
	if string(back) != existing {
		t.Fatalf("uninstall did not restore the file:\n%s\nwant\n%s", back, existing)
	}
	if _, changed, _ := harness.UninstallHooks(back, harness.OwnsCommand(harness.ClaudeCode)); changed {
		t.Fatal("second uninstall changed the file")
	}
}

func topKeys(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	var keys []string
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		t.Fatal("not an object")
	}
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestInstallIntoNewAndEmptyFiles(t *testing.T) {
	for _, doc := range []string{"", "  \n", "{}"} {
		out, changed, err := harness.InstallHooks([]byte(doc), claudeSpec(writCmd))
		if err != nil || !changed {
			t.Fatalf("%q: %v %v", doc, changed, err)
		}
		back, _, err := harness.UninstallHooks(out, harness.OwnsCommand(harness.ClaudeCode))
		if err != nil || string(back) != "{}\n" {
			t.Fatalf("%q: uninstall left %q (%v)", doc, back, err)
		}
	}
	// Codex: no matcher key at all.
	out, _, err := harness.InstallHooks(nil, harness.HookSpec{
		Events: harness.CodexEvents, Command: "worker-agent hook codex", Timeout: 30, Owns: harness.OwnsCommand(harness.Codex),
	})
	if err != nil || strings.Contains(string(out), "matcher") {
		t.Fatalf("codex: %v\n%s", err, out)
	}
	for _, ev := range []string{"PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"} {
		if !strings.Contains(string(out), `"`+ev+`"`) {
			t.Fatalf("codex: no %s hook\n%s", ev, out)
		}
	}
}

// A writ handler sharing a group with the user's handler is removed
// alone; the group stays.
func TestUninstallFromASharedGroup(t *testing.T) {
	doc := `{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"audit.sh"},{"type":"command","command":"WRIT_X=1 /usr/bin/worker-agent hook claude-code --deadline 3s"}]}]}}`
	out, changed, err := harness.UninstallHooks([]byte(doc), harness.OwnsCommand(harness.ClaudeCode))
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	var got any
	_ = json.Unmarshal(out, &got)
	var want any
	_ = json.Unmarshal([]byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"audit.sh"}]}]}}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %s", out)
	}
	// The Codex hook is not the Claude Code hook.
	codex := `{"hooks":{"PreToolUse":[{"hooks":[{"type":"command","command":"worker-agent hook codex"}]}]}}`
	if _, changed, _ := harness.UninstallHooks([]byte(codex), harness.OwnsCommand(harness.ClaudeCode)); changed {
		t.Fatal("removed the codex hook")
	}
}

func TestSettingsThatCannotBeMerged(t *testing.T) {
	for _, doc := range []string{
		`{"hooks": []}`,
		`{"hooks": {"PreToolUse": {}}}`,
		`[]`,
		`{"a": 1} {"b": 2}`,
		`{"a": 1, "a": 2}`,
		`{"a": `,
		`// comment
{}`,
	} {
		if _, _, err := harness.InstallHooks([]byte(doc), claudeSpec(writCmd)); !errors.Is(err, harness.ErrSettings) {
			t.Errorf("%q: err %v, want ErrSettings", doc, err)
		}
	}
}

func TestOwnsCommand(t *testing.T) {
	owns := harness.OwnsCommand(harness.ClaudeCode)
	for cmd, want := range map[string]bool{
		"worker-agent hook claude-code":                             true,
		"/usr/local/bin/worker-agent hook claude-code":              true,
		"'/home/a b/worker-agent' hook claude-code --config x.json": true,
		`"/home/a b/worker-agent" hook claude-code`:                 true,
		"WRIT_NATS_URL=nats://h:4222 worker-agent hook claude-code": true,
		"worker-agent hook codex":                                   false,
		"worker-agent request --tool Bash":                          false,
		"my-worker-agent hook claude-code":                          false,
		"echo worker-agent hook claude-code":                        false,
		"'unterminated worker-agent hook claude-code":               false,
		"": false,
	} {
		if got := owns(cmd); got != want {
			t.Errorf("%q: %v, want %v", cmd, got, want)
		}
	}
	for in, want := range map[string]string{
		"/usr/bin/worker-agent": "/usr/bin/worker-agent",
		"/home/a b/x":           "'/home/a b/x'",
		"it's":                  `'it'\''s'`,
		"":                      "''",
	} {
		if got := harness.ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
