package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/worker"
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

// fakeBinary is an executable file named worker-agent in a directory
// whose name needs quoting.
func fakeBinary(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "writ bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "worker-agent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// layouts is each harness's settings file and the events install
// writes, as install's help describes them.
var layouts = map[string]struct {
	dir, file string
	events    []string
}{
	harness.ClaudeCode: {".claude", "settings.json", harness.ClaudeCodeEvents},
	harness.Codex:      {".codex", "hooks.json", harness.CodexEvents},
}

// isolateInstall keeps install's state (and the hook's default config
// lookup) out of the real home directory.
func isolateInstall(t *testing.T) {
	t.Helper()
	cleanEnv(t)
	t.Setenv(worker.EnvStateDir, t.TempDir())
}

func TestInstallClaudeCode(t *testing.T) {
	isolateInstall(t)
	project := t.TempDir()
	settings := filepath.Join(project, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(userSettings), 0o640); err != nil {
		t.Fatal(err)
	}
	bin := fakeBinary(t)
	cfg := writeJSON(t, t.TempDir(), "w1.json", map[string]any{"worker": "w1", "lane": "coordinator"})
	install := []string{"install", "claude-code", "--project", project, "--binary", bin, "--config", cfg}

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
	want, err := harness.HookCommand(harness.ClaudeCode, bin, "hook", "claude-code", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Claude Code runs hook commands in sh: the command is the fail-closed
	// script itself, with no second shell.
	if !strings.HasPrefix(want, "b="+harness.ShellQuote(bin)+"; ") || !strings.Contains(want, `"$b" hook claude-code --config `+cfg+"; s=$?") {
		t.Fatalf("hook command %s", want)
	}
	// The tool events get matcher "*"; the prompt and the session start,
	// which register sources, get none (every prompt, every kind of start).
	for ev, matcher := range map[string]string{"PreToolUse": "*", "PostToolUse": "*", "PostToolUseFailure": "*", "UserPromptSubmit": "", "SessionStart": ""} {
		groups := doc.Hooks[ev]
		if len(groups) == 0 {
			t.Fatalf("no %s hook: %s", ev, raw)
		}
		g := groups[len(groups)-1]
		if g.Matcher != matcher || len(g.Hooks) != 1 || g.Hooks[0].Command != want || g.Hooks[0].Type != "command" || g.Hooks[0].Timeout != 30 {
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
	isolateInstall(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	bin := fakeBinary(t)
	r := runCLI(t, "", "install", "codex", "--user", "--binary", bin)
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	raw, err := os.ReadFile(filepath.Join(home, ".codex", "hooks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), ` writ-hook '`+bin+`' hook codex"`) || strings.Contains(string(raw), "matcher") ||
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
	isolateInstall(t)
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
	if r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", fakeBinary(t)); r.code != 0 {
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
	r := binRun{}.run(t, "install", "claude-code", "--project", project, "--state-dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("%+v", r)
	}
	raw, _ := os.ReadFile(filepath.Join(project, ".claude", "settings.json"))
	if !strings.Contains(string(raw), `"command": "b=`+harness.ShellQuote(builtBinary(t))+`; `) || !strings.Contains(string(raw), `\"$b\" hook claude-code; s=$?`) {
		t.Fatalf("settings:\n%s", raw)
	}
}

// install refuses a worker config the hook could not use, naming the
// file and what to do, and writes nothing.
func TestInstallChecksTheConfig(t *testing.T) {
	isolateInstall(t)
	dir := t.TempDir()
	bin := fakeBinary(t)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"worker":"w1","lane":"coordinator"}`)
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"missing", filepath.Join(dir, "nope.json"), []string{"nope.json: no such file", "create it first"}},
		{"not JSON", write("bad.json", `{"worker":`), []string{"bad.json", "fix the file"}},
		{"unknown field", write("typo.json", `{"worker":"w1","lane":"c","subagent":{}}`), []string{"typo.json", `unknown field "subagent"`}},
		{"no worker", write("noworker.json", `{"lane":"coordinator"}`), []string{"noworker.json", `"worker"`, "missing"}},
		{"no lane", write("nolane.json", `{"worker":"w1"}`), []string{"nolane.json", `"lane"`}},
		{"password file missing", write("pw.json", `{"worker":"w1","lane":"c","nats_user":"w1","nats_password_file":"`+filepath.Join(dir, "pw")+`"}`), []string{"nats_password_file", "no such file"}},
		{"user without password file", write("nopw.json", `{"worker":"w1","lane":"c","nats_user":"w1"}`), []string{"needs nats_password_file"}},
		{"binary missing", good, []string{"--binary", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			project := t.TempDir()
			b := bin
			if tc.name == "binary missing" {
				b = filepath.Join(dir, "gone", "worker-agent")
			}
			r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", b, "--config", tc.config)
			if r.code != ExitUsage {
				t.Fatalf("%+v", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, r.stderr)
				}
			}
			if _, err := os.Stat(filepath.Join(project, ".claude")); !os.IsNotExist(err) {
				t.Fatalf("install wrote something: %v", err)
			}
		})
	}
	// Without --config, install warns when the hook would find none.
	r := runCLI(t, "", "install", "claude-code", "--project", t.TempDir(), "--binary", bin)
	if r.code != 0 || !strings.Contains(r.stderr, "no worker config at") || !strings.Contains(r.stderr, "--config FILE") {
		t.Fatalf("no config: %+v", r)
	}
	if r := runCLI(t, "", "install", "claude-code", "--project", t.TempDir(), "--binary", bin, "--config", good); r.code != 0 || r.stderr != "" {
		t.Fatalf("good config: %+v", r)
	}
}

// uninstall puts a settings file back byte for byte when writ's entries
// were the only change, removes the one install created (and the
// directory it created for it), and otherwise keeps everything else.
func TestUninstallRestoresTheFile(t *testing.T) {
	isolateInstall(t)
	bin := fakeBinary(t)
	// Formatting install does not write: tabs, one line, no final newline.
	const original = "{\n\t\"model\": \"opus\",\n\t\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send done\"}]}]}}"
	for _, h := range []string{harness.ClaudeCode, harness.Codex} {
		tg := layouts[h]
		t.Run(h, func(t *testing.T) {
			project := t.TempDir()
			settings := filepath.Join(project, tg.dir, tg.file)
			_ = os.MkdirAll(filepath.Dir(settings), 0o755)
			if err := os.WriteFile(settings, []byte(original), 0o600); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ { // a second install must not replace the copy
				if r := runCLI(t, "", "install", h, "--project", project, "--binary", bin); r.code != 0 {
					t.Fatalf("install: %+v", r)
				}
			}
			r := runCLI(t, "", "uninstall", h, "--project", project)
			got, _ := os.ReadFile(settings)
			if r.code != 0 || string(got) != original || !strings.Contains(r.stdout, "restored") {
				t.Fatalf("uninstall: %+v\n%q", r, got)
			}
			if st, _ := os.Stat(settings); st.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", st.Mode().Perm())
			}

			// A file install created is removed, with its directory.
			fresh := t.TempDir()
			if r := runCLI(t, "", "install", h, "--project", fresh, "--binary", bin); r.code != 0 {
				t.Fatalf("install: %+v", r)
			}
			r = runCLI(t, "", "uninstall", h, "--project", fresh)
			if _, err := os.Stat(filepath.Join(fresh, tg.dir)); r.code != 0 || !os.IsNotExist(err) || !strings.Contains(r.stdout, "deleted") {
				t.Fatalf("uninstall of a created file: %+v (%v)", r, err)
			}

			// Something else changed since install: only writ's entries go.
			if r := runCLI(t, "", "install", h, "--project", project, "--binary", bin); r.code != 0 {
				t.Fatalf("install: %+v", r)
			}
			edited, _ := os.ReadFile(settings)
			edited = []byte(strings.Replace(string(edited), `"opus"`, `"sonnet"`, 1))
			_ = os.WriteFile(settings, edited, 0o600)
			r = runCLI(t, "", "uninstall", h, "--project", project)
			got, _ = os.ReadFile(settings)
			if r.code != 0 || !strings.Contains(string(got), `"sonnet"`) || strings.Contains(string(got), "writ-hook") || !strings.Contains(string(got), "notify-send done") {
				t.Fatalf("uninstall after an edit: %+v\n%s", r, got)
			}
		})
	}
}

func TestInstallAndUninstallHelp(t *testing.T) {
	install := runCLI(t, "", "install", "--help")
	uninstall := runCLI(t, "", "uninstall", "--help")
	if install.code != 0 || uninstall.code != 0 {
		t.Fatalf("%+v %+v", install, uninstall)
	}
	if !strings.Contains(uninstall.stdout, "uninstall removes") || strings.Contains(uninstall.stdout, "install merges") || !strings.Contains(uninstall.stdout, "byte for byte") {
		t.Fatalf("uninstall --help:\n%s", uninstall.stdout)
	}
	if !strings.Contains(install.stdout, "install merges") || !strings.Contains(install.stdout, "fail-closed") {
		t.Fatalf("install --help:\n%s", install.stdout)
	}
	codex := runCLI(t, "", "hook", "codex", "--help")
	if !strings.Contains(codex.stdout, ".codex/hooks.json") || !strings.Contains(codex.stdout, "hook codex --config") || strings.Contains(codex.stdout, "claude") {
		t.Fatalf("hook codex --help:\n%s", codex.stdout)
	}
	claude := runCLI(t, "", "hook", "claude-code", "--help")
	if !strings.Contains(claude.stdout, ".claude/settings.json") || !strings.Contains(claude.stdout, "hook claude-code --config") {
		t.Fatalf("hook claude-code --help:\n%s", claude.stdout)
	}
}

// With writ-hook beside the binary and a config, install writes writ-hook
// into the entry with the worker's sidecar socket; --hook-client none, or
// no --config, keeps worker-agent there. Uninstall removes either form.
func TestInstallPrefersTheThinClient(t *testing.T) {
	isolateInstall(t)
	stateDir := os.Getenv(worker.EnvStateDir)
	bin := fakeBinary(t)
	thin := filepath.Join(filepath.Dir(bin), worker.HookClientName)
	if err := os.WriteFile(thin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeJSON(t, t.TempDir(), "w1.json", map[string]any{"worker": "w1", "lane": "coordinator"})
	project := t.TempDir()
	settings := filepath.Join(project, ".claude", "settings.json")
	command := func() string {
		t.Helper()
		raw, err := os.ReadFile(settings)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Hooks map[string][]struct {
				Hooks []struct{ Command string } `json:"hooks"`
			} `json:"hooks"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Hooks["PreToolUse"][0].Hooks[0].Command
	}
	install := func(extra ...string) result {
		return runCLI(t, "", append([]string{"install", "claude-code", "--project", project, "--binary", bin}, extra...)...)
	}
	socket := filepath.Join(stateDir, "worker-w1.sock")
	wantThin, _ := harness.HookCommand(harness.ClaudeCode, thin, "hook", "claude-code", "--config", cfg, "--socket", socket)
	wantAgent, _ := harness.HookCommand(harness.ClaudeCode, bin, "hook", "claude-code", "--config", cfg)
	wantBare, _ := harness.HookCommand(harness.ClaudeCode, bin, "hook", "claude-code")

	if r := install("--config", cfg); r.code != 0 || command() != wantThin {
		t.Fatalf("thin: %+v\n%s\nwant %s", r, command(), wantThin)
	}
	if r := install("--config", cfg, "--hook-client", "none"); r.code != 0 || command() != wantAgent {
		t.Fatalf("--hook-client none: %+v\n%s", r, command())
	}
	if r := install("--hook-client", "auto"); r.code != 0 || command() != wantBare {
		t.Fatalf("no --config: %+v\n%s", r, command())
	}
	if r := install("--config", cfg, "--hook-client", "fast"); r.code != 2 || !strings.Contains(r.stderr, `--hook-client "fast": want auto or none`) {
		t.Fatalf("bad --hook-client: %+v", r)
	}
	// A config that names its own socket: that one.
	own := writeJSON(t, t.TempDir(), "w2.json", map[string]any{"worker": "w2", "lane": "coordinator", "socket": "/run/writ/w2.sock"})
	wantOwn, _ := harness.HookCommand(harness.ClaudeCode, thin, "hook", "claude-code", "--config", own, "--socket", "/run/writ/w2.sock")
	if r := install("--config", own); r.code != 0 || command() != wantOwn {
		t.Fatalf("config socket: %+v\n%s", r, command())
	}
	if r := runCLI(t, "", "uninstall", "claude-code", "--project", project); r.code != 0 {
		t.Fatalf("uninstall: %+v", r)
	}
	if _, err := os.Stat(settings); !os.IsNotExist(err) {
		t.Fatalf("settings left after uninstall: %v", err)
	}
}
