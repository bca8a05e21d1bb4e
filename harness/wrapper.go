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
// the call run. So the installed command runs the binary inside a small
// POSIX sh script that passes its deliberate answers (exit 0, exit 2)
// through unchanged and turns everything else — a missing or
// non-executable binary, any other exit status — into exit 2 with one
// line on stderr that says what is wrong and what to do.
//
// The script comes in two forms, by the shell the harness runs hook
// commands in:
//
//   - inline, for Claude Code, which runs a hook command with sh -c (bash
//     where it has no sh; never the user's login shell). The command is
//     the script itself, so the harness's own shell checks the binary,
//     runs it and reads its status, and no second shell is started (a
//     nested /bin/sh cost about 0.9 ms per event on a 2-core VM):
//
//     b=/abs/writ-hook; if [ ! -x "$b" ] ...; fi; "$b" hook claude-code [--config /abs/file ...]; s=$?; if ...; exit $s
//
//   - nested, for Codex, which runs hook commands with the user's $SHELL
//     -lc (fish, csh, anything): the command is one plain command that
//     starts /bin/sh on the script, and reads the same in every shell:
//
//     /bin/sh -c '<script>' writ-hook /abs/worker-agent hook <harness> [--config /abs/file]
//
// Both need nothing but a POSIX sh, and neither holds a quote or
// backslash inside the script.

// WrapperName is $0 of the nested wrapper: it marks a command as writ's
// and prefixes the shell's own messages about it.
const WrapperName = "writ-hook"

// The script's parts around the run of the binary; $b is the binary. They
// must hold no single quote and no backslash.
const (
	wrapperCheck = `if [ ! -x "$b" ] || [ -d "$b" ]; then ` +
		`echo "writ: the hook program $b is missing or not executable, so writ blocks this call. Reinstall worker-agent (or run worker-agent install again with the right --binary), then run worker-agent doctor." >&2; exit 2; fi; `
	wrapperStatus = `; s=$?; ` +
		`if [ $s -ne 0 ] && [ $s -ne 2 ]; then ` +
		`echo "writ: the hook program $b failed with exit status $s (a crash, or killed by a signal), so writ blocks this call. Run worker-agent doctor to find out why." >&2; exit 2; fi; ` +
		`exit $s`
	// wrapperScript is the nested form's sh program. $1 is the binary,
	// the rest its arguments.
	wrapperScript = `b=$1; shift; ` + wrapperCheck + `"$b" "$@"` + wrapperStatus
	// inlineHead and inlineRun frame the inline form's binary and
	// arguments: inlineHead BIN inlineRun ARGS wrapperStatus.
	inlineHead = `b=`
	inlineRun  = `; ` + wrapperCheck + `"$b" `
)

// ErrHookPath: a path cannot be written into the wrapped hook command.
var ErrHookPath = errors.New("hook command")

// HookCommand returns the installed hook command for harness that runs
// bin (an absolute path) with args through the fail-closed script: the
// inline form for Claude Code, the nested form otherwise. bin and args
// must not hold a single quote or a backslash (they would read
// differently in the shells a harness may use) or a newline.
func HookCommand(harness, bin string, args ...string) (string, error) {
	words, err := hookWords(bin, args)
	if err != nil {
		return "", err
	}
	if harness != ClaudeCode {
		return strings.Join(append([]string{"/bin/sh", "-c", "'" + wrapperScript + "'", WrapperName}, words...), " "), nil
	}
	return inlineHead + words[0] + inlineRun + strings.Join(words[1:], " ") + wrapperStatus, nil
}

// WrapHookCommand returns the nested form of the installed hook command,
// which runs in any shell (see HookCommand).
func WrapHookCommand(bin string, args ...string) (string, error) {
	return HookCommand(Codex, bin, args...)
}

// hookWords is bin and args quoted for the command, checked as
// HookCommand says.
func hookWords(bin string, args []string) ([]string, error) {
	if !filepath.IsAbs(bin) {
		return nil, fmt.Errorf("%w: %q is not an absolute path", ErrHookPath, bin)
	}
	words := make([]string, 0, 1+len(args))
	for _, w := range append([]string{bin}, args...) {
		if strings.ContainsAny(w, "'\\\n\r") {
			return nil, fmt.Errorf("%w: %q holds a quote, a backslash or a newline; use a path without them", ErrHookPath, w)
		}
		words = append(words, ShellQuote(w))
	}
	return words, nil
}

// HookInvocation is what an installed hook command runs.
type HookInvocation struct {
	Binary  string   // the worker-agent binary
	Args    []string // its arguments: hook <harness> [flags]
	Wrapped bool     // it runs through writ's fail-closed wrapper
}

// ParseHookCommand reads a hook command writ installed for harness: the
// inline or the nested form, or the bare form earlier versions wrote ("[VAR=v ...]
// /path/worker-agent hook <harness> ..."). ok is false for any other
// command.
func ParseHookCommand(harness, cmd string) (inv HookInvocation, ok bool) {
	if inv, ok := parseInline(cmd); ok {
		if len(inv.Args) >= 2 && inv.Args[0] == "hook" && inv.Args[1] == harness {
			return inv, true
		}
		return HookInvocation{}, false
	}
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

// parseInline reads the inline form of an installed hook command: the
// command HookCommand writes for Claude Code, and nothing else.
func parseInline(cmd string) (HookInvocation, bool) {
	rest, ok := strings.CutPrefix(cmd, inlineHead)
	if !ok {
		return HookInvocation{}, false
	}
	binText, rest, ok := strings.Cut(rest, inlineRun)
	if !ok {
		return HookInvocation{}, false
	}
	argText, ok := strings.CutSuffix(rest, wrapperStatus)
	if !ok {
		return HookInvocation{}, false
	}
	bin, ok := shellWords(binText)
	if !ok || len(bin) != 1 {
		return HookInvocation{}, false
	}
	args, ok := shellWords(argText)
	if !ok {
		return HookInvocation{}, false
	}
	// Only the exact command install writes: anything added to it (an
	// operator, a second command) makes it someone else's.
	if again, err := HookCommand(ClaudeCode, bin[0], args...); err != nil || again != cmd {
		return HookInvocation{}, false
	}
	return HookInvocation{Binary: bin[0], Args: args, Wrapped: true}, true
}
