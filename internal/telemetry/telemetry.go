// Package telemetry defines writ's Prometheus metrics, for the issuer
// (issuer serve --metrics-listen) and the auditor (auditor serve).
//
// Every label takes its value from a small fixed set, so that a metric's
// series stay few whatever the fleet does: a lane is one of the built-in
// lanes or "other", a consequence one of the policy's classes, a reason
// one of grants.Reasons, and so on (Allowed lists every set). Worker ids,
// grant ids, recipients, targets, tokens, tool and artifact names never
// become label values: the sanitizers below map anything outside a set to
// "other" (or "none" when empty).
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/lanes"
	"github.com/writ-dev/writ/policy"
)

// Label values outside a fixed set, and for an empty value.
const (
	Other = "other"
	None  = "none"
)

// Operator request operations (the worker API's are api.OpGrant, ...).
const (
	OpRevoke     = "revoke"
	OpReinstate  = "reinstate"
	OpPolicy     = "policy"
	OpApprove    = "approve"
	OpBreakGlass = "breakglass"
	OpRespawn    = "respawn"
	OpLift       = "lift"
)

// Ops are the request operations: the worker API's and the operator's.
var Ops = []string{api.OpGrant, api.OpSpend, api.OpEffect, api.OpSource, api.OpReview, api.OpRoute,
	api.OpSpawn, api.OpRestore, api.OpGrantSpend, api.OpEffectSource,
	OpRevoke, OpReinstate, OpPolicy, OpApprove, OpBreakGlass, OpRespawn, OpLift}

// Decisions.
var Decisions = []string{string(grants.Permit), string(grants.Deny), string(grants.ApprovalRequired)}

// Outcomes of effect reports.
var Outcomes = []string{grants.OutcomeConfirmed, grants.OutcomeFailed, grants.OutcomeUnknown, grants.OutcomeContested}

// RaftStates are hashicorp/raft's state names.
var RaftStates = []string{"Follower", "Candidate", "Leader", "Shutdown"}

func set(vals ...[]string) map[string]bool {
	m := map[string]bool{Other: true, None: true}
	for _, vs := range vals {
		for _, v := range vs {
			m[v] = true
		}
	}
	return m
}

func reasonCodes() []string {
	out := make([]string, 0, len(grants.Reasons))
	for _, r := range grants.Reasons {
		out = append(out, string(r.Reason))
	}
	return out
}

func kindNames() []string {
	var out []string
	for k := events.Kind(1); k < 64; k++ {
		if k.Known() {
			out = append(out, k.String())
		}
	}
	return out
}

var (
	laneSet        = set(lanes.Builtin)
	consequenceSet = set(policy.Consequences)
	reasonSet      = set(reasonCodes())
	decisionSet    = set(Decisions)
	opSet          = set(Ops)
	outcomeSet     = set(Outcomes)
	kindSet        = set(kindNames())
	raftSet        = set(RaftStates)
)

func pick(m map[string]bool, v string) string {
	switch {
	case v == "":
		return None
	case m[v]:
		return v
	}
	return Other
}

// Lane maps a lane to its label value: a built-in lane, else "other".
func Lane(v string) string { return pick(laneSet, v) }

// Consequence maps a consequence class to its label value.
func Consequence(v string) string { return pick(consequenceSet, v) }

// Reason maps a refusal reason to its label value.
func Reason(v string) string { return pick(reasonSet, v) }

// Decision maps a decision to its label value.
func Decision(v string) string { return pick(decisionSet, v) }

// Op maps a request operation to its label value.
func Op(v string) string { return pick(opSet, v) }

// Outcome maps an effect outcome to its label value.
func Outcome(v string) string { return pick(outcomeSet, v) }

// Kind maps a receipt kind to its label value.
func Kind(k events.Kind) string { return pick(kindSet, k.String()) }

// Allowed is every label's set of values, except node (the cluster's
// node ids) and code (audit.Codes), which the callers bound. A test that
// scrapes /metrics checks every label value against it.
func Allowed() map[string]map[string]bool {
	return map[string]map[string]bool{
		"lane": laneSet, "consequence": consequenceSet, "reason": reasonSet,
		"decision": decisionSet, "op": opSet, "outcome": outcomeSet, "kind": kindSet,
		"state": raftSet, "stage": stageSet,
	}
}

// Handler serves a registry's metrics in the Prometheus text format.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// latencyBuckets span a local commit (sub-millisecond) to a stalled one
// (seconds).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Issuer is one issuer node's metrics.
type Issuer struct {
	requests  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	commit    *prometheus.HistogramVec
	spend     prometheus.Observer
}

// IssuerGauges read the node's live values when scraped.
type IssuerGauges struct {
	// RaftState is hashicorp/raft's state name.
	RaftState func() string
	// Outbox is the number of receipts committed and not yet confirmed
	// published.
	Outbox func() float64
	// StreamLag is the state machine's last receipt sequence minus the
	// last one known to be in the stream.
	StreamLag func() float64
}

// NewIssuer registers the issuer metrics of node on reg.
func NewIssuer(reg prometheus.Registerer, node string, g IssuerGauges) *Issuer {
	f := prometheusWith(reg, prometheus.Labels{"node": node})
	m := &Issuer{
		requests: f.counter("writ_issuer_requests_total", "API requests handled, by operation.", "op"),
		decisions: f.counter("writ_issuer_decisions_total",
			"Grant decisions committed, by decision, lane and consequence class.", "decision", "lane", "consequence"),
		refusals: f.counter("writ_issuer_refusals_total",
			"Requests refused (a deny answer of any operation), by operation and reason.", "op", "reason"),
		commit: f.histogram("writ_issuer_commit_seconds",
			"Time from proposing a command to its committed answer, by operation.", "op"),
	}
	m.spend = f.histogram("writ_issuer_spend_seconds",
		"Time to answer a spend request, parsing and commit included.").WithLabelValues()
	for _, st := range RaftStates {
		st := st
		f.gaugeFunc("writ_issuer_raft_state", "1 for the node's current raft state.", prometheus.Labels{"state": st}, func() float64 {
			if g.RaftState != nil && g.RaftState() == st {
				return 1
			}
			return 0
		})
	}
	if g.Outbox != nil {
		f.gaugeFunc("writ_issuer_outbox_depth", "Receipts committed and not yet confirmed published.", nil, g.Outbox)
	}
	if g.StreamLag != nil {
		f.gaugeFunc("writ_issuer_stream_lag", "Receipts committed but not yet known to be in the stream.", nil, g.StreamLag)
	}
	return m
}

// Request records one answered request: its operation, the answer's
// decision, reason, lane and consequence class, and the commit latency
// (0 when the request never reached the log).
func (m *Issuer) Request(op, decision, reason, lane, consequence string, commit time.Duration) {
	if m == nil {
		return
	}
	op = Op(op)
	m.requests.WithLabelValues(op).Inc()
	if op == api.OpGrant {
		m.decisions.WithLabelValues(Decision(decision), Lane(lane), Consequence(consequence)).Inc()
	}
	if decision == string(grants.Deny) || decision == string(grants.ApprovalRequired) {
		m.refusals.WithLabelValues(op, Reason(reason)).Inc()
	}
	if commit > 0 {
		m.commit.WithLabelValues(op).Observe(commit.Seconds())
	}
}

// Spend records the time to answer one spend request.
func (m *Issuer) Spend(d time.Duration) {
	if m != nil {
		m.spend.Observe(d.Seconds())
	}
}

// Auditor is the auditor's metrics.
type Auditor struct {
	receipts  *prometheus.CounterVec
	decisions *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	effects   *prometheus.CounterVec
	failures  *prometheus.CounterVec
	projSeq   prometheus.Gauge
	streamSeq prometheus.Gauge
	lag       prometheus.Gauge
}

// NewAuditor registers the auditor metrics on reg.
func NewAuditor(reg prometheus.Registerer) *Auditor {
	f := prometheusWith(reg, nil)
	return &Auditor{
		receipts: f.counter("writ_auditor_receipts_total", "Receipts projected, by kind.", "kind"),
		decisions: f.counter("writ_auditor_decisions_total",
			"Grant decisions seen in the stream, by decision, lane and consequence class.", "decision", "lane", "consequence"),
		refusals: f.counter("writ_auditor_refusals_total",
			"Refusals seen in the stream (deny, spend_refused, effect_refused, approval_required), by kind and reason.", "kind", "reason"),
		effects:  f.counter("writ_auditor_effects_total", "Effect receipts seen in the stream, by outcome.", "outcome"),
		failures: f.counter("writ_auditor_verification_failures_total", "Invariant violations found while projecting, by violation code.", "code"),
		projSeq:  f.gauge("writ_auditor_projection_seq", "Sequence of the last receipt committed to the projection."),
		streamSeq: f.gauge("writ_auditor_stream_last_seq",
			"The stream's last sequence, as last seen by the auditor."),
		lag: f.gauge("writ_auditor_projection_lag", "Receipts in the stream not yet committed to the projection."),
	}
}

// Receipt records one receipt projected.
func (m *Auditor) Receipt(e *events.Event) {
	if m == nil {
		return
	}
	m.receipts.WithLabelValues(Kind(e.Kind)).Inc()
	switch e.Kind {
	case events.KindPermit, events.KindDeny, events.KindApprovalRequired:
		if e.Channel == "" { // a source registration's refusal is no grant decision
			m.decisions.WithLabelValues(Decision(e.Decision), Lane(e.Lane), Consequence(e.Consequence)).Inc()
		}
	case events.KindEffect:
		m.effects.WithLabelValues(Outcome(e.Outcome)).Inc()
	}
	switch e.Kind {
	case events.KindDeny, events.KindSpendRefused, events.KindEffectRefused, events.KindApprovalRequired:
		m.refusals.WithLabelValues(Kind(e.Kind), Reason(e.Reason)).Inc()
	}
}

// VerificationFailure records a violation found, by its code (one of
// audit.Codes).
func (m *Auditor) VerificationFailure(code string) {
	if m != nil {
		m.failures.WithLabelValues(code).Inc()
	}
}

// Progress records the projection's committed sequence and the stream's
// last sequence.
func (m *Auditor) Progress(projected, streamLast uint64) {
	if m == nil {
		return
	}
	m.projSeq.Set(float64(projected))
	m.streamSeq.Set(float64(streamLast))
	lag := float64(0)
	if streamLast > projected {
		lag = float64(streamLast - projected)
	}
	m.lag.Set(lag)
}

// factory registers metrics with constant labels.
type factory struct {
	reg    prometheus.Registerer
	labels prometheus.Labels
}

func prometheusWith(reg prometheus.Registerer, labels prometheus.Labels) factory {
	return factory{reg: reg, labels: labels}
}

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: f.labels}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: f.labels, Buckets: latencyBuckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: f.labels})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeFunc(name, help string, extra prometheus.Labels, fn func() float64) {
	labels := prometheus.Labels{}
	for k, v := range f.labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, fn))
}
