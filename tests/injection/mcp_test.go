package injection

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/harness"
)

// TestScenariosThroughMCP plays every scenario again with its MCP tool
// calls through the `worker-agent mcp` proxy in front of a scripted MCP
// server (prompts and everything else through the claude-code hook of the
// same session): the proxy traces arguments and registers results as the
// hook does, so each call gets the decision, reason and grounds it gets
// through the hook.
func TestScenariosThroughMCP(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runScenariosAs(t, files, doc, "mcp/", harness.MCP)
}

// mcpProxy is one `worker-agent mcp` run in front of the scripted server,
// driven as an MCP client.
type mcpProxy struct {
	server  string
	answers string // the scripted server's answer directory
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *syncBuffer
	nextID  int
}

// proxyFor returns the proxy a step's tool goes through in mcp mode
// (started on first use for the session), or nil when the step runs
// through the hook.
func (r *runner) proxyFor(t *testing.T, s step) *mcpProxy {
	t.Helper()
	if r.harness != harness.MCP || r.agent[0] != "" {
		return nil
	}
	rest, ok := strings.CutPrefix(s.a, "mcp__")
	server, tool, ok2 := strings.Cut(rest, "__")
	if !ok || !ok2 || server == "" || tool == "" {
		return nil
	}
	if p := r.proxies[server]; p != nil {
		return p
	}
	if r.proxies == nil {
		r.proxies = map[string]*mcpProxy{}
	}
	p := &mcpProxy{server: server, answers: t.TempDir(), stderr: &syncBuffer{}}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(r.bin, "--config", r.config, "mcp", "--server", server, "--session", r.session, "--", self)
	p.cmd.Dir = r.ws
	p.cmd.Env = append(cleanEnv(), "HOME="+r.home, "XDG_STATE_HOME="+filepath.Join(r.home, "state"), envFakeMCP+"="+p.answers)
	p.cmd.Stderr = p.stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewReaderSize(stdout, 1<<20)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.proxies[server] = p
	t.Cleanup(func() { p.close(t) })
	return p
}

// call sends one tools/call for the step's tool, the scripted server
// answering answer, and returns the text of the result the client got
// and whether it is an error.
func (p *mcpProxy) call(t *testing.T, r *runner, s step, answer string) (string, bool) {
	t.Helper()
	p.nextID++
	id := fmt.Sprint(p.nextID)
	if err := os.WriteFile(filepath.Join(p.answers, id), []byte(answer), 0o600); err != nil {
		t.Fatal(err)
	}
	_, tool, _ := strings.Cut(strings.TrimPrefix(s.a, "mcp__"), "__")
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.nextID, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": json.RawMessage(r.expand(s.b))}})
	if _, err := p.in.Write(append(req, '\n')); err != nil {
		t.Fatalf("%s: writing to the proxy: %v\n%s", r.where(s), err, p.stderr.String())
	}
	type line struct {
		b   []byte
		err error
	}
	for {
		ch := make(chan line, 1)
		go func() {
			b, err := p.out.ReadBytes('\n')
			ch <- line{b, err}
		}()
		var l line
		select {
		case l = <-ch:
		case <-time.After(stepTimeout):
			t.Fatalf("%s: no answer from the proxy in %v\n%s", r.where(s), stepTimeout, p.stderr.String())
		}
		if l.err != nil {
			t.Fatalf("%s: reading the proxy: %v\n%s", r.where(s), l.err, p.stderr.String())
		}
		var resp struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal(l.b, &resp) != nil || string(resp.ID) != id {
			continue
		}
		var text []string
		for _, c := range resp.Result.Content {
			text = append(text, c.Text)
		}
		return strings.Join(text, "\n"), resp.Result.IsError
	}
}

// close ends the proxy: closing its stdin ends the server and then it.
func (p *mcpProxy) close(t *testing.T) {
	if p.cmd == nil {
		return
	}
	_ = p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("worker-agent mcp --server %s: %v\n%s", p.server, err, p.stderr.String())
		}
	case <-time.After(stepTimeout):
		_ = p.cmd.Process.Kill()
		t.Errorf("worker-agent mcp --server %s did not exit\n%s", p.server, p.stderr.String())
	}
	p.cmd = nil
}

// closeProxies ends the current session's proxies.
func (r *runner) closeProxies(t *testing.T) {
	for _, p := range r.proxies {
		p.close(t)
	}
	r.proxies = nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeMCP is the scripted MCP server: it answers each tools/call with id
// N with the text of the file N in dir, and any other request with an
// empty result, until stdin ends.
func fakeMCP(dir string) {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	enc := json.NewEncoder(os.Stdout)
	for {
		b, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(b, &msg) == nil && msg.ID != nil {
				resp := map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": map[string]any{}}
				if msg.Method == "tools/call" {
					text, _ := os.ReadFile(filepath.Join(dir, filepath.Base(string(msg.ID))))
					resp["result"] = map[string]any{"content": []map[string]any{{"type": "text", "text": string(text)}}}
				}
				_ = enc.Encode(resp)
			}
		}
		if err != nil {
			return
		}
	}
}
