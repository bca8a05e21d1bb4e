package harness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// fakeGate allows every tool but those named deny*, after an optional
// delay, and records what it saw.
type fakeGate struct {
	delay   time.Duration
	release chan struct{} // a call named "hold" waits for it
	doneGo  chan struct{} // when set, Done waits for it

	mu      sync.Mutex
	checked []string
	done    map[string]string // id -> outcome
	results map[string]string // id -> MCPResultText of the result Done got
}

func (g *fakeGate) Check(_ context.Context, c harness.ToolCall) harness.Verdict {
	time.Sleep(g.delay)
	if c.Name == "hold" {
		<-g.release
	}
	g.mu.Lock()
	g.checked = append(g.checked, c.Name)
	g.mu.Unlock()
	if strings.HasPrefix(c.Name, "deny") {
		return harness.Verdict{Refusal: "refused " + c.Name}
	}
	return harness.Verdict{Allow: true, Ref: "grant-" + c.IDKey()}
}

func (g *fakeGate) Done(_ context.Context, c harness.ToolCall, ref any, outcome string, result json.RawMessage) {
	if g.doneGo != nil {
		<-g.doneGo
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ref != "grant-"+c.IDKey() {
		panic(fmt.Sprintf("ref %v for %s", ref, c.IDKey()))
	}
	g.done[c.IDKey()] = outcome
	if g.results == nil {
		g.results = map[string]string{}
	}
	g.results[c.IDKey()] = string(harness.MCPResultText(result, harness.MaxSourceContent))
}

func (g *fakeGate) outcomes() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for k, v := range g.done {
		out[k] = v
	}
	return out
}

// fakeServer is an in-memory MCP server: it answers each request in its
// own goroutine (so answers come out of order), echoes tools/call
// arguments.text, fails "fail" (isError) and "rpcerror" (JSON-RPC error),
// sleeps arguments.ms first, answers "size" with the size of its params,
// echoes notifications back, and records every method it received.
type fakeServer struct {
	mu       sync.Mutex
	received []string
	out      *json.Encoder
	outMu    sync.Mutex
	wg       sync.WaitGroup
}

func (s *fakeServer) serve(in io.Reader, out io.WriteCloser) {
	s.out = json.NewEncoder(out)
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			s.handle(line)
		}
		if err != nil {
			break
		}
	}
	s.wg.Wait()
	out.Close()
}

func (s *fakeServer) send(v any) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	_ = s.out.Encode(v)
}

func (s *fakeServer) handle(line []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
				MS   int    `json:"ms"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		s.send(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "server parse error"}})
		return
	}
	s.mu.Lock()
	name := msg.Method
	if msg.Method == "tools/call" {
		name += ":" + msg.Params.Name
	}
	s.received = append(s.received, name)
	s.mu.Unlock()
	if msg.ID == nil {
		if msg.Method == "notifications/ping" {
			s.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/pong"})
		}
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		time.Sleep(time.Duration(msg.Params.Arguments.MS) * time.Millisecond)
		resp := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		switch {
		case msg.Method == "size":
			resp["result"] = map[string]any{"bytes": len(line)}
		case msg.Method != "tools/call":
			resp["result"] = map[string]any{}
		case msg.Params.Name == "fail":
			resp["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "boom"}}, "isError": true}
		case msg.Params.Name == "rpcerror":
			resp["error"] = map[string]any{"code": -32602, "message": "bad arguments"}
		default:
			resp["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": msg.Params.Arguments.Text}}}
		}
		s.send(resp)
	}()
}

func (s *fakeServer) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.received...)
}

// proxyRig wires client <-> Proxy <-> fakeServer through pipes.
type proxyRig struct {
	t      *testing.T
	gate   *fakeGate
	server *fakeServer
	in     *io.PipeWriter // client -> proxy
	out    *bufio.Reader  // proxy -> client
	done   chan error
	resps  map[string]map[string]any
}

func newRig(t *testing.T, gate *fakeGate) *proxyRig {
	t.Helper()
	gate.done = map[string]string{}
	cr, cw := io.Pipe() // client writes requests
	pr, pw := io.Pipe() // proxy writes to the client
	sr, sw := io.Pipe() // proxy writes to the server
	ur, uw := io.Pipe() // server writes to the proxy
	srv := &fakeServer{}
	go srv.serve(sr, uw)
	rig := &proxyRig{t: t, gate: gate, server: srv, in: cw, out: bufio.NewReaderSize(pr, 1<<20), done: make(chan error, 1), resps: map[string]map[string]any{}}
	p := &harness.Proxy{Gate: gate, MaxLine: 2 << 20, Logf: t.Logf}
	go func() {
		rig.done <- p.Run(context.Background(), cr, pw, ur, sw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cw.Close()
		select {
		case <-rig.done:
		case <-time.After(5 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return rig
}

func (r *proxyRig) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// read returns the next message the client receives.
func (r *proxyRig) read() map[string]any {
	r.t.Helper()
	type res struct {
		line []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		l, err := r.out.ReadBytes('\n')
		ch <- res{l, err}
	}()
	select {
	case x := <-ch:
		if x.err != nil {
			r.t.Fatalf("reading the client side: %v", x.err)
		}
		var m map[string]any
		if err := json.Unmarshal(x.line, &m); err != nil {
			r.t.Fatalf("client got a line that is not JSON (framing broken?): %v: %.200s", err, x.line)
		}
		return m
	case <-time.After(10 * time.Second):
		r.t.Fatal("no message for the client")
		return nil
	}
}

// response returns (and consumes) the response to id, keeping others
// read on the way.
func (r *proxyRig) response(id string) map[string]any {
	r.t.Helper()
	for {
		if m, ok := r.resps[id]; ok {
			delete(r.resps, id)
			return m
		}
		m := r.read()
		b, _ := json.Marshal(m["id"])
		r.resps[string(b)] = m
	}
}

func resultText(t *testing.T, m map[string]any) (string, bool) {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", m)
	}
	isErr, _ := res["isError"].(bool)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return "", isErr
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text, isErr
}

func TestProxyPassesThroughAndGatesToolCalls(t *testing.T) {
	gate := &fakeGate{}
	rig := newRig(t, gate)
	rig.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)
	if m := rig.response("0"); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	rig.send(`{"jsonrpc":"2.0","method":"notifications/ping"}`)
	if m := rig.read(); m["method"] != "notifications/pong" {
		t.Fatalf("notification round trip: %v", m)
	}
	rig.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if text, isErr := resultText(t, rig.response("1")); text != "hi" || isErr {
		t.Fatalf("echo: %q %v", text, isErr)
	}
	rig.send(`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"deny_rm","arguments":{"path":"/"}}}`)
	m := rig.response(`"two"`)
	if text, isErr := resultText(t, m); text != "refused deny_rm" || !isErr || m["error"] != nil {
		t.Fatalf("refusal must be an isError result: %v", m)
	}
	rig.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fail"}}`)
	if _, isErr := resultText(t, rig.response("3")); !isErr {
		t.Fatal("fail should be isError")
	}
	rig.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"rpcerror","arguments":null}}`)
	if m := rig.response("4"); m["error"] == nil {
		t.Fatalf("rpcerror: %v", m)
	}
	rig.send(`{"jsonrpc":"2.0","id":5,"method":"size"}`)
	rig.response("5") // everything before it has reached the server
	for _, name := range rig.server.got() {
		if strings.Contains(name, "deny") {
			t.Fatalf("a refused call reached the server: %v", rig.server.got())
		}
	}
	testWait(t, func() bool { return len(gate.outcomes()) == 3 })
	want := map[string]string{"1": grants.OutcomeConfirmed, "3": grants.OutcomeFailed, "4": grants.OutcomeFailed}
	if got := gate.outcomes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	// The Gate gets what a confirmed call brought into the session, and
	// nothing for a failed one.
	gate.mu.Lock()
	results := fmt.Sprint(gate.results)
	gate.mu.Unlock()
	if results != "map[1:hi 3: 4:]" {
		t.Fatalf("results the gate saw: %s", results)
	}
}

// TestProxyDeliversAResultAfterItsReport: the answer to a forwarded call
// reaches the client only once the Gate has seen it (and registered what
// it brought in), as a harness runs the model on only after its
// PostToolUse hook; other messages are not held meanwhile.
func TestProxyDeliversAResultAfterItsReport(t *testing.T) {
	gate := &fakeGate{doneGo: make(chan struct{})}
	rig := newRig(t, gate)
	rig.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	rig.send(`{"jsonrpc":"2.0","id":2,"method":"size"}`)
	if m := rig.read(); fmt.Sprint(m["id"]) != "2" {
		t.Fatalf("first message the client got: %v (the call's answer came before its report)", m)
	}
	if len(gate.outcomes()) != 0 {
		t.Fatal("reported before release")
	}
	close(gate.doneGo)
	if text, _ := resultText(t, rig.response("1")); text != "hi" {
		t.Fatalf("echo: %q", text)
	}
	if got := gate.outcomes()["1"]; got != grants.OutcomeConfirmed {
		t.Fatalf("outcome %q", got)
	}
}

// TestMCPResultText: the text of a tools/call result is its text content,
// embedded resources' text and structuredContent leaves; an error result
// brings nothing; the text is bounded.
func TestMCPResultText(t *testing.T) {
	cases := []struct{ result, want string }{
		{`{"content":[{"type":"text","text":"Invoice 17: pay 98.70 EUR"}]}`, "Invoice 17: pay 98.70 EUR"},
		{`{"content":[{"type":"text","text":"a"},{"type":"image","data":"AAAA"},{"type":"resource","resource":{"uri":"file:///x","text":"b"}}]}`, "a\nb"},
		{`{"content":[],"structuredContent":{"iban":"DE89 3704","amount":98.7}}`, "DE89 3704\n98.7"},
		{`{"content":[{"type":"text","text":"secret"}],"isError":true}`, ""},
		{`null`, ""},
		{`"text"`, ""},
	}
	for _, tc := range cases {
		if got := string(harness.MCPResultText(json.RawMessage(tc.result), 1<<20)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.result, got, tc.want)
		}
	}
	if got := harness.MCPResultText(json.RawMessage(`{"content":[{"type":"text","text":"héllo world"}]}`), 2); string(got) != "h" {
		t.Errorf("bounded: %q", got)
	}
}

func TestProxyFailsClosedOnOddInput(t *testing.T) {
	gate := &fakeGate{}
	rig := newRig(t, gate)
	// Not JSON: a parse error from the proxy; nothing forwarded.
	rig.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call",}`)
	if m := rig.response("null"); m["error"].(map[string]any)["code"] != float64(-32700) {
		t.Fatalf("parse error: %v", m)
	}
	// A differently cased second method key: the server would read
	// "method" (tools/call); so does the proxy.
	rig.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","Method":"tools/list","params":{"name":"deny_x"}}`)
	if _, isErr := resultText(t, rig.response("2")); !isErr {
		t.Fatal("case trick got through")
	}
	// A tools/call notification is never run.
	rig.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	rig.send(`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}`)
	// Bad params: refused by the proxy itself.
	rig.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":"rm -rf /"}}`)
	if text, isErr := resultText(t, rig.response("3")); !isErr || !strings.Contains(text, "arguments") {
		t.Fatalf("bad arguments: %q", text)
	}
	rig.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{}}`)
	if _, isErr := resultText(t, rig.response("4")); !isErr {
		t.Fatal("missing name forwarded")
	}
	// A batch with a tools/call is split and each call decided.
	rig.send(`[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"deny_b"}},{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"six"}}},{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
	if _, isErr := resultText(t, rig.response("5")); !isErr {
		t.Fatal("batched refusal")
	}
	if text, _ := resultText(t, rig.response("6")); text != "six" {
		t.Fatalf("batched echo %q", text)
	}
	rig.response("7")
	// A line over MaxLine is not forwarded.
	rig.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 3<<20) + `"}}}`)
	if m := rig.response("null"); m["error"] == nil {
		t.Fatalf("oversized line: %v", m)
	}
	rig.send(`{"jsonrpc":"2.0","id":9,"method":"size"}`)
	rig.response("9")
	got := rig.server.got()
	echoes := 0
	for _, name := range got {
		if strings.Contains(name, "deny") || name == "tools/list" {
			t.Fatalf("server received %q: %v", name, got)
		}
		if name == "tools/call:echo" {
			echoes++
		}
	}
	if echoes != 1 { // only id 6
		t.Fatalf("server received %d echo calls: %v", echoes, got)
	}
}

func TestProxyLargeAndConcurrentMessages(t *testing.T) {
	gate := &fakeGate{delay: 20 * time.Millisecond}
	rig := newRig(t, gate)
	big := strings.Repeat("ab", 512<<10) // 1 MiB
	// 1 MiB result through a permitted call, and 1 MiB request passed
	// through untouched.
	rig.send(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"text":"` + big + `"}}}`)
	rig.send(`{"jsonrpc":"2.0","id":"bigsize","method":"size","params":{"pad":"` + big + `"}}`)
	// Concurrent calls: later ones answer first (the server sleeps
	// less), and none waits for another's decision.
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := "echo"
			if i%5 == 0 {
				name = "deny_w"
			}
			rig.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"text":"r%d","ms":%d}}}`, 100+i, name, i, (n-i)*2))
		}(i)
	}
	wg.Wait()
	if text, _ := resultText(t, rig.response(`"big"`)); text != big {
		t.Fatalf("1 MiB result came back as %d bytes", len(text))
	}
	if m := rig.response(`"bigsize"`); m["result"].(map[string]any)["bytes"].(float64) < float64(len(big)) {
		t.Fatalf("1 MiB request arrived short: %v", m["result"])
	}
	for i := 0; i < n; i++ {
		text, isErr := resultText(t, rig.response(fmt.Sprint(100+i)))
		if i%5 == 0 {
			if !isErr || text != "refused deny_w" {
				t.Fatalf("%d: %q %v", i, text, isErr)
			}
		} else if isErr || text != fmt.Sprintf("r%d", i) {
			t.Fatalf("%d: %q %v", i, text, isErr)
		}
	}
}

// A call whose decision is pending holds up nothing else.
func TestProxyDecisionsDoNotWaitForEachOther(t *testing.T) {
	gate := &fakeGate{release: make(chan struct{})}
	rig := newRig(t, gate)
	rig.send(`{"jsonrpc":"2.0","id":"held","method":"tools/call","params":{"name":"hold","arguments":{"text":"late"}}}`)
	rig.send(`{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"echo","arguments":{"text":"early"}}}`)
	rig.send(`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	if text, _ := resultText(t, rig.response(`"next"`)); text != "early" {
		t.Fatalf("next: %q", text)
	}
	rig.response(`"list"`)
	close(gate.release)
	if text, _ := resultText(t, rig.response(`"held"`)); text != "late" {
		t.Fatalf("held: %q", text)
	}
}

func TestProxyHoldsCancellationUntilTheCallIsForwarded(t *testing.T) {
	gate := &fakeGate{delay: 100 * time.Millisecond}
	rig := newRig(t, gate)
	rig.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","ms":50}}}`)
	rig.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}`)
	rig.response("1")
	got := rig.server.got()
	if len(got) != 2 || got[0] != "tools/call:echo" || got[1] != "notifications/cancelled" {
		t.Fatalf("server saw %v; the cancellation must follow the request", got)
	}
}

func TestProxyReportsUnansweredCallsUnknown(t *testing.T) {
	gate := &fakeGate{done: map[string]string{}}
	cr, cw := io.Pipe()
	pr, pw := io.Pipe()
	sr, sw := io.Pipe()
	ur, uw := io.Pipe()
	go io.Copy(io.Discard, pr)
	done := make(chan error, 1)
	p := &harness.Proxy{Gate: gate}
	go func() { done <- p.Run(context.Background(), cr, pw, ur, sw) }()
	go func() {
		// The server reads one request and dies without answering.
		r := bufio.NewReader(sr)
		_, _ = r.ReadBytes('\n')
		uw.Close()
		_, _ = io.Copy(io.Discard, sr)
	}()
	_, _ = io.WriteString(cw, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`+"\n")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not end with the server")
	}
	cw.Close()
	pw.Close()
	if got := gate.outcomes(); got["1"] != grants.OutcomeUnknown {
		t.Fatalf("outcomes %v", got)
	}
}

func testWait(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
