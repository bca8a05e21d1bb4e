package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// mcpClient drives a running `worker-agent mcp` over its stdio.
type mcpClient struct {
	t     *testing.T
	in    io.WriteCloser
	inMu  sync.Mutex
	mu    sync.Mutex
	resps map[string]map[string]any // by compact id
	notes []map[string]any          // messages without an id
	bad   []string                  // lines that were not JSON
	eof   bool
}

func (c *mcpClient) send(line string) {
	c.t.Helper()
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the proxy: %v", err)
	}
}

func (c *mcpClient) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m map[string]any
			c.mu.Lock()
			if json.Unmarshal(line, &m) != nil {
				c.bad = append(c.bad, string(line))
			} else if id, ok := m["id"]; ok {
				b, _ := json.Marshal(id)
				c.resps[string(b)] = m
			} else {
				c.notes = append(c.notes, m)
			}
			c.mu.Unlock()
		}
		if err != nil {
			c.mu.Lock()
			c.eof = true
			c.mu.Unlock()
			return
		}
	}
}

// wait returns the response to id (compact JSON, e.g. `2` or `"c-4"`).
func (c *mcpClient) wait(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if m, ok := c.resps[id]; ok {
			return m
		}
		if c.eof || time.Now().After(deadline) {
			c.t.Fatalf("no response to id %s (eof %v; bad lines %d)", id, c.eof, len(c.bad))
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		c.mu.Lock()
	}
}

func toolResult(t *testing.T, m map[string]any) (string, bool) {
	t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("not a result: %v", m)
	}
	isErr, _ := res["isError"].(bool)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return "", isErr
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text, isErr
}

// applyPolicy applies a policy document through the operator API.
func applyPolicy(t *testing.T, url string, doc string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := client.New(nc, "").SetPolicy(ctx, json.RawMessage(doc))
	if err != nil || env.Decision != grants.Permit {
		t.Fatalf("policy: %+v %v", env, err)
	}
}

func TestMCPProxyAgainstIssuer(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	// A lane for the proxied server: its tools, except rm.
	applyPolicy(t, env.URL, `{"version":2,"default_ttl":"1m","lanes":{
		"coordinator":{"surfaces":["*"],"consequences":["*"]},
		"mcptest":{"surfaces":["fake"],"consequences":["*"]}},
		"surfaces":[{"id":"fake","tools":["mcp__fake__*"],"operation":"call","consequence":"remote_query"}],
		"deny":[{"id":"no-rm","lanes":["mcptest"],"tools":["mcp__fake__rm"]}]}`)
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "w.json", map[string]any{"worker": "m1", "lane": "coordinator", "nats_url": env.URL})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := binRun{env: []string{envFakeMCP + "=1"}}.command(t, "mcp", "--config", cfg, "--lane", "mcptest", "--server", "fake", "--", self, "-test.run=^$")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &mcpClient{t: t, in: in, resps: map[string]map[string]any{}}
	readDone := make(chan struct{})
	go func() { c.read(out); close(readDone) }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			in.Close()
			_ = cmd.Wait()
		}
	})

	// The recorded session: initialize, a notification, tools/list, a
	// permitted call, a refused call, a call the server fails.
	for _, line := range strings.Split(strings.TrimSpace(string(fixture(t, "mcp/session.jsonl"))), "\n") {
		c.send(line)
	}
	if m := c.wait("0"); m["result"].(map[string]any)["serverInfo"].(map[string]any)["name"] != "fake" {
		t.Fatalf("initialize: %v", m)
	}
	if tools := c.wait("1")["result"].(map[string]any)["tools"].([]any); len(tools) != 4 {
		t.Fatalf("tools/list: %v", tools)
	}
	if text, isErr := toolResult(t, c.wait("2")); text != "hello from the model" || isErr {
		t.Fatalf("echo: %q %v", text, isErr)
	}
	refused := c.wait("3")
	text, isErr := toolResult(t, refused)
	if !isErr || refused["error"] != nil {
		t.Fatalf("a refusal must be an isError result, not a JSON-RPC error: %v", refused)
	}
	for _, s := range []string{"mcp__fake__rm", "denied_by_policy", "Recovery: none"} {
		if !strings.Contains(text, s) {
			t.Errorf("refusal text lacks %q: %s", s, text)
		}
	}
	if _, isErr := toolResult(t, c.wait(`"c-4"`)); !isErr {
		t.Fatal("fail: want the server's isError result")
	}

	// Notifications pass both ways.
	c.send(`{"jsonrpc":"2.0","method":"notifications/ping"}`)
	testenv.WaitFor(t, 10*time.Second, "the pong notification", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.notes {
			if n["method"] == "notifications/pong" {
				return true
			}
		}
		return false
	})

	// 1 MiB each way: a permitted call's result, and a request that is
	// not a tools/call.
	const mib = 1 << 20
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{"n":%d}}}`, mib))
	c.send(`{"jsonrpc":"2.0","id":"size","method":"size","params":{"pad":"` + strings.Repeat("y", mib) + `"}}`)
	// Concurrent calls from several writers, answered out of order.
	const n = 24
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"r%d","ms":%d}}}`, 1000+i, i, (n-i)*5))
		}(i)
	}
	wg.Wait()
	if text, isErr := toolResult(t, c.wait(`"big"`)); len(text) != mib || isErr {
		t.Fatalf("big result: %d bytes, isError %v", len(text), isErr)
	}
	if got := c.wait(`"size"`)["result"].(map[string]any)["bytes"].(float64); got < mib {
		t.Fatalf("the 1 MiB request reached the server as %v bytes", got)
	}
	for i := 0; i < n; i++ {
		if text, isErr := toolResult(t, c.wait(fmt.Sprint(1000+i))); text != fmt.Sprintf("r%d", i) || isErr {
			t.Fatalf("call %d: %q %v", i, text, isErr)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":"rcv","method":"received"}`)
	received := c.wait(`"rcv"`)["result"].(map[string]any)["tools"].([]any)
	for _, name := range received {
		if name == "rm" {
			t.Fatalf("the refused call reached the server: %v", received)
		}
	}
	if len(received) != 3+n { // echo, fail, big and the n echoes
		t.Fatalf("server received %d calls: %v", len(received), received)
	}
	c.mu.Lock()
	bad := c.bad
	c.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d lines the client could not parse (framing broken)", len(bad))
	}

	// Closing stdin ends the server and then the proxy, cleanly.
	in.Close()
	<-readDone
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("proxy exit: %v; stderr:\n%s", err, stderr.String())
	}

	// Receipts: each permitted call permit -> attempt -> effect reported
	// by the server's answer; the refused one a deny and nothing else.
	evs := receipts(t, env)
	byTool := map[string][]events.Event{}
	sources := map[string]int{} // tool -> results registered as sources
	for _, e := range evs {
		switch {
		case e.Worker != "m1" || e.Kind == events.KindEffect:
		case e.Kind == events.KindSource:
			sources[e.Tool]++
		default:
			byTool[e.Tool] = append(byTool[e.Tool], e)
		}
	}
	// Parity with the hooks: every confirmed result with text is a
	// registered source; a failed call brought nothing in.
	if sources["mcp__fake__big"] != 1 || sources["mcp__fake__echo"] == 0 || sources["mcp__fake__fail"] != 0 {
		t.Fatalf("results registered as sources, by tool: %v", sources)
	}
	if got := kinds(byTool["mcp__fake__rm"]); !reflect.DeepEqual(got, []events.Kind{events.KindDeny}) {
		t.Fatalf("rm receipts %v", got)
	}
	if e := byTool["mcp__fake__rm"][0]; e.Lane != "mcptest" || e.Reason != string(grants.ReasonDeniedByPolicy) || !reflect.DeepEqual(e.Rules, []string{"lane:mcptest", "surface:fake", "deny:no-rm"}) {
		t.Fatalf("rm deny %+v", e)
	}
	for tool, want := range map[string]struct {
		calls   int
		outcome string
	}{
		"mcp__fake__echo": {1 + n, grants.OutcomeConfirmed},
		"mcp__fake__fail": {1, grants.OutcomeFailed},
		"mcp__fake__big":  {1, grants.OutcomeConfirmed},
	} {
		var permits int
		for _, e := range byTool[tool] {
			if e.Kind != events.KindPermit {
				continue
			}
			permits++
			effs := effectsOf(evs, e.GrantID)
			if len(effs) != 1 || effs[0].Outcome != want.outcome || effs[0].Verifier != "mcp-server:fake" {
				t.Fatalf("%s grant %s effects %+v", tool, e.GrantID, effs)
			}
		}
		if got := kinds(byTool[tool]); permits != want.calls || len(got) != 2*want.calls {
			t.Fatalf("%s: %d permits, receipts %v", tool, permits, got)
		}
	}
}

func TestMCPProxyRefusesWhenTheIssuerIsDown(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "w.json", map[string]any{"worker": "m1", "lane": "coordinator", "nats_url": "nats://127.0.0.1:1"})
	self, _ := os.Executable()
	lines := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"received"}` + "\n"
	r := binRun{stdin: []byte(lines), env: []string{envFakeMCP + "=1"}}.run(t, "mcp", "--config", cfg, "--deadline", "1s", "--", self, "-test.run=^$")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	resps := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad line %q", l)
		}
		resps[fmt.Sprint(m["id"])] = m
	}
	if resps["1"]["result"] == nil {
		t.Fatalf("tools/list must pass through: %v", resps["1"])
	}
	text, isErr := toolResult(t, resps["2"])
	if !isErr || !strings.Contains(text, "cannot reach the writ issuer") {
		t.Fatalf("call with the issuer down: %q %v", text, isErr)
	}
	if got := resps["3"]["result"].(map[string]any)["tools"].([]any); len(got) != 0 {
		t.Fatalf("the server ran %v", got)
	}
}
