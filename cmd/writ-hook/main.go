// Command writ-hook is the thin hook client: an agent harness's tool hook
// that hands the event to the worker's running sidecar (worker-agent run)
// instead of starting worker-agent, and runs worker-agent hook itself when
// no sidecar will take it.
//
//	writ-hook hook claude-code|codex --socket /abs/worker-w1.sock [worker-agent hook flags]
//
// worker-agent install writes it into the harness's settings (inside the
// same fail-closed /bin/sh wrapper) when writ-hook sits beside the
// worker-agent binary. Its arguments are worker-agent's: writ-hook reads
// only --socket (where the sidecar listens) and --deadline from them, and
// sends all of them, its stdin, its working directory and the environment
// variables writ reads to the sidecar, which runs that same hook command
// in its own process and sends back what it printed and its exit code
// (package hookwire describes the exchange).
//
// It never decides anything itself, and it never lets a call through on
// a failure:
//   - no --socket, no sidecar on it, a sidecar that declines (another
//     worker's, another environment) or one that goes away before it
//     began: writ-hook runs worker-agent hook (the binary beside it) with
//     the same arguments and stdin, and exits with its status; a sidecar
//     silent for a second (paused, stuck) likewise, with --socket=none
//     added so that worker-agent connects to NATS directly;
//   - a sidecar that began the hook and then went away, or did not answer
//     within the deadline: exit 2 with one line on stderr (the call is
//     blocked; running the hook again could act twice);
//   - worker-agent missing beside it when it is needed: exit 2.
//
// It links the standard library and hookwire only, and not even package
// net (unixconn.go), so that it is a static binary that starts in a
// fraction of worker-agent's time.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/writ-dev/writ/internal/hookwire"
)

// Exit codes, as worker-agent hook's: the harnesses block a call on 2.
const (
	exitOK    = 0
	exitBlock = 2
)

// defaultDeadline is worker-agent hook's default --deadline.
const defaultDeadline = 5 * time.Second

// dialTimeout bounds connecting to the sidecar: a stale socket must cost
// almost nothing before the fallback.
const dialTimeout = 200 * time.Millisecond

// startTimeout bounds the wait for the sidecar's first line (Started, or
// an answer that needed nothing, or a refusal), which a sidecar sends
// after reading its config: one that is paused or stuck costs this much
// before writ-hook runs the hook itself, not the whole deadline.
const startTimeout = time.Second

// answerMargin is how much longer than the hook's deadline writ-hook
// waits for the sidecar's answer.
const answerMargin = time.Second

const agentName = "worker-agent"

const helpText = `writ-hook: writ's thin hook client.

Usage (as worker-agent install writes it into a harness's settings):
  writ-hook hook claude-code|codex --socket SOCKET [worker-agent hook flags]

It hands the hook event on stdin to the worker's sidecar (worker-agent run)
listening on SOCKET, which runs the same hook command in its own process,
and prints its answer. Without a sidecar that takes the event it runs
worker-agent hook, the binary beside it, with the same arguments. A call
is never let through on a failure: exit 2 with one line on stderr.
See 'worker-agent hook --help' for the hook itself.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the program; main only exits with its status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, helpText)
		return exitOK
	}
	c := client{args: args, stdout: stdout, stderr: stderr}
	self, err := os.Executable()
	if err != nil {
		c.agentErr = err
	} else {
		c.agent = filepath.Join(filepath.Dir(self), agentName)
	}
	return c.run(stdin)
}

// client is one hook run.
type client struct {
	args           []string
	stdout, stderr io.Writer
	agent          string // worker-agent, beside this executable
	agentErr       error  // why agent is not known
}

// run tries the sidecar, then worker-agent.
func (c *client) run(stdin io.Reader) int {
	socket, deadline, ok := c.options()
	if !ok {
		return c.fallback(stdin)
	}
	// The whole event, bounded: a larger one goes to worker-agent with
	// the rest of stdin behind what was read.
	event, err := io.ReadAll(io.LimitReader(stdin, hookwire.MaxStdin+1))
	if err != nil {
		return c.block("reading the hook event from stdin: %v", err)
	}
	if len(event) > hookwire.MaxStdin {
		return c.fallback(io.MultiReader(bytes.NewReader(event), stdin))
	}
	code, done, stalled := c.viaSidecar(socket, deadline, event)
	if done {
		return code
	}
	if stalled {
		// worker-agent would wait for the same silent sidecar until its
		// deadline: it connects directly instead.
		c.args = withoutSidecar(c.args)
	}
	return c.fallback(bytes.NewReader(event))
}

// withoutSidecar is args with --socket=none, before a "--" if any: the
// hook's last --socket wins.
func withoutSidecar(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i, a := range args {
		if a == "--" {
			out = append(out, "--socket="+hookwire.SocketNone)
			return append(out, args[i:]...)
		}
		out = append(out, a)
	}
	return append(out, "--socket="+hookwire.SocketNone)
}

// options reads --socket and --deadline from the hook's arguments; ok is
// false when the sidecar is not to be tried (no absolute --socket, a help
// request, an argument it cannot read).
func (c *client) options() (socket string, deadline time.Duration, ok bool) {
	if len(c.args) < 2 || c.args[0] != "hook" {
		return "", 0, false
	}
	deadline = defaultDeadline
	for i := 2; i < len(c.args); i++ {
		a := c.args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "-h", "--help", "-help":
			return "", 0, false
		case "--socket", "-socket", "--deadline", "-deadline":
		default:
			continue
		}
		if !hasVal {
			if i+1 >= len(c.args) {
				return "", 0, false
			}
			i++
			val = c.args[i]
		}
		switch strings.TrimLeft(name, "-") {
		case "socket":
			socket = val
		case "deadline":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return "", 0, false // worker-agent says what is wrong
			}
			deadline = d
		}
	}
	return socket, deadline, filepath.IsAbs(socket)
}

// viaSidecar asks the sidecar on socket to run the hook. done is false
// when the hook is to be run by worker-agent instead: nothing was begun;
// stalled then says the sidecar took the connection and said nothing.
func (c *client) viaSidecar(socket string, deadline time.Duration, event []byte) (code int, done, stalled bool) {
	dir, err := os.Getwd()
	if err != nil || !filepath.IsAbs(dir) {
		return 0, false, false
	}
	wait := deadline + answerMargin
	conn, err := dialUnix(socket, dialTimeout, min(startTimeout, wait))
	if err != nil {
		return 0, false, isTimeout(err) // a full backlog: nobody accepts
	}
	defer conn.Close()
	req := hookwire.Request{
		V: hookwire.Version, Op: hookwire.OpRun, TimeoutMS: wait.Milliseconds(),
		Body: &hookwire.Run{Args: c.args, Env: hookwire.Env(os.Environ()), Dir: dir, Stdin: event},
	}
	// Once the sidecar began, its answer may take the hook's deadline.
	extend := func() { _ = setTimeouts(int(conn.Fd()), wait) }
	rep, started, err := hookwire.Exchange(conn, req, extend)
	switch {
	case !started && (err != nil || rep.Code != ""):
		// Nothing begun: declined, an older sidecar, gone, or silent
		// (paused, stuck) past startTimeout. Closing the connection
		// makes a late Started fail in the sidecar, which then stops.
		return 0, false, err != nil && isTimeout(err)
	case err != nil && isTimeout(err):
		return c.block("the sidecar on %s began this hook but gave no answer within %v", socket, wait), true, false
	case errors.Is(err, hookwire.ErrMalformed):
		return c.block("the sidecar on %s began this hook and then sent an unreadable answer: %v", socket, err), true, false
	case err != nil:
		return c.block("the sidecar on %s began this hook and went away before answering (%v)", socket, err), true, false
	case rep.Code != "":
		return c.block("the sidecar on %s began this hook and then failed: %s: %s", socket, rep.Code, rep.Error), true, false
	}
	return c.answer(rep.Hook), true, false
}

// answer prints the hook's answer and returns its exit status.
func (c *client) answer(a *hookwire.Answer) int {
	if len(a.Stdout) > 0 {
		if _, err := c.stdout.Write(a.Stdout); err != nil {
			return c.block("writing the hook answer: %v", err)
		}
	}
	if a.Stderr != "" {
		_, _ = io.WriteString(c.stderr, a.Stderr)
	}
	return a.Exit
}

// fallback runs worker-agent, the binary beside this one, with the same
// arguments and stdin, and returns its exit status; a status it did not
// choose (a crash, a signal) blocks the call.
func (c *client) fallback(stdin io.Reader) int {
	if c.agentErr != nil {
		return c.block("finding %s beside writ-hook: %v", agentName, c.agentErr)
	}
	agent := c.agent
	cmd := exec.Command(agent, c.args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, c.stdout, c.stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	case errors.As(err, &ee):
		return c.block("%s ended by %v", agent, ee.ProcessState)
	default:
		return c.block("running %s: %v; reinstall worker-agent beside writ-hook, then run worker-agent doctor", agent, err)
	}
}

// block writes the one line of a blocked call and returns exit 2.
func (c *client) block(format string, a ...any) int {
	msg := strings.ReplaceAll(fmt.Sprintf(format, a...), "\n", " ")
	fmt.Fprintf(c.stderr, "writ: %s — the call is blocked\n", msg)
	return exitBlock
}
