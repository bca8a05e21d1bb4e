package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/gobuild"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// The end-to-end tests run the worker-agent binary itself, built once per
// test run into a temporary directory, the way a harness runs it.
var bins gobuild.Cache

// builtBinary returns the path of the built worker-agent.
func builtBinary(t testing.TB) string {
	t.Helper()
	p, err := bins.Path("github.com/writ-dev/writ/cmd/worker-agent")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// binEnv is the environment of a built-binary run: no WRIT_* variables
// from the caller, and a home and state directory of the test's own.
func binEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WRIT_") || strings.HasPrefix(kv, "NATS_URL=") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	return append(env, extra...)
}

// binRun is one run of the built binary.
type binRun struct {
	dir   string // working directory; a fresh temp dir when empty
	stdin []byte
	env   []string // added to binEnv

	// timeout bounds the process from its start: runTimeout for run,
	// the test's end for command when zero.
	timeout time.Duration
	// binary returns the binary to run; builtBinary when nil.
	binary func(testing.TB) string
}

// runTimeout bounds one run of the built binary (a hook call, an install).
// It starts when the binary exists: building it on a cold cache takes
// longer than any run.
const runTimeout = 30 * time.Second

// command prepares a run of the built binary; the test's end (or
// r.timeout, counted from here) kills it. The binary is resolved, and so
// built on the first call, before the clock starts.
func (r binRun) command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	resolve := r.binary
	if resolve == nil {
		resolve = builtBinary
	}
	bin := resolve(t)
	dir := r.dir
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if r.timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, r.timeout)
		t.Cleanup(stop)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = binEnv(dir, r.env...)
	return cmd
}

// run runs the built binary to its exit, within r.timeout (runTimeout when
// zero); result.took is the process's own time, from start to exit.
func (r binRun) run(t testing.TB, args ...string) result {
	t.Helper()
	if r.timeout == 0 {
		r.timeout = runTimeout
	}
	cmd := r.command(t, args...)
	cmd.Stdin = bytes.NewReader(r.stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running worker-agent %s: %v (after %s)", strings.Join(args, " "), err, took.Round(time.Millisecond))
	}
	return result{code: code, stdout: out.String(), stderr: errb.String(), took: took}
}

// writeJSON writes v as JSON to dir/name and returns the path.
func writeJSON(t testing.TB, dir, name string, v any) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fixture reads a hook payload from harness/testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "harness", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// patch sets top-level fields of a JSON object (nil deletes).
func patch(t testing.TB, raw []byte, set map[string]any) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if v == nil {
			delete(m, k)
			continue
		}
		b, _ := json.Marshal(v)
		m[k] = b
	}
	out, _ := json.Marshal(m)
	return out
}

// receipts returns every event in the receipt stream once the issuer has
// published all it recorded; opts are the NATS options of a server with
// authorization.
func receipts(t testing.TB, env *testenv.Single, opts ...nats.Option) []events.Event {
	t.Helper()
	nc, err := nats.Connect(env.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last uint64
	testenv.WaitFor(t, 10*time.Second, "the receipt stream to catch up", func() bool {
		st, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		want := env.Service.Status().Seq
		last = 0
		if err == nil {
			last = info.State.LastSeq
		}
		return err == nil && last >= want
	})
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.Event
	for seq := uint64(1); seq <= last; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		e, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		out = append(out, e)
	}
	return out
}

// byKey returns the events recorded under an idempotency key.
func byKey(evs []events.Event, key string) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.IdemKey == key {
			out = append(out, e)
		}
	}
	return out
}

// effectsOf returns the effect events of a grant.
func effectsOf(evs []events.Event, grant string) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.GrantID == grant && (e.Kind == events.KindEffect || e.Kind == events.KindEffectRefused) {
			out = append(out, e)
		}
	}
	return out
}

func kinds(evs []events.Event) []events.Kind {
	out := make([]events.Kind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// envFakeMCP makes the test binary act as a small MCP server (see
// fakeMCPServer).
const envFakeMCP = "WRIT_TEST_FAKE_MCP"

// fakeMCPServer is a stdio MCP server for the proxy tests. Requests are
// answered concurrently, each after params.arguments.ms milliseconds:
//
//	initialize       serverInfo "fake"
//	tools/list       echo, big, fail, rm
//	tools/call echo  the text argument; big: a text of n bytes; fail: isError
//	size             the byte length of the request line
//	received         the tool names of every tools/call received so far
//	notifications/ping (no id) is answered with notifications/pong
//
// It exits 0 when stdin closes.
func fakeMCPServer(in io.Reader, out io.Writer) int {
	var (
		mu       sync.Mutex
		outMu    sync.Mutex
		received []string
		wg       sync.WaitGroup
	)
	enc := json.NewEncoder(out)
	send := func(v any) {
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(v)
	}
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name      string `json:"name"`
					Arguments struct {
						Text string `json:"text"`
						N    int    `json:"n"`
						MS   int    `json:"ms"`
					} `json:"arguments"`
				} `json:"params"`
			}
			if json.Unmarshal(line, &msg) != nil {
				send(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "parse error"}})
				continue
			}
			if msg.Method == "tools/call" {
				mu.Lock()
				received = append(received, msg.Params.Name)
				mu.Unlock()
			}
			if msg.ID == nil {
				if msg.Method == "notifications/ping" {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/pong"})
				}
			} else {
				size := len(line)
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Duration(msg.Params.Arguments.MS) * time.Millisecond)
					resp := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
					text := func(s string, isErr bool) map[string]any {
						return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isErr}
					}
					switch msg.Method {
					case "initialize":
						resp["result"] = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "fake", "version": "1.0.0"}}
					case "tools/list":
						var tools []any
						for _, n := range []string{"echo", "big", "fail", "rm"} {
							tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
						}
						resp["result"] = map[string]any{"tools": tools}
					case "size":
						resp["result"] = map[string]any{"bytes": size}
					case "received":
						mu.Lock()
						resp["result"] = map[string]any{"tools": append([]string{}, received...)}
						mu.Unlock()
					case "tools/call":
						switch msg.Params.Name {
						case "big":
							resp["result"] = text(strings.Repeat("x", msg.Params.Arguments.N), false)
						case "fail":
							resp["result"] = text("boom", true)
						default:
							resp["result"] = text(msg.Params.Arguments.Text, false)
						}
					default:
						resp["error"] = map[string]any{"code": -32601, "message": "method not found"}
					}
					send(resp)
				}()
			}
		}
		if err != nil {
			break
		}
	}
	wg.Wait()
	return 0
}
