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

// Claude Code's command is the script itself (it runs hook commands in
// sh or bash), read back exactly; Codex keeps the nested form.
func TestHookCommandForms(t *testing.T) {
	inline, err := harness.HookCommand(harness.ClaudeCode, "/home/a b/writ-hook", "hook", "claude-code", "--config", "/etc/writ/w1.json", "--socket", "/run/w 1.sock")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(inline, "/bin/sh") || !strings.HasPrefix(inline, "b='/home/a b/writ-hook'; ") {
		t.Fatalf("inline command %s", inline)
	}
	inv, ok := harness.ParseHookCommand(harness.ClaudeCode, inline)
	want := []string{"hook", "claude-code", "--config", "/etc/writ/w1.json", "--socket", "/run/w 1.sock"}
	if !ok || !inv.Wrapped || inv.Binary != "/home/a b/writ-hook" || !reflect.DeepEqual(inv.Args, want) {
		t.Fatalf("parsed %+v %v", inv, ok)
	}
	if _, ok := harness.ParseHookCommand(harness.Codex, inline); ok {
		t.Fatal("a claude-code command read as codex's")
	}
	nested, _ := harness.HookCommand(harness.Codex, "/opt/writ-hook", "hook", "codex")
	if plain, _ := harness.WrapHookCommand("/opt/writ-hook", "hook", "codex"); nested != plain || !strings.HasPrefix(nested, "/bin/sh -c '") {
		t.Fatalf("codex command %s", nested)
	}
	// The nested form install wrote for Claude Code before is still writ's,
	// so install replaces it and uninstall removes it.
	old, _ := harness.WrapHookCommand("/opt/writ-hook", "hook", "claude-code")
	if inv, ok := harness.ParseHookCommand(harness.ClaudeCode, old); !ok || !inv.Wrapped || inv.Binary != "/opt/writ-hook" {
		t.Fatalf("nested claude-code command: %+v %v", inv, ok)
	}
	// Installing the inline form over the nested one replaces each entry
	// in place: one writ entry per event, none left nested.
	spec := harness.HookSpec{Events: harness.ClaudeCodeEvents, Matcher: "*", Timeout: 30, Owns: harness.OwnsCommand(harness.ClaudeCode)}
	spec.Command = old
	before, _, err := harness.InstallHooks([]byte(existing), spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Command = inline
	after, changed, err := harness.InstallHooks(before, spec)
	if err != nil || !changed {
		t.Fatalf("upgrade: %v %v", changed, err)
	}
	var doc struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(after, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ev := range harness.ClaudeCodeEvents {
		var writs []string
		for _, g := range doc.Hooks[ev] {
			for _, h := range g.Hooks {
				if harness.OwnsCommand(harness.ClaudeCode)(h.Command) {
					writs = append(writs, h.Command)
				}
			}
		}
		if len(writs) != 1 || writs[0] != inline {
			t.Fatalf("%s after the upgrade: %q", ev, writs)
		}
	}
	// Anything added to the inline command makes it someone else's.
	for _, edited := range []string{
		inline + "; rm -rf ~",
		strings.Replace(inline, `"$b" hook`, `"$b" hook; curl x;`, 1),
		strings.Replace(inline, "exit 2; fi; \"$b\"", "exit 0; fi; \"$b\"", 1),
		"x" + inline,
	} {
		if _, ok := harness.ParseHookCommand(harness.ClaudeCode, edited); ok {
			t.Errorf("an edited command is read as writ's: %s", edited)
		}
	}
	if _, err := harness.HookCommand(harness.ClaudeCode, "/it's/writ-hook"); !errors.Is(err, harness.ErrHookPath) {
		t.Fatalf("a quote in the path: %v", err)
	}
}

// Reading any command never panics; a command HookCommand wrote reads
// back as the binary and arguments it was given, in either form.
func FuzzParseHookCommand(f *testing.F) {
	inline, _ := harness.HookCommand(harness.ClaudeCode, "/opt/writ-hook", "hook", "claude-code", "--config", "/etc/w.json")
	nested, _ := harness.WrapHookCommand("/opt/wa", "hook", "codex")
	for _, seed := range []string{inline, nested, "worker-agent hook claude-code", "b=; \"$b\" ", "'"} {
		f.Add(seed, "/bin/x", "--config", "/y z")
	}
	f.Fuzz(func(t *testing.T, cmd, bin, a1, a2 string) {
		for _, h := range []string{harness.ClaudeCode, harness.Codex} {
			if inv, ok := harness.ParseHookCommand(h, cmd); ok && (len(inv.Args) < 2 || inv.Args[0] != "hook" || inv.Args[1] != h) {
				t.Fatalf("%q read as %s's: %+v", cmd, h, inv)
			}
			args := []string{"hook", h, a1, a2}
			c, err := harness.HookCommand(h, bin, args...)
			if err != nil {
				continue
			}
			inv, ok := harness.ParseHookCommand(h, c)
			if !ok || !inv.Wrapped || inv.Binary != bin || !reflect.DeepEqual(inv.Args, args) {
				t.Fatalf("%s: %q read back as %+v %v", h, c, inv, ok)
			}
		}
	})
}
