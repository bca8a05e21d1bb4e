package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// inProcessServe runs `issuer serve` in this process until the test ends.
type inProcessServe struct {
	stdout, stderr *syncBuffer
	done           chan error
	cancel         context.CancelFunc
}

func serveInProcess(t *testing.T, args ...string) *inProcessServe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &inProcessServe{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() { s.done <- run(ctx, append([]string{"serve"}, args...), s.stdout, s.stderr) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the node and waits for serve to return.
func (s *inProcessServe) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30s after cancel\nstderr:\n%s", s.stderr)
	}
	return nil
}

// waitReady polls status until the node leads with a policy applied.
func (s *inProcessServe) waitReady(t *testing.T, url string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, "the in-process issuer to lead", func() bool {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve returned before it was ready: %v\nstderr:\n%s", err, s.stderr)
		default:
		}
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if run(ctx, []string{"status", "--json", "--nats-url", url, "--timeout", "1s"}, &out, &errb) != nil {
			return false
		}
		var st api.Status
		return json.Unmarshal(out.Bytes(), &st) == nil && st.Leader != "" && st.Epoch >= 1
	})
}

// TestServeDataDirLocked: a second serve on a data dir a running node
// holds fails at once, names the data dir, and opens nothing: its NATS
// port never listens. JSON logging carries raft's own lines through slog,
// and the dev banner's commands name the non-default NATS URL.
func TestServeDataDirLocked(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	natsPort := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	first := serveInProcess(t, "--dev", "--data-dir", dir, "--nats-port", fmt.Sprint(natsPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--log-level", "debug", "--log-format", "json")
	first.waitReady(t, url)

	port2 := freePort(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	start := time.Now()
	err := run(ctx, []string{"serve", "--dev", "--data-dir", dir, "--nats-port", fmt.Sprint(port2),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t))}, &out, &errb)
	cancel()
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second serve on %s: err %v, want one naming the data dir as in use\nstderr:\n%s", dir, err, errb.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("second serve took %s to refuse", took)
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port2), time.Second); err == nil {
		c.Close()
		t.Errorf("second serve left NATS listening on %d", port2)
	}
	if out.Len() != 0 {
		t.Errorf("second serve printed a banner:\n%s", out.String())
	}
	// The first node is untouched.
	if st, _ := statusJSON(t, url); st.Leader == "" {
		t.Fatalf("first node lost its leader: %+v", st)
	}

	banner := first.stdout.String()
	for _, cmd := range []string{"issuer status --nats-url " + url, "auditor verify --nats-url " + url, "worker-agent request --nats-url " + url} {
		if !strings.Contains(banner, cmd) {
			t.Errorf("dev banner lacks %q:\n%s", cmd, banner)
		}
	}
	if err := first.stop(t); err != nil {
		t.Fatalf("first serve: %v", err)
	}
	raftLines := 0
	sc := bufio.NewScanner(strings.NewReader(first.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("--log-format json printed a line that is not JSON: %q", sc.Text())
		}
		if l, _ := line["logger"].(string); strings.HasPrefix(l, "raft") {
			raftLines++
			if line["node"] != "dev" || line["msg"] == nil || line["level"] == nil {
				t.Errorf("raft line lacks node, msg or level: %s", sc.Text())
			}
		}
	}
	if raftLines == 0 {
		t.Fatalf("no raft line came out through slog:\n%s", first.stderr)
	}
}

// TestServeLogFormatUsage: an unknown --log-format is a usage error.
func TestServeLogFormatUsage(t *testing.T) {
	cleanEnv(t)
	if r := runCLI(t, "serve", "--dev", "--data-dir", t.TempDir(), "--log-format", "xml"); r.code != exitUsage || !strings.Contains(r.stderr, "--log-format") {
		t.Fatalf("--log-format xml: %s", r)
	}
}
