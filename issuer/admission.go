package issuer

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Admission control for refused requests.
//
// Every request the state machine refuses is a raft entry and a receipt,
// so a worker sending well-formed requests that are refused could grow the
// log and the receipt stream without bound. The leader keeps, per worker,
// a token bucket of refusals (Config.RefusalRate per second, up to
// Config.RefusalBurst): every refusal the state machine answers takes a
// token, and a request arriving while its worker's bucket is empty is not
// proposed. It is answered at once, deny rate_limited with recovery
// retry_later, and counted; once per Config.RefusalWindow the leader
// proposes one OpRefusalSummary per worker and request kind carrying the
// count and the window, so the evidence survives as counts. A worker
// flooding refusals therefore costs at most its burst, its rate, the
// requests it had in flight when its bucket ran out (at most MaxInFlight)
// and one summary per window, whatever it sends.
//
// The decision is made before the state machine sees the request, so it
// cannot depend on what the state machine would answer: it depends only on
// what the worker's recent requests were answered. A worker whose requests
// are permitted never spends a token and is never throttled; a throttled
// request is always a refusal (fail closed), never a permit.
//
// The buckets and the counts not yet proposed are the leader's alone, not
// replicated. That is safe: they never decide a permit, only whether a
// request is decided at all, and a new leader starts with full buckets, so
// a failover at most lets a flooding worker spend one more burst. Counts
// not yet committed when leadership is lost, or whose summary's commit is
// not confirmed, are lost (never counted twice); the requests they count
// were refused and nothing was granted for them.
//
// Summaries are a receipt kind earlier builds do not know, so admission is
// on only while the cluster's receipt format level is 3 or above
// (fsm.ReceiptFormatSummaries); below it every request is proposed as
// before.
type admission struct {
	rate  float64 // tokens per second
	burst float64
	on    atomic.Bool // the receipt format level writes summaries

	mu      sync.Mutex
	buckets map[string]*bucket
	pending map[tallyKey]*tally
}

// bucket is one worker's refusal tokens as of last. Only a worker with a
// refusal in the last burst/rate seconds has one.
type bucket struct {
	tokens float64
	last   time.Time
}

// tallyKey names one summary: a worker and which of its requests (api.Op).
type tallyKey struct{ worker, op string }

// tally counts the requests of one summary: n of them, the first at since
// and the last at until (unix ns).
type tally struct {
	n            uint64
	since, until int64
}

func newAdmission(rate float64, burst int) *admission {
	return &admission{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}, pending: map[tallyKey]*tally{}}
}

// refill adds the tokens earned since b.last, up to the burst.
func (a *admission) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(a.burst, b.tokens+d.Seconds()*a.rate)
		b.last = now
	}
}

// admit reports whether worker's request of kind op may be proposed at
// now. A request that may not is counted towards the next summary.
func (a *admission) admit(worker, op string, now time.Time) bool {
	if !a.on.Load() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.buckets[worker]
	if b == nil {
		return true
	}
	a.refill(b, now)
	if b.tokens >= 1 {
		return true
	}
	k := tallyKey{worker, op}
	t := a.pending[k]
	if t == nil {
		t = &tally{since: now.UnixNano()}
		a.pending[k] = t
	}
	t.n++
	t.until = max(t.until, now.UnixNano())
	return false
}

// refused takes a token from worker's bucket for a refusal the state
// machine answered at now. Requests already in flight when the bucket
// runs out may take it below zero (down to -burst): the debt holds the
// worker off for longer.
func (a *admission) refused(worker string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.buckets[worker]
	if b == nil {
		b = &bucket{tokens: a.burst, last: now}
		a.buckets[worker] = b
	}
	a.refill(b, now)
	b.tokens = max(b.tokens-1, -a.burst)
}

// summary is one refusal summary to propose.
type summary struct {
	tallyKey
	tally
}

// drain removes and returns the counts gathered so far (sorted, so that
// summaries are proposed in a stable order), and forgets the buckets that
// are full again: memory is bounded by the workers refused recently.
func (a *admission) drain(now time.Time) []summary {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]summary, 0, len(a.pending))
	for k, t := range a.pending {
		out = append(out, summary{k, *t})
	}
	clear(a.pending)
	for w, b := range a.buckets {
		if a.refill(b, now); b.tokens >= a.burst {
			delete(a.buckets, w)
		}
	}
	slices.SortFunc(out, func(x, y summary) int {
		if c := strings.Compare(x.worker, y.worker); c != 0 {
			return c
		}
		return strings.Compare(x.op, y.op)
	})
	return out
}

// throttled is the answer to a request admission control did not propose.
func throttled() grants.Envelope {
	return grants.Refuse(grants.ReasonRateLimited, "admission",
		"this worker's requests were refused faster than its admission rate allows: "+grants.KeptUndecided+"; the request is counted in a refusal summary; retry later")
}

// summaryLoop runs while this node leads and admission control is
// configured: every window it turns admission on or off with the receipt
// format level and proposes the counts gathered.
func (s *Service) summaryLoop(ctx context.Context, a *admission) {
	tick := time.NewTicker(s.cfg.RefusalWindow)
	defer tick.Stop()
	for {
		var on bool
		s.node.View(func(st *fsm.State, _ uint64) { on = st.WritesSummaries() })
		a.on.Store(on)
		if !s.proposeSummaries(ctx, a) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// proposeSummaries proposes one summary per count gathered. It reports
// false once this node no longer leads.
func (s *Service) proposeSummaries(ctx context.Context, a *admission) bool {
	for _, sm := range a.drain(time.Now()) {
		if ctx.Err() != nil {
			return false
		}
		env, err := s.node.ProposeWithin(s.cfg.CommitTimeout, fsm.Command{Op: fsm.OpRefusalSummary,
			Caller: "issuer:" + s.node.ID(), Key: sm.worker, Tool: sm.op, Amount: sm.n, Since: sm.since, Until: sm.until})
		switch {
		case err != nil && isLeaderErr(err):
			return false
		case err != nil:
			// Not confirmed committed: it may still commit, so the count
			// is not proposed again (it would count twice).
			s.log.Warn("refusal summary: not confirmed committed", "worker", sm.worker, "count", sm.n, "err", err)
		case env.Decision != grants.Deny || env.Reason != grants.ReasonRateLimited:
			// Refused (the level is below 3): nothing more to record.
			s.log.Warn("refusal summary refused", "worker", sm.worker, "count", sm.n, "reason", env.Reason, "detail", env.Detail)
		}
	}
	return true
}
