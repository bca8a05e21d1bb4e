package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/telemetry"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestServeMetricsListen: --metrics-listen serves the node's metrics on
// the given address, raft's stage timers among them (the entries a
// starting leader commits pass through its append and the commit), only bounded label values, and without the flag nothing
// listens there.
func TestServeMetricsListen(t *testing.T) {
	cleanEnv(t)
	natsPort, metricsPort := freePort(t), freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	addr := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	s := serveInProcess(t, "--dev", "--data-dir", t.TempDir(), "--nats-port", fmt.Sprint(natsPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--metrics-listen", addr)
	s.waitReady(t, url)
	var body string
	testenv.WaitFor(t, 10*time.Second, "the raft state on /metrics", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `writ_issuer_raft_state{node="dev",state="Leader"} 1`) &&
			raftStageSeen(body, telemetry.StageLeaderAppend) && raftStageSeen(body, telemetry.StageCommit)
	})
	if _, err := telemetry.CheckExposition(body, map[string]map[string]bool{"node": {"dev": true}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"writ_issuer_outbox_depth", "writ_issuer_stream_lag", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Error("the metrics listener outlived serve")
	}
}

// raftStageSeen reports whether a scrape counts at least one sample of a
// raft stage.
func raftStageSeen(body, stage string) bool {
	prefix := `writ_raft_stage_seconds_count{node="dev",stage="` + stage + `"} `
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v != "0"
		}
	}
	return false
}
