package main

import (
	"os"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// TestMCPProxyRepeatedCallID: a tools/call sent twice with the same
// JSON-RPC id through `worker-agent mcp`. Attack: the first was permitted
// and forwarded, so the repeat is refused (an isError result naming the
// replay) and never reaches the server: one permit, one run. Benign twin:
// a refused call sent again with its id is refused again for its own
// reason, and the same call under a new id runs.
func TestMCPProxyRepeatedCallID(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
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
	defer func() {
		in.Close()
		<-readDone
		_ = cmd.Wait()
	}()
	again := func(id, line string) (string, bool) {
		c.mu.Lock()
		delete(c.resps, id)
		c.mu.Unlock()
		c.send(line)
		return toolResult(t, c.wait(id))
	}

	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	c.wait("0")
	pay := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"once"}}}`
	if text, isErr := again("7", pay); text != "once" || isErr {
		t.Fatalf("first delivery: %q %v", text, isErr)
	}
	text, isErr := again("7", pay)
	if !isErr || !strings.Contains(text, "already permitted") || !strings.Contains(text, "not permitted twice") {
		t.Fatalf("repeated id: %q %v; want a refusal naming the replay", text, isErr)
	}

	rm := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"rm","arguments":{"path":"/x"}}}`
	for i := 0; i < 2; i++ {
		text, isErr := again("9", rm)
		if !isErr || !strings.Contains(text, "denied_by_policy") || strings.Contains(text, "already permitted") {
			t.Fatalf("refused call, delivery %d: %q %v", i+1, text, isErr)
		}
	}
	if text, isErr := again("8", strings.Replace(pay, `"id":7`, `"id":8`, 1)); text != "once" || isErr {
		t.Fatalf("the same call under a new id: %q %v", text, isErr)
	}

	c.send(`{"jsonrpc":"2.0","id":"rcv","method":"received"}`)
	var echoes int
	for _, name := range c.wait(`"rcv"`)["result"].(map[string]any)["tools"].([]any) {
		if name == "echo" {
			echoes++
		}
	}
	if echoes != 2 {
		t.Fatalf("the server ran echo %d times, want 2 (ids 7 and 8): stderr %s", echoes, stderr.String())
	}
	var permits int
	for _, e := range receipts(t, env) {
		if e.Worker == "m1" && e.Tool == "mcp__fake__echo" && e.Kind == events.KindPermit {
			permits++
		}
	}
	if permits != 2 {
		t.Fatalf("%d permits for echo, want 2", permits)
	}
}
