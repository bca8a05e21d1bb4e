package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/hookwire"
)

// fakeSidecar serves one hook.run connection at a fresh socket: serve
// gets the decoded request and writes the reply lines. It returns the
// socket and a channel with the request it saw.
func fakeSidecar(t *testing.T, serve func(req hookwire.Request, conn net.Conn)) (string, <-chan hookwire.Request) {
	t.Helper()
	dir, err := os.MkdirTemp("", "wh") // short: a socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	seen := make(chan hookwire.Request, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		line, err := bufio.NewReader(conn).ReadBytes('\n')
		if err != nil {
			return
		}
		var req hookwire.Request
		if json.Unmarshal(line, &req) != nil {
			return
		}
		seen <- req
		serve(req, conn)
	}()
	return socket, seen
}

func send(conn net.Conn, r hookwire.Reply) {
	b, _ := json.Marshal(r)
	_, _ = conn.Write(append(b, '\n'))
}

// agentScript writes a stand-in worker-agent that prints its arguments
// and stdin and exits with status 3, so a test sees that it ran, with
// what, and that its status passes through.
func agentScript(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "worker-agent")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho \"agent $*\"\ncat\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runClient(t *testing.T, agent string, stdin string, args ...string) outcome {
	t.Helper()
	var out, errb bytes.Buffer
	c := client{args: args, stdout: &out, stderr: &errb, agent: agent}
	code := c.run(strings.NewReader(stdin))
	return outcome{code, out.String(), errb.String()}
}

const event = `{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"ls"},"cwd":"/tmp"}`

// The sidecar's answer is printed as it is and its status returned; the
// request carries the arguments, the working directory, the event and the
// environment variables writ reads, and no others.
func TestAnswerFromTheSidecar(t *testing.T) {
	t.Setenv("WRIT_ROUTE", "nightly")
	t.Setenv("UNRELATED_SECRET", "x")
	socket, seen := fakeSidecar(t, func(_ hookwire.Request, conn net.Conn) {
		send(conn, hookwire.Reply{Started: true})
		send(conn, hookwire.Reply{Hook: &hookwire.Answer{Stdout: []byte(`{"deny":1}`), Stderr: "a note\n", Exit: 0}})
	})
	args := []string{"hook", "claude-code", "--config", "/etc/w.json", "--socket", socket}
	got := runClient(t, filepath.Join(t.TempDir(), "absent"), event, args...)
	if want := (outcome{0, `{"deny":1}`, "a note\n"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	req := <-seen
	wd, _ := os.Getwd()
	if req.Op != hookwire.OpRun || req.V != hookwire.Version || !reflect.DeepEqual(req.Body.Args, args) ||
		req.Body.Dir != wd || string(req.Body.Stdin) != event {
		t.Fatalf("request %+v", req)
	}
	if req.Body.Env["WRIT_ROUTE"] != "nightly" || req.Body.Env["UNRELATED_SECRET"] != "" {
		t.Fatalf("env %v: want WRIT_ROUTE and not UNRELATED_SECRET", req.Body.Env)
	}
	if want := (defaultDeadline + answerMargin).Milliseconds(); req.TimeoutMS != want {
		t.Fatalf("timeout_ms %d, want %d", req.TimeoutMS, want)
	}
}

// Whenever the sidecar has not begun the hook, worker-agent runs it with
// the same arguments and the same stdin, and its status is the answer;
// once the sidecar has begun, a missing answer blocks the call and
// worker-agent does not run.
func TestFallbackOnlyBeforeTheSidecarBegan(t *testing.T) {
	agent := agentScript(t)
	for _, tc := range []struct {
		name     string
		serve    func(hookwire.Request, net.Conn) // nil: no sidecar at all
		deadline string
		fallback bool
		direct   bool   // the fallback is told to skip the sidecar
		stderr   string // for a block
	}{
		{name: "declined", fallback: true, serve: func(_ hookwire.Request, c net.Conn) {
			send(c, hookwire.Reply{Code: hookwire.CodeDeclined, Error: "another worker"})
		}},
		{name: "closed before a reply", fallback: true, serve: func(hookwire.Request, net.Conn) {}},
		{name: "unreadable reply before started", fallback: true, serve: func(_ hookwire.Request, c net.Conn) {
			_, _ = c.Write([]byte("{\"v\":\n"))
		}},
		{name: "no sidecar on the socket", fallback: true},
		{name: "silent before started (paused, stuck)", fallback: true, direct: true, serve: func(hookwire.Request, net.Conn) {
			time.Sleep(3 * time.Second) // writ-hook gives up after startTimeout
		}},
		{name: "began then went away", stderr: "began this hook and went away", serve: func(_ hookwire.Request, c net.Conn) {
			send(c, hookwire.Reply{Started: true})
		}},
		{name: "began then unreadable", stderr: "unreadable answer", serve: func(_ hookwire.Request, c net.Conn) {
			send(c, hookwire.Reply{Started: true})
			_, _ = c.Write([]byte("{}\n"))
		}},
		{name: "began then an error code", stderr: "began this hook and then failed", serve: func(_ hookwire.Request, c net.Conn) {
			send(c, hookwire.Reply{Started: true})
			send(c, hookwire.Reply{Code: "unavailable", Error: "x"})
		}},
		{name: "began then silent past the deadline", deadline: "50ms", stderr: "gave no answer within", serve: func(_ hookwire.Request, c net.Conn) {
			send(c, hookwire.Reply{Started: true})
			time.Sleep(3 * time.Second) // the client's 1.05 s wait ends first
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var socket string
			if tc.serve != nil {
				socket, _ = fakeSidecar(t, tc.serve)
			} else {
				socket = filepath.Join(t.TempDir(), "nobody.sock")
			}
			args := []string{"hook", "codex", "--socket=" + socket}
			if tc.deadline != "" {
				args = append(args, "--deadline", tc.deadline)
			}
			got := runClient(t, agent, event, args...)
			if tc.fallback {
				ran := args
				if tc.direct {
					ran = append(ran[:len(ran):len(ran)], "--socket=none")
				}
				want := outcome{3, "agent " + strings.Join(ran, " ") + "\n" + event, ""}
				if got != want {
					t.Fatalf("got %+v, want worker-agent's run %+v", got, want)
				}
				return
			}
			if got.code != exitBlock || got.stdout != "" || !strings.Contains(got.stderr, tc.stderr) ||
				strings.Count(got.stderr, "\n") != 1 || strings.Contains(got.stderr, "agent ") {
				t.Fatalf("got %+v, want exit 2 and one line saying %q, worker-agent not run", got, tc.stderr)
			}
		})
	}
}

func TestWithoutSidecar(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"hook codex --socket /s", "hook codex --socket /s --socket=none"},
		{"hook codex -- x", "hook codex --socket=none -- x"},
	} {
		if got := strings.Join(withoutSidecar(strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Without an absolute --socket, or when help is asked for, worker-agent
// runs the hook directly; a missing worker-agent blocks the call.
func TestWithoutASidecarWorkerAgentRuns(t *testing.T) {
	agent := agentScript(t)
	for _, args := range [][]string{
		{"hook", "claude-code"},
		{"hook", "claude-code", "--socket", "relative.sock"},
		{"hook", "claude-code", "--socket"},
		{"hook", "claude-code", "--socket", "/x.sock", "--deadline", "soon"},
		{"hook", "claude-code", "--socket", "/x.sock", "--help"},
		{"request", "--worker", "w1"},
	} {
		got := runClient(t, agent, "in", args...)
		if want := (outcome{3, "agent " + strings.Join(args, " ") + "\nin", ""}); got != want {
			t.Errorf("%q: got %+v, want %+v", args, got, want)
		}
	}
	got := runClient(t, filepath.Join(t.TempDir(), "worker-agent"), "in", "hook", "codex")
	if got.code != exitBlock || !strings.Contains(got.stderr, "reinstall worker-agent beside writ-hook") {
		t.Fatalf("missing worker-agent: got %+v, want exit 2 saying what to do", got)
	}
	crash := filepath.Join(t.TempDir(), "worker-agent")
	if err := os.WriteFile(crash, []byte("#!/bin/sh\nkill -9 $$\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got = runClient(t, crash, "in", "hook", "codex")
	if got.code != exitBlock || !strings.Contains(got.stderr, "ended by") {
		t.Fatalf("killed worker-agent: got %+v, want exit 2", got)
	}
}

// An event over hookwire.MaxStdin goes to worker-agent whole.
func TestLargeEventGoesToWorkerAgentWhole(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "worker-agent")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\nwc -c\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	socket, seen := fakeSidecar(t, func(hookwire.Request, net.Conn) {})
	big := strings.Repeat("x", hookwire.MaxStdin+10)
	got := runClient(t, agent, big, "hook", "codex", "--socket", socket)
	if strings.TrimSpace(got.stdout) != "16777226" || got.code != 0 {
		t.Fatalf("got %+v, want worker-agent to read all %d bytes", got, len(big))
	}
	select {
	case r := <-seen:
		t.Fatalf("the sidecar was asked: %+v", r.Op)
	default:
	}
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), "--socket SOCKET") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}

// FuzzOptions: reading the arguments never panics, and a socket it
// returns to try is absolute with a positive deadline.
func FuzzOptions(f *testing.F) {
	for _, s := range []string{"hook\x00codex\x00--socket\x00/a", "hook\x00codex\x00--socket=/a\x00--deadline=1s", "hook\x00x\x00--deadline", "hook", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := client{args: strings.Split(s, "\x00")}
		socket, d, ok := c.options()
		if ok && (!filepath.IsAbs(socket) || d <= 0) {
			t.Fatalf("%q: socket %q deadline %v", s, socket, d)
		}
	})
}
