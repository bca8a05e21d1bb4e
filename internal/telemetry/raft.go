package telemetry

import (
	"slices"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft stages: the timers hashicorp/raft reports through go-metrics that
// RaftStages keeps, each under one stage label value. A commit on the
// leader is leader_append (its own log write, before the entries go to
// the followers), then append_rpc (one AppendEntries round trip to a
// follower, whose handler writes the entries in follower_append); commit
// runs from the leader's append to the commit index passing the entry;
// fsm_apply is one entry (or one batch, for a batching state machine)
// applied to the state machine.
const (
	StageLeaderAppend   = "leader_append"
	StageAppendRPC      = "append_rpc"
	StageFollowerAppend = "follower_append"
	StageFollowerRPC    = "follower_rpc"
	StageCommit         = "commit"
	StageFSMEnqueue     = "fsm_enqueue"
	StageFSMApply       = "fsm_apply"
)

// Stages are the raft stage label values.
var Stages = []string{StageLeaderAppend, StageAppendRPC, StageFollowerAppend, StageFollowerRPC,
	StageCommit, StageFSMEnqueue, StageFSMApply}

var stageSet = set(Stages)

// raftTimers are hashicorp/raft's timer keys and their stages. Every
// other key raft reports is dropped, so the peer-named timers it also
// emits never become series.
var raftTimers = []struct {
	key   []string
	stage string
}{
	{[]string{"raft", "leader", "dispatchLog"}, StageLeaderAppend},
	{[]string{"raft", "replication", "appendEntries", "rpc"}, StageAppendRPC},
	{[]string{"raft", "rpc", "appendEntries", "storeLogs"}, StageFollowerAppend},
	{[]string{"raft", "rpc", "appendEntries"}, StageFollowerRPC},
	{[]string{"raft", "commitTime"}, StageCommit},
	{[]string{"raft", "fsm", "enqueue"}, StageFSMEnqueue},
	{[]string{"raft", "fsm", "applyBatch"}, StageFSMApply},
	{[]string{"raft", "fsm", "apply"}, StageFSMApply},
}

// stageBuckets reach below a millisecond: a local log write takes a
// tenth of one on a fast disk.
var stageBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// RaftStages is a go-metrics sink that turns the raft timers listed in
// raftTimers into one Prometheus histogram, writ_raft_stage_seconds{stage}.
// hashicorp/raft reports only to go-metrics' process-wide sink, so a
// process installs it with InstallRaftStages; gauges and counters are
// dropped (writ exports its own raft state).
type RaftStages struct {
	stages map[string]prometheus.Observer
}

var _ gometrics.MetricSink = (*RaftStages)(nil)

// raftTimerUnit is the go-metrics timer unit InstallRaftStages sets, and
// raftTimerSeconds the same unit in seconds.
const (
	raftTimerUnit    = time.Microsecond
	raftTimerSeconds = 1e-6
)

// NewRaftStages registers writ_raft_stage_seconds for node on reg.
func NewRaftStages(reg prometheus.Registerer, node string) *RaftStages {
	f := prometheusWith(reg, prometheus.Labels{"node": node})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "writ_raft_stage_seconds",
		Help:        "Time hashicorp/raft spent in one stage of replicating and applying entries, by stage.",
		ConstLabels: f.labels, Buckets: stageBuckets,
	}, []string{"stage"})
	f.reg.MustRegister(h)
	s := &RaftStages{stages: make(map[string]prometheus.Observer, len(Stages))}
	for _, st := range Stages {
		s.stages[st] = h.WithLabelValues(st)
	}
	return s
}

// InstallRaftStages makes s the process's go-metrics sink, with timers in
// microseconds and no host name, runtime poller or service prefix. It
// returns the call that puts the discarding sink back. Only a process
// with one raft node should install it: every node in the process would
// report into s.
func InstallRaftStages(s *RaftStages) (uninstall func(), err error) {
	if _, err := gometrics.NewGlobal(quietConfig(), s); err != nil {
		return nil, err
	}
	return func() { _, _ = gometrics.NewGlobal(quietConfig(), &gometrics.BlackholeSink{}) }, nil
}

// quietConfig is go-metrics' configuration for RaftStages: microsecond
// timers, no host name, no runtime poller, no service prefix.
func quietConfig() *gometrics.Config {
	cfg := gometrics.DefaultConfig("")
	cfg.HostName = ""
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableRuntimeMetrics = false
	cfg.TimerGranularity = raftTimerUnit
	return cfg
}

// sample records a timer raftTimers lists; it allocates nothing, since
// raft reports several timers per log entry.
func (s *RaftStages) sample(key []string, val float32) {
	if len(key) == 0 || key[0] != "raft" {
		return
	}
	for _, t := range raftTimers {
		if slices.Equal(key, t.key) {
			s.stages[t.stage].Observe(float64(val) * raftTimerSeconds)
			return
		}
	}
}

// AddSample records a timer sample in microseconds.
func (s *RaftStages) AddSample(key []string, val float32) { s.sample(key, val) }

// AddSampleWithLabels records a timer sample; its labels (raft's peer
// ids) are dropped.
func (s *RaftStages) AddSampleWithLabels(key []string, val float32, _ []gometrics.Label) {
	s.sample(key, val)
}

// SetGauge drops the gauge.
func (s *RaftStages) SetGauge([]string, float32) {}

// SetGaugeWithLabels drops the gauge.
func (s *RaftStages) SetGaugeWithLabels([]string, float32, []gometrics.Label) {}

// EmitKey drops the value.
func (s *RaftStages) EmitKey([]string, float32) {}

// IncrCounter drops the counter.
func (s *RaftStages) IncrCounter([]string, float32) {}

// IncrCounterWithLabels drops the counter.
func (s *RaftStages) IncrCounterWithLabels([]string, float32, []gometrics.Label) {}
