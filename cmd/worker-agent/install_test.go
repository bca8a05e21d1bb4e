package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const userSettings = `{
  "permissions": {
    "allow": [
      "Bash(go test:*)"
    ]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/.claude/hooks/no-force-push.sh"
          }
        ]
      }
    ]
  },
  "env": {
    "GOFLAGS": "-mod=mod"
  }
}
`

func TestInstallClaudeCode(t *testing.T) {
	cleanEnv(t)
	project := t.TempDir()
	settings := filepath.Join(project, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(userSettings), 0o640); err != nil {
		t.Fatal(err)
	}
	bin := "/opt/writ bin/worker-agent"
	install := []string{"install", "claude-code", "--project", project, "--binary", bin, "--config", "/etc/writ/w1.json"}

	r := runCLI(t, "", install...)
	if r.code != 0 || !strings.Contains(r.stdout, "installed writ hooks") {
		t.Fatalf("install: %+v", r)
	}
	raw, _ := os.ReadFile(settings)
	var doc struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
				Timeout int    `json:"timeout"`
			} `json:"hooks"`
		} `json:"hooks"`
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := `'/opt/writ bin/worker-agent' hook claude-code --config /etc/writ/w1.json`
	// The tool events get matcher "*"; the prompt and the session start,
	// which register sources, get none (every prompt, every kind of start).
	for ev, matcher := range map[string]string{"PreToolUse": "*", "PostToolUse": "*", "PostToolUseFailure": "*", "UserPromptSubmit": "", "SessionStart": ""} {
		groups := doc.Hooks[ev]
		if len(groups) == 0 {
			t.Fatalf("no %s hook: %s", ev, raw)
		}
		g := groups[len(groups)-1]
		if g.Matcher != matcher || len(g.Hooks) != 1 || g.Hooks[0].Command != want || g.Hooks[0].Type != "command" || g.Hooks[0].Timeout != installTimeout {
			t.Fatalf("%s: %+v", ev, groups)
		}
	}
	if !strings.Contains(r.stdout, "UserPromptSubmit, SessionStart") {
		t.Fatalf("install did not name the events: %q", r.stdout)
	}
	if len(doc.Hooks["PreToolUse"]) != 2 || doc.Hooks["PreToolUse"][0].Hooks[0].Command != "~/.claude/hooks/no-force-push.sh" || doc.Env["GOFLAGS"] != "-mod=mod" {
		t.Fatalf("the user's settings changed: %s", raw)
	}
	if st, _ := os.Stat(settings); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}

	r = runCLI(t, "", install...)
	if again, _ := os.ReadFile(settings); r.code != 0 || !strings.Contains(r.stdout, "already installed") || string(again) != string(raw) {
		t.Fatalf("second install: %+v", r)
	}

	r = runCLI(t, "", "uninstall", "claude-code", "--project", project)
	if back, _ := os.ReadFile(settings); r.code != 0 || string(back) != userSettings {
		t.Fatalf("uninstall: %+v\n%s", r, back)
	}
	if r = runCLI(t, "", "uninstall", "claude-code", "--project", project); r.code != 0 || !strings.Contains(r.stdout, "no writ hooks") {
		t.Fatalf("second uninstall: %+v", r)
	}
	entries, _ := os.ReadDir(filepath.Dir(settings))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestInstallCodexAndErrors(t *testing.T) {
	cleanEnv(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	r := runCLI(t, "", "install", "codex", "--user", "--binary", "/usr/local/bin/worker-agent")
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	raw, err := os.ReadFile(filepath.Join(home, ".codex", "hooks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"command": "/usr/local/bin/worker-agent hook codex"`) || strings.Contains(string(raw), "matcher") ||
		strings.Contains(string(raw), "PostToolUseFailure") {
		t.Fatalf("codex hooks.json:\n%s", raw)
	}
	for _, ev := range []string{"PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"} {
		if !strings.Contains(string(raw), `"`+ev+`"`) {
			t.Fatalf("codex hooks.json has no %s hook:\n%s", ev, raw)
		}
	}

	broken := t.TempDir()
	p := filepath.Join(broken, ".claude", "settings.json")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	_ = os.WriteFile(p, []byte(`{"hooks": [], "a": 1}`), 0o644)
	for _, args := range [][]string{
		{"install", "claude-code", "--project", broken},
		{"install", "cursor"},
		{"install"},
		{"install", "claude-code", "--project", broken, "--user"},
	} {
		r := runCLI(t, "", args...)
		if r.code != ExitUsage {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if b, _ := os.ReadFile(p); string(b) != `{"hooks": [], "a": 1}` {
		t.Fatalf("a settings file that cannot be merged was changed: %s", b)
	}
}

func TestInstallThroughASymlink(t *testing.T) {
	cleanEnv(t)
	project, dotfiles := t.TempDir(), t.TempDir()
	target := filepath.Join(dotfiles, "claude-settings.json")
	if err := os.WriteFile(target, []byte(`{"model":"opus"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(project, ".claude", "settings.json")
	_ = os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", "/bin/worker-agent"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced: %v %v", st.Mode(), err)
	}
	if b, _ := os.ReadFile(target); !strings.Contains(string(b), "hook claude-code") || !strings.Contains(string(b), `"model": "opus"`) {
		t.Fatalf("target:\n%s", b)
	}
}

// By default the hook command is the running binary's absolute path.
func TestInstallNamesTheRunningBinary(t *testing.T) {
	project := t.TempDir()
	r := binRun{}.run(t, "install", "claude-code", "--project", project)
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	raw, _ := os.ReadFile(filepath.Join(project, ".claude", "settings.json"))
	if !strings.Contains(string(raw), builtBinary(t)+" hook claude-code") {
		t.Fatalf("settings:\n%s", raw)
	}
}
