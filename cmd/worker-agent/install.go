package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/harness"
)

// installTimeout is the hook timeout (seconds) written into harness
// settings: comfortably above the hook's own --deadline, so the hook always
// gives up (and blocks) before the harness kills it (and proceeds).
const installTimeout = 30

// target is one harness's settings file layout.
type target struct {
	harness string
	dir     string // settings directory under the project or home
	file    string
	events  []string
	matcher string
}

var targets = map[string]target{
	harness.ClaudeCode: {harness.ClaudeCode, ".claude", "settings.json", harness.ClaudeCodeEvents, "*"},
	// Codex reads the same layout from hooks.json; no matcher matches
	// every tool.
	harness.Codex: {harness.Codex, ".codex", "hooks.json", harness.CodexEvents, ""},
}

type installFlags struct {
	project string
	user    bool
	config  string
	binary  string
}

func newInstallCmd(g *globals, install bool) *cobra.Command {
	verb, short := "install", "Add writ's hooks to a harness's settings"
	if !install {
		verb, short = "uninstall", "Remove the hooks writ installed from a harness's settings"
	}
	var f installFlags
	cmd := &cobra.Command{
		Use:   verb + " claude-code|codex [--project DIR | --user]",
		Short: short,
		Long: `install merges writ's hook entries into the harness's settings:
  claude-code  DIR/.claude/settings.json (or ~/.claude/settings.json with
               --user): PreToolUse, PostToolUse and PostToolUseFailure with
               matcher "*", UserPromptSubmit and SessionStart without one;
               command "worker-agent hook claude-code", timeout 30s
  codex        DIR/.codex/hooks.json (or ~/.codex/hooks.json): PreToolUse,
               PostToolUse, UserPromptSubmit and SessionStart, no matcher
               (every tool, prompt and start), command
               "worker-agent hook codex", timeout 30s
The prompt and session-start hooks register what enters the session as
provenance sources (see 'worker-agent hook --help').
Existing hooks, unknown keys and their order are kept; running install again
changes nothing. uninstall removes exactly the writ hook entries (and the
groups and lists left empty by that), nothing else. The file is replaced
atomically. --project defaults to the current directory.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("name the harness: %s claude-code or %s codex", verb, verb)
			}
			if _, ok := targets[args[0]]; !ok {
				return usageErr("unknown harness %q: want claude-code or codex", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.install(targets[args[0]], f, install)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.project, "project", "", "project directory (default: the current directory)")
	fl.BoolVar(&f.user, "user", false, "use the user-level settings in the home directory instead")
	if install {
		fl.StringVar(&f.config, "config", "", "worker config the hook should read (written into the hook command as an absolute path)")
		fl.StringVar(&f.binary, "binary", "", "worker-agent binary the hook runs (default: this executable)")
	}
	return cmd
}

func (g *globals) install(t target, f installFlags, install bool) error {
	if f.user && f.project != "" {
		return usageErr("give --project or --user, not both")
	}
	base := f.project
	if f.user {
		h, err := os.UserHomeDir()
		if err != nil {
			return usageErr("--user: %v", err)
		}
		base = h
	}
	if base == "" {
		base = "."
	}
	path := filepath.Join(base, t.dir, t.file)
	// A settings file kept as a symlink (dotfile managers) is updated
	// where it points, not replaced by a regular file.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	spec, err := hookSpec(t, f)
	if err != nil {
		return err
	}
	doc, mode, err := readSettings(path)
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	var (
		out     []byte
		changed bool
	)
	if install {
		out, changed, err = harness.InstallHooks(doc, spec)
	} else {
		out, changed, err = harness.UninstallHooks(doc, func(c string) bool { return c == spec.Command || spec.Owns(c) })
	}
	if err != nil {
		return &exitError{code: ExitUsage, err: fmt.Errorf("%s: %v", path, err)}
	}
	switch {
	case !changed && install:
		fmt.Fprintf(g.stdout, "writ hooks already installed in %s\n", path)
		return nil
	case !changed:
		fmt.Fprintf(g.stdout, "no writ hooks in %s\n", path)
		return nil
	}
	if err := writeAtomic(path, out, mode); err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	if install {
		fmt.Fprintf(g.stdout, "installed writ hooks for %s in %s (%s): %s\n", t.harness, path, strings.Join(t.events, ", "), spec.Command)
	} else {
		fmt.Fprintf(g.stdout, "removed writ hooks from %s\n", path)
	}
	return nil
}

// hookSpec is the hook entry for t: the absolute path of the binary, "hook
// <harness>", and --config when one was named.
func hookSpec(t target, f installFlags) (harness.HookSpec, error) {
	bin := f.binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return harness.HookSpec{}, &exitError{code: ExitUsage, err: fmt.Errorf("finding this executable (pass --binary): %v", err)}
		}
		bin = exe
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return harness.HookSpec{}, usageErr("--binary: %v", err)
	}
	words := []string{harness.ShellQuote(bin), "hook", t.harness}
	if f.config != "" {
		c, err := filepath.Abs(f.config)
		if err != nil {
			return harness.HookSpec{}, usageErr("--config: %v", err)
		}
		words = append(words, "--config", harness.ShellQuote(c))
	}
	return harness.HookSpec{
		Events: t.events, Matcher: t.matcher, Command: strings.Join(words, " "),
		Timeout: installTimeout, Owns: harness.OwnsCommand(t.harness),
	}, nil
}

// readSettings returns the file's bytes and mode (nil and 0644 when it
// does not exist).
func readSettings(path string) ([]byte, os.FileMode, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, harness.MaxSettingsBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > harness.MaxSettingsBytes {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", path, harness.MaxSettingsBytes)
	}
	return b, st.Mode().Perm(), nil
}

// writeAtomic replaces path with data: a temporary file in the same
// directory, synced, then renamed over it.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".writ-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}
