package harness_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/harness"
)

func TestWrapHookCommand(t *testing.T) {
	cmd, err := harness.WrapHookCommand("/home/a b/worker-agent", "hook", "codex", "--config", "/etc/writ/w1.json")
	if err != nil {
		t.Fatal(err)
	}
	// The script is one single-quoted word with no quote or backslash
	// inside, so sh, bash, zsh and fish read it alike.
	script := cmd[len("/bin/sh -c '"):strings.Index(cmd, "' writ-hook ")]
	if !strings.HasPrefix(cmd, "/bin/sh -c '") || strings.ContainsAny(script, `'\`) {
		t.Fatalf("command %s", cmd)
	}
	inv, ok := harness.ParseHookCommand(harness.Codex, cmd)
	if !ok || !inv.Wrapped || inv.Binary != "/home/a b/worker-agent" || !reflect.DeepEqual(inv.Args, []string{"hook", "codex", "--config", "/etc/writ/w1.json"}) {
		t.Fatalf("parsed %+v %v", inv, ok)
	}
	if c, ok := inv.Flag("config"); !ok || c != "/etc/writ/w1.json" {
		t.Fatalf("--config %q %v", c, ok)
	}
	// Any binary name: the wrapper marks the command as writ's.
	renamed, _ := harness.WrapHookCommand("/opt/wa", "hook", "claude-code")
	for cmd, want := range map[string]bool{cmd: false, renamed: true} {
		if got := harness.OwnsCommand(harness.ClaudeCode)(cmd); got != want {
			t.Errorf("OwnsCommand(claude-code)(%s) = %v", cmd, got)
		}
	}
	if !harness.OwnsCommand(harness.Codex)(cmd) {
		t.Error("the codex command is not recognised")
	}
	// The bare form of earlier installs is still recognised (so install
	// replaces it in place and uninstall removes it).
	if inv, ok := harness.ParseHookCommand(harness.ClaudeCode, "/usr/bin/worker-agent hook claude-code --config=/x.json"); !ok || inv.Wrapped {
		t.Fatalf("bare form: %+v %v", inv, ok)
	} else if c, _ := inv.Flag("config"); c != "/x.json" {
		t.Fatalf("--config= %q", c)
	}
	for _, bad := range [][]string{{"worker-agent"}, {"/it's/worker-agent"}, {`/a\b/worker-agent`}, {"/bin/worker-agent", "--config", "/x\ny"}} {
		if _, err := harness.WrapHookCommand(bad[0], bad[1:]...); !errors.Is(err, harness.ErrHookPath) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestPromptUnregistered(t *testing.T) {
	a := harness.PromptUnregistered(errors.New("cannot reach\nthe issuer"))
	want := "writ: cannot reach the issuer — the prompt was sent anyway; tool calls stay blocked until the issuer answers. Submit the prompt again once it does if calls should rely on what it says."
	if a.Exit != harness.ExitOK || a.Stderr != want {
		t.Fatalf("%+v", a)
	}
	// Exactly one field both harnesses know for this event.
	var out map[string]any
	if err := json.Unmarshal(a.Stdout, &out); err != nil || len(out) != 1 || out["systemMessage"] != want {
		t.Fatalf("stdout %s (%v)", a.Stdout, err)
	}
}
