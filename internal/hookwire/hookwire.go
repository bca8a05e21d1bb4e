// Package hookwire is the part of the sidecar protocol the thin hook client (writ-hook) shares with the sidecar: the hook.run request and its answers, on the standard library alone.
//
// A hook process that finds the worker's sidecar does not load writ's
// NATS stack: it sends the sidecar its arguments, the environment writ
// reads, its working directory and its stdin, and the sidecar runs the
// same hook command in its own process, with its warm connection. The
// exchange is one JSON line each way over the unix socket, as for every
// sidecar op, except that the sidecar may send a Started line first:
//
//	client  {"v":1,"op":"hook.run","worker":"","timeout_ms":N,"body":Run}
//	sidecar {"started":true}                       (once it may act)
//	sidecar {"hook":Answer}                        (the hook's answer)
//	   or   {"code":"declined","error":"..."}      (before Started only)
//
// Before Started the sidecar has done nothing a second run could not
// repeat, so a client that gets a refusal, or loses the connection, runs
// the hook itself (worker-agent hook). After Started it must not: a lost
// answer blocks the call. Every field is append-only: never rename or
// reuse a key.
package hookwire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Version is the sidecar protocol version (the "v" of every request).
const Version = 1

// OpRun is the op of a hosted hook run.
const OpRun = "hook.run"

// SocketNone as worker-agent's --socket makes a hook connect directly,
// never through a sidecar: writ-hook passes it when the sidecar took the
// connection and said nothing.
const SocketNone = "none"

// CodeDeclined is the answer of a sidecar that will not run this hook
// itself (another worker's, another environment, an older build): the
// client runs it in its own process.
const CodeDeclined = "declined"

// MaxStdin bounds the hook event a client sends (a harness's event
// carries the tool's result, up to a few MiB); a larger one is run by the
// client itself.
const MaxStdin = 16 << 20

// Run is the body of a hook.run request.
type Run struct {
	Args  []string          `json:"args"`  // worker-agent's arguments: hook <harness> [flags]
	Env   map[string]string `json:"env"`   // Env of the hook process
	Dir   string            `json:"dir"`   // its working directory (absolute)
	Stdin []byte            `json:"stdin"` // the event the harness wrote
}

// Request is one request line.
type Request struct {
	V         int    `json:"v"`
	Op        string `json:"op"`
	Worker    string `json:"worker"`
	TimeoutMS int64  `json:"timeout_ms"`
	Body      *Run   `json:"body"`
}

// Answer is what the hook printed and its exit code.
type Answer struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Exit   int    `json:"exit"`
}

// Reply is one line from the sidecar: Started, or an Answer, or an error
// code. Other sidecar ops use more keys of the same object.
type Reply struct {
	Started bool    `json:"started,omitempty"`
	Hook    *Answer `json:"hook,omitempty"`
	Code    string  `json:"code,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Errors of DecodeReply and DecodeRun.
var (
	// ErrMalformed: the line is not one the protocol allows.
	ErrMalformed = errors.New("malformed hook.run message")
)

// DecodeReply reads one sidecar line. Exactly one of Started, Hook and
// Code is set in a reply it returns.
func DecodeReply(line []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reply{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	n := 0
	if r.Started {
		n++
	}
	if r.Hook != nil {
		n++
	}
	if r.Code != "" {
		n++
	}
	if n != 1 {
		return Reply{}, fmt.Errorf("%w: want one of started, hook and code", ErrMalformed)
	}
	if r.Hook != nil && (r.Hook.Exit < 0 || r.Hook.Exit > 255) {
		return Reply{}, fmt.Errorf("%w: exit status %d", ErrMalformed, r.Hook.Exit)
	}
	return r, nil
}

// DecodeRun reads a hook.run body and checks its form: arguments that
// name a hook command, an absolute working directory and a bounded event.
func DecodeRun(body []byte) (Run, error) {
	var r Run
	if err := json.Unmarshal(body, &r); err != nil {
		return Run{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case len(r.Args) < 2 || r.Args[0] != "hook":
		return Run{}, fmt.Errorf("%w: args must start with hook <harness>", ErrMalformed)
	case !strings.HasPrefix(r.Dir, "/"):
		return Run{}, fmt.Errorf("%w: dir %q is not absolute", ErrMalformed, r.Dir)
	case len(r.Stdin) > MaxStdin:
		return Run{}, fmt.Errorf("%w: stdin of %d bytes is over %d", ErrMalformed, len(r.Stdin), MaxStdin)
	}
	for k := range r.Env {
		if !Relevant(k) {
			return Run{}, fmt.Errorf("%w: env %q is not one writ reads", ErrMalformed, k)
		}
	}
	return r, nil
}

// Relevant reports whether writ's hook reads the environment variable
// key: its own (WRIT_*), NATS's (NATS_*), and those that place the state
// directory and temporary files.
func Relevant(key string) bool {
	switch key {
	case "HOME", "XDG_STATE_HOME", "TMPDIR":
		return true
	}
	return strings.HasPrefix(key, "WRIT_") || strings.HasPrefix(key, "NATS_")
}

// Env picks the relevant variables from environ (os.Environ's form). A
// variable listed twice keeps its first value, as Go's getenv does.
func Env(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if _, seen := m[k]; ok && !seen && Relevant(k) {
			m[k] = v
		}
	}
	return m
}

// EnvDiff names the relevant variables whose value differs between a and
// b, or that only one of them sets, sorted; nil when they agree.
func EnvDiff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Exchange is the client's side of one hook.run: it writes req as a line
// on rw and reads the sidecar's lines up to its answer (rep.Hook) or its
// refusal (rep.Code), reporting whether Started came first, and calling
// onStarted (if not nil) when it does. An error (writing, reading, an
// unreadable line) comes with started as it stood: before Started the
// client may run the hook itself, after it never.
func Exchange(rw io.ReadWriter, req Request, onStarted func()) (rep Reply, started bool, err error) {
	line, err := json.Marshal(req)
	if err != nil {
		return Reply{}, false, err
	}
	if _, err := rw.Write(append(line, '\n')); err != nil {
		return Reply{}, false, err
	}
	r := bufio.NewReaderSize(rw, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return Reply{}, started, err
		}
		rep, err := DecodeReply(line)
		if err != nil {
			return Reply{}, started, err
		}
		if !rep.Started {
			return rep, started, nil
		}
		if !started && onStarted != nil {
			onStarted()
		}
		started = true
	}
}
