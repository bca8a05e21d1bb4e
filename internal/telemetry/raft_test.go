package telemetry

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRaftStagesKeepsListedTimers: raft's listed timers become one
// histogram series per stage, in seconds; every other key, raft's
// peer-named timers and its labels are dropped, so the exposition passes
// the label check.
func TestRaftStagesKeepsListedTimers(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewRaftStages(reg, "n1")
	m, err := gometrics.New(&gometrics.Config{TimerGranularity: raftTimerUnit, FilterDefault: true}, s)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-3 * time.Millisecond)
	m.MeasureSince([]string{"raft", "commitTime"}, start)
	m.MeasureSince([]string{"raft", "commitTime"}, start)
	m.MeasureSinceWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, start,
		[]gometrics.Label{{Name: "peer_id", Value: "worker-7"}})
	m.MeasureSince([]string{"raft", "replication", "appendEntries", "rpc", "worker-7"}, start)
	m.MeasureSince([]string{"raft", "fsm", "apply"}, start)
	m.MeasureSince([]string{"raft", "fsm", "applyBatch"}, start)
	m.MeasureSince([]string{"raft", "snapshot", "create"}, start)
	m.MeasureSince([]string{"other", "commitTime"}, start)
	m.IncrCounter([]string{"raft", "apply"}, 1)
	m.SetGauge([]string{"raft", "peers"}, 3)

	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	if _, err := CheckExposition(text, map[string]map[string]bool{"node": {"n1": true}}); err != nil {
		t.Fatal(err)
	}
	for stage, want := range map[string]string{StageCommit: "2", StageAppendRPC: "1", StageFSMApply: "2", StageLeaderAppend: "0"} {
		line := `writ_raft_stage_seconds_count{node="n1",stage="` + stage + `"} ` + want + "\n"
		if !strings.Contains(text, line) {
			t.Errorf("want %q in\n%s", line, text)
		}
	}
	if strings.Contains(text, "worker-7") || strings.Contains(text, "snapshot") {
		t.Fatalf("an unlisted timer or a peer id became a series:\n%s", text)
	}
	// Two 3 ms samples: the sum is in seconds, not microseconds.
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `writ_raft_stage_seconds_sum{node="n1",stage="commit"}`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil || v < 0.006 || v > 1 {
				t.Fatalf("commit sum %q: want about 0.006 s (%v)", line, err)
			}
			return
		}
	}
	t.Fatal("no commit sum")
}

// TestInstallRaftStages: once installed, the package-level go-metrics
// calls hashicorp/raft makes reach the sink; uninstalling stops them.
func TestInstallRaftStages(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewRaftStages(reg, "n1")
	uninstall, err := InstallRaftStages(s)
	if err != nil {
		t.Fatal(err)
	}
	gometrics.MeasureSince([]string{"raft", "fsm", "applyBatch"}, time.Now())
	uninstall()
	gometrics.MeasureSince([]string{"raft", "fsm", "applyBatch"}, time.Now())
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if line := `writ_raft_stage_seconds_count{node="n1",stage="fsm_apply"} 1` + "\n"; !strings.Contains(rec.Body.String(), line) {
		t.Fatalf("want %q in\n%s", line, rec.Body.String())
	}
}
