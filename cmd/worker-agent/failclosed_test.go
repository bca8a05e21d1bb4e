package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/harness"
)

// installedCommands installs the hooks for h into a fresh project with bin
// as the binary and returns the command of every installed event.
func installedCommands(t *testing.T, h, bin string, extra ...string) map[string]string {
	t.Helper()
	project := t.TempDir()
	args := append([]string{"install", h, "--project", project, "--binary", bin, "--state-dir", t.TempDir()}, extra...)
	if r := runCLI(t, "", args...); r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	tg := layouts[h]
	raw, err := os.ReadFile(filepath.Join(project, tg.dir, tg.file))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	cmds := map[string]string{}
	for ev, groups := range doc.Hooks {
		for _, g := range groups {
			for _, hk := range g.Hooks {
				cmds[ev] = hk.Command
			}
		}
	}
	if len(cmds) != len(tg.events) {
		t.Fatalf("installed events %v, want %v", cmds, tg.events)
	}
	return cmds
}

// runAsHarness runs an installed hook command the way the harnesses do:
// through a shell (Claude Code: sh -c; Codex: $SHELL -lc), the event on
// stdin.
func runAsHarness(t *testing.T, shell []string, command string, stdin []byte) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell[0], append(shell[1:], command)...)
	cmd.Dir = t.TempDir()
	cmd.Env = binEnv(cmd.Dir)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running the hook command: %v", err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// The installed hook command blocks (exit 2, a line on stderr) whenever
// the worker-agent cannot give its answer: deleted or moved after
// install, not executable, crashing, killed. Both harnesses let the call
// run on any other exit code.
func TestInstalledHookFailsClosed(t *testing.T) {
	cleanEnv(t)
	real := builtBinary(t) // built before any deadline starts
	shells := map[string][]string{"sh -c": {"/bin/sh", "-c"}}
	if bash, err := exec.LookPath("bash"); err == nil {
		shells["bash -lc"] = []string{bash, "-lc"}
	}
	scripts := map[string]string{
		"exits 1":       "#!/bin/sh\ncat >/dev/null\necho boom >&2\nexit 1\n",
		"exits 127":     "#!/bin/sh\nexit 127\n",
		"exits 3":       "#!/bin/sh\nexit 3\n",
		"killed":        "#!/bin/sh\nkill -9 $$\n",
		"silent exit 1": "#!/bin/sh\nexit 1\n",
	}
	for _, h := range []string{harness.ClaudeCode, harness.Codex} {
		dir := t.TempDir()
		bin := filepath.Join(dir, "worker-agent")
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := writeJSON(t, dir, "w1.json", map[string]any{"worker": "w1", "lane": "coordinator", "nats_url": "nats://127.0.0.1:1"})
		cmds := installedCommands(t, h, bin, "--config", cfg)
		pre := fixture(t, h+"/pre_bash.json")
		notification := []byte(`{"session_id":"s1","hook_event_name":"Notification","message":"hi"}`)
		for shellName, shell := range shells {
			// The binary in place: its own answers pass through.
			if r := runAsHarness(t, shell, cmds["PreToolUse"], notification); r.code != 0 || r.stderr != "" {
				t.Fatalf("%s %s: a harmless event: %+v", h, shellName, r)
			}
			if r := runAsHarness(t, shell, cmds["PreToolUse"], pre); r.code != 2 || !strings.Contains(r.stderr, "cannot reach") {
				t.Fatalf("%s %s: issuer down: %+v", h, shellName, r)
			}
		}
		for name, script := range scripts {
			if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			for shellName, shell := range shells {
				for ev, c := range cmds {
					r := runAsHarness(t, shell, c, pre)
					if r.code != 2 || !strings.Contains(r.stderr, "writ: the hook program "+bin+" failed with exit status") || !strings.Contains(r.stderr, "worker-agent doctor") {
						t.Errorf("%s %s %s, binary %s: exit %d stderr %q; want exit 2 naming the failure", h, shellName, ev, name, r.code, r.stderr)
					}
				}
			}
		}
		for name, breakIt := range map[string]func() error{
			"deleted":        func() error { return os.Remove(bin) },
			"not executable": func() error { return os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o644) },
			"a directory":    func() error { return os.Mkdir(bin, 0o755) },
		} {
			_ = os.RemoveAll(bin)
			if name != "deleted" {
				if err := breakIt(); err != nil {
					t.Fatal(err)
				}
			}
			for shellName, shell := range shells {
				for ev, c := range cmds {
					r := runAsHarness(t, shell, c, pre)
					if r.code != 2 || !strings.Contains(r.stderr, "writ: the hook program "+bin+" is missing or not executable") || !strings.Contains(r.stderr, "worker-agent doctor") || r.stdout != "" {
						t.Errorf("%s %s %s, binary %s: exit %d stdout %q stderr %q; want exit 2 naming the missing binary", h, shellName, ev, name, r.code, r.stdout, r.stderr)
					}
				}
			}
		}
	}
}

// A path the shells of the harnesses would read differently is refused
// at install.
func TestInstallRefusesUnsafePaths(t *testing.T) {
	cleanEnv(t)
	dir := filepath.Join(t.TempDir(), "it's")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "worker-agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", bin, "--state-dir", t.TempDir())
	if r.code != ExitUsage || !strings.Contains(r.stderr, "quote") {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Stat(filepath.Join(project, ".claude")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("install wrote something: %v", err)
	}
}
