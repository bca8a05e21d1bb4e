package harness

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// The hook command writ installs does not run the worker-agent directly.
// Both harnesses block a call only on the hook's exit 2 (Codex also wants
// a line on stderr); every other exit code — 127 for a binary that was
// deleted or moved, 126 for one that cannot be executed, 1 for a crash,
// 128+n for one killed by signal n — and a hook that prints nothing let
// the call run. So the installed command is a small POSIX sh wrapper:
//
//	/bin/sh -c '<wrapper>' writ-hook /abs/worker-agent hook <harness> [--config /abs/file]
//
// It runs the binary with the harness's stdin, passes its deliberate
// answers (exit 0, exit 2) through unchanged, and turns everything else
// — a missing or non-executable binary, any other exit status — into
// exit 2 with one line on stderr that says what is wrong and what to do.
// It needs nothing but /bin/sh, and the script holds no quote or
// backslash, so the command reads the same in sh, bash, zsh and fish
// (Codex runs hook commands with the user's $SHELL -lc).

// WrapperName is $0 of the wrapper: it marks a command as writ's and
// prefixes the shell's own messages about it.
const WrapperName = "writ-hook"

// wrapperScript is the sh program of the wrapper. $1 is the binary, the
// rest its arguments. It must hold no single quote and no backslash.
const wrapperScript = `b=$1; shift; ` +
	`if [ ! -x "$b" ] || [ -d "$b" ]; then ` +
	`echo "writ: the hook program $b is missing or not executable, so writ blocks this call. Reinstall worker-agent (or run worker-agent install again with the right --binary), then run worker-agent doctor." >&2; exit 2; fi; ` +
	`"$b" "$@"; s=$?; ` +
	`if [ $s -ne 0 ] && [ $s -ne 2 ]; then ` +
	`echo "writ: the hook program $b failed with exit status $s (a crash, or killed by a signal), so writ blocks this call. Run worker-agent doctor to find out why." >&2; exit 2; fi; ` +
	`exit $s`

// ErrHookPath: a path cannot be written into the wrapped hook command.
var ErrHookPath = errors.New("hook command")

// WrapHookCommand returns the installed hook command that runs bin (an
// absolute path) with args through the wrapper. bin and args must not
// hold a single quote or a backslash (they would read differently in the
// shells a harness may use) or a newline.
func WrapHookCommand(bin string, args ...string) (string, error) {
	if !filepath.IsAbs(bin) {
		return "", fmt.Errorf("%w: %q is not an absolute path", ErrHookPath, bin)
	}
	words := []string{"/bin/sh", "-c", "'" + wrapperScript + "'", WrapperName}
	for _, w := range append([]string{bin}, args...) {
		if strings.ContainsAny(w, "'\\\n\r") {
			return "", fmt.Errorf("%w: %q holds a quote, a backslash or a newline; use a path without them", ErrHookPath, w)
		}
		words = append(words, ShellQuote(w))
	}
	return strings.Join(words, " "), nil
}

// HookInvocation is what an installed hook command runs.
type HookInvocation struct {
	Binary  string   // the worker-agent binary
	Args    []string // its arguments: hook <harness> [flags]
	Wrapped bool     // it runs through writ's fail-closed wrapper
}

// ParseHookCommand reads a hook command writ installed for harness: the
// wrapped form, or the bare form earlier versions wrote ("[VAR=v ...]
// /path/worker-agent hook <harness> ..."). ok is false for any other
// command.
func ParseHookCommand(harness, cmd string) (inv HookInvocation, ok bool) {
	words, ok := shellWords(cmd)
	if !ok {
		return HookInvocation{}, false
	}
	if len(words) >= 7 && filepath.Base(words[0]) == "sh" && words[1] == "-c" && words[3] == WrapperName {
		if words[5] == "hook" && words[6] == harness {
			return HookInvocation{Binary: words[4], Args: words[5:], Wrapped: true}, true
		}
		return HookInvocation{}, false
	}
	for len(words) > 0 && isAssignment(words[0]) {
		words = words[1:]
	}
	if len(words) >= 3 && filepath.Base(words[0]) == "worker-agent" && words[1] == "hook" && words[2] == harness {
		return HookInvocation{Binary: words[0], Args: words[1:]}, true
	}
	return HookInvocation{}, false
}

// Flag returns the value of --name in the invocation's arguments ("--name
// v" or "--name=v").
func (h HookInvocation) Flag(name string) (string, bool) {
	for i, a := range h.Args {
		if a == "--"+name && i+1 < len(h.Args) {
			return h.Args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}
