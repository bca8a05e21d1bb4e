package audit

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// t0 is the control-plane time of the first test event.
const t0 = int64(1_700_000_000_000_000_000)

const sec = int64(time.Second)

var (
	digestA = events.Sum([]byte("request A"))
	digestB = events.Sum([]byte("request B"))
)

// stream builds a receipt stream by hand with events.Chain.Append.
type stream struct {
	chain events.Chain
	raw   [][]byte
	evs   []events.Event
}

func (s *stream) add(e events.Event) *stream {
	s.raw = append(s.raw, s.chain.Append(&e, nil))
	s.evs = append(s.evs, e)
	return s
}

// sealed appends an event sealed with the given seq and prev instead of
// the chain's, without advancing the chain.
func (s *stream) sealed(e events.Event, seq uint64, prev events.Hash) *stream {
	e.Seq, e.Prev = seq, prev
	s.raw = append(s.raw, e.Seal(nil))
	s.evs = append(s.evs, e)
	return s
}

func epochEv(t int64, epoch uint64) events.Event {
	p := policy.LegacyDefault().Canonical()
	return events.Event{Kind: events.KindEpoch, Time: t, Epoch: epoch, Decision: "permit", Policy: p, PolicyDigest: events.Sum(p)}
}

func boundCounters(worker string) []events.Counter {
	return []events.Counter{{Key: "lane/isolated"}, {Key: revocation.Key(revocation.ScopeWorker, worker)}}
}

func permitEv(t int64, id, worker string, d events.Hash, ttl int64, epoch uint64) events.Event {
	return events.Event{
		Kind: events.KindPermit, Time: t, GrantID: id, Worker: worker, Lane: "isolated", Tool: "Read",
		Digest: d, Epoch: epoch, Decision: "permit", IssuedAt: t, ExpiresAt: t + ttl,
		Counters: boundCounters(worker),
	}
}

func attemptEv(t int64, id, worker string, d events.Hash, permitSeq uint64) events.Event {
	return events.Event{Kind: events.KindAttempt, Time: t, GrantID: id, Worker: worker, Digest: d, RefSeq: permitSeq, Decision: "permit"}
}

func effectEv(t int64, id, worker, outcome, verifier string, attemptSeq uint64) events.Event {
	return events.Event{Kind: events.KindEffect, Time: t, GrantID: id, Worker: worker, Outcome: outcome, Verifier: verifier, RefSeq: attemptSeq, Decision: "permit"}
}

// validStream is a short stream with every kind, in the shapes the issuer
// writes them.
// reviewApprovedEv approves the decision record rv (receipt format level
// 4) for worker's call with digest d, for ttl.
func reviewApprovedEv(t int64, rv, worker string, d events.Hash, ttl int64) events.Event {
	return events.Event{Kind: events.KindReviewApproved, Time: t, Worker: worker, Lane: "isolated", Tool: "Read", Digest: d,
		Decision: "permit", Actor: "operator", ReviewID: rv, ExpiresAt: t + ttl, Caption: "read", ArtifactVersion: 1}
}

// consumedEv records that the permit at permitSeq used review rv.
func consumedEv(t int64, rv, worker string, permitSeq uint64) events.Event {
	return events.Event{Kind: events.KindReviewConsumed, Time: t, Worker: worker, Tool: "Read", Decision: "permit",
		ReviewID: rv, RefSeq: permitSeq, Caption: "read", ArtifactVersion: 1}
}

// approvalEv approves review rv for worker's call with digest d, for ttl.
func approvalEv(t int64, rv, worker string, d events.Hash, ttl int64) events.Event {
	return events.Event{Kind: events.KindApproval, Time: t, Worker: worker, Lane: "isolated", Tool: "Read", Digest: d,
		Decision: "permit", Actor: "operator", ReviewID: rv, ExpiresAt: t + ttl}
}

// approvedPermitEv is a permit of the call the approval of rv covered.
func approvedPermitEv(t int64, id, worker string, d events.Hash, ttl int64, rv string) events.Event {
	e := permitEv(t, id, worker, d, ttl, 1)
	e.ReviewID = rv
	e.Rules = []string{"approved:" + rv}
	return e
}

func validStream() *stream {
	s := &stream{}
	s.add(epochEv(t0, 1))                                   // 1
	s.add(permitEv(t0+sec, "g1", "w1", digestA, 60*sec, 1)) // 2
	s.add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2))      // 3
	s.add(effectEv(t0+3*sec, "g1", "w1", "confirmed", "v1", 3))
	s.add(events.Event{Kind: events.KindDeny, Time: t0 + 4*sec, Worker: "w2", Tool: "Bash", Decision: "deny", Reason: "denied_by_policy"})
	s.add(events.Event{Kind: events.KindSpendRefused, Time: t0 + 5*sec, GrantID: "g1", Worker: "w1", Reason: "already_spent", RefSeq: 2})
	s.add(events.Event{Kind: events.KindEffectRefused, Time: t0 + 6*sec, GrantID: "g9", Worker: "w1", Reason: "unknown_grant"})
	s.add(permitEv(t0+7*sec, "g2", "w2", digestB, 60*sec, 1)) // 8
	s.add(events.Event{Kind: events.KindRevoke, Time: t0 + 8*sec, Worker: "w2", Counters: []events.Counter{{Key: "worker/w2", Value: 1}}, Cancelled: []string{"g2"}})
	s.add(events.Event{Kind: events.KindReinstate, Time: t0 + 9*sec, Worker: "w2"})
	return s
}

// check runs a Verifier over raw messages with stream sequences equal to
// their positions (1-based) when withStreamSeq is set.
func check(raw [][]byte, withStreamSeq bool) (*Verifier, *Violation) {
	v := NewVerifier(Options{})
	for i, b := range raw {
		var ss uint64
		if withStreamSeq {
			ss = uint64(i + 1)
		}
		if err := v.Add(b, ss); err != nil {
			return v, err.(*Violation)
		}
	}
	return v, nil
}

func checkEvents(evs []events.Event, opts Options) (*Verifier, *Violation) {
	v := NewVerifier(opts)
	for _, e := range evs {
		if err := v.AddEvent(e); err != nil {
			return v, err.(*Violation)
		}
	}
	return v, nil
}

func wantViolation(t *testing.T, got *Violation, seq uint64, code string) {
	t.Helper()
	if got == nil {
		t.Fatalf("no violation, want %s at seq %d", code, seq)
	}
	if got.Seq != seq || got.Code != code {
		t.Fatalf("got %v, want %s at seq %d", got, code, seq)
	}
}

// sim drives the real state machine with commands and keeps the digest it
// had after every batch, so the auditor's fold can be compared with it.
type sim struct {
	s       *fsm.State
	now     int64
	index   uint64
	digests map[uint64]events.Hash // chain seq -> fsm digest after the batch
}

func newSim() *sim {
	return &sim{s: fsm.New(), now: t0, digests: map[uint64]events.Hash{}}
}

func (m *sim) apply(cmds ...fsm.Command) []grants.Envelope {
	m.index++
	out := fsm.Apply(m.s, m.index, fsm.Batch{Time: m.now, Node: "n1", Commands: cmds})
	m.digests[m.s.Chain().Seq] = m.s.Digest()
	return out
}

// raw returns every receipt the state machine produced, in order.
func (m *sim) raw() [][]byte {
	var out [][]byte
	for _, p := range m.s.Outbox(0, 0) {
		out = append(out, p.Data)
	}
	return out
}

func policyCmd(p *policy.Policy) fsm.Command {
	return fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: p.Canonical()}
}

// workload runs n random batches of real commands through the state
// machine: requests in every lane (allowed and denied), spends (good,
// wrong digest, wrong worker, double, late), effects (agreeing, unknown,
// conflicting), source registrations (plain and derived, repeated and
// conflicting) and requests whose fields trace to them, revocations of
// workers, sources and lanes, reinstatement, policy changes, and clock
// jumps past expiry and retention (of grants and of sources).
func workload(seed uint64, n int) *sim {
	r := rand.New(rand.NewPCG(seed, 1))
	m := newSim()
	m.apply(policyCmd(policy.LegacyDefault()))
	workers := []string{"w0", "w1", "w2", "w3", "w4", "w5"}
	laneOf := map[string]string{"w0": "coordinator", "w1": "isolated", "w2": "specialist", "w3": "isolated", "w4": "specialist", "w5": "coordinator"}
	tools := []string{"Read", "Bash", "WebFetch", "mcp__x"}
	sources := []string{"s1", "s2", "s3"}
	type issued struct {
		id, worker string
		digest     events.Hash
	}
	var live, spent []issued // recent permits; recent attempts
	nextID := 0
	digestOf := func(i int) events.Hash { return events.Sum(fmt.Appendf(nil, "args-%d", i)) }
	for range n {
		var cmds []fsm.Command
		for range 1 + r.IntN(4) {
			switch p := r.IntN(1000); {
			case p < 60:
				c := fsm.Command{Op: fsm.OpSource, Caller: workers[r.IntN(2)], SourceID: sources[r.IntN(len(sources))],
					Channel: []string{"user_prompt", "web_fetch", "derived"}[r.IntN(3)], Scope: "task",
					ContentDigest: events.Sum(fmt.Appendf(nil, "content-%d", r.IntN(2)))}
				if c.Channel == "derived" {
					c.SourceID = "d" + c.SourceID
					c.Origins = []string{sources[r.IntN(len(sources))]}
				}
				cmds = append(cmds, c)
			case p < 300:
				w := workers[r.IntN(len(workers))]
				nextID++
				c := fsm.Command{
					Op: fsm.OpRequest, Caller: w, Lane: laneOf[w], Tool: tools[r.IntN(len(tools))],
					GrantID: fmt.Sprintf("g%d", nextID), Digest: digestOf(r.IntN(5)),
					IdemKey: fmt.Sprintf("k%d", r.IntN(nextID+1)),
				}
				if r.IntN(3) == 0 {
					c.Sources = []string{sources[r.IntN(len(sources))]}
				}
				if r.IntN(3) == 0 {
					src := sources[r.IntN(len(sources))]
					if r.IntN(2) == 0 {
						src = "d" + src
					}
					c.Traces = []fsm.Trace{{Field: "/x", Covered: true, Matches: []fsm.TraceMatch{{Source: src, Transform: "raw"}}}}
				}
				if r.IntN(4) == 0 {
					c.TTL = int64(r.IntN(90)+1) * sec
				}
				cmds = append(cmds, c)
			case p < 680 && len(live) > 0:
				g := live[r.IntN(len(live))]
				c := fsm.Command{Op: fsm.OpSpend, Caller: g.worker, GrantID: g.id, Digest: g.digest, IdemKey: fmt.Sprintf("s-%s-%d", g.id, r.IntN(2))}
				switch r.IntN(20) {
				case 0:
					c.Digest = digestOf(99)
				case 1:
					c.Caller = workers[r.IntN(len(workers))]
				}
				cmds = append(cmds, c)
			case p < 940 && len(live) > 0:
				g := live[r.IntN(len(live))]
				if len(spent) > 0 && r.IntN(5) > 0 {
					g = spent[r.IntN(len(spent))]
				}
				outcomes := []string{"confirmed", "confirmed", "failed", "unknown", "bogus"}
				verifiers := []string{"v1", "v1", "v2", ""}
				cmds = append(cmds, fsm.Command{Op: fsm.OpEffect, Caller: g.worker, GrantID: g.id,
					Outcome: outcomes[r.IntN(len(outcomes))], Verifier: verifiers[r.IntN(len(verifiers))]})
			case p < 965:
				keys := []string{"worker/" + workers[r.IntN(len(workers))], "source/" + sources[r.IntN(len(sources))], "lane/isolated"}
				cmds = append(cmds, fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: keys[r.IntN(len(keys))]})
			case p < 980:
				cmds = append(cmds, fsm.Command{Op: fsm.OpReinstate, Caller: "operator:alice", Key: workers[r.IntN(len(workers))]})
			case p < 988:
				pol := policy.LegacyDefault()
				pol.DefaultTTL = policy.Duration(time.Duration(30+r.IntN(60)) * time.Second)
				cmds = append(cmds, policyCmd(pol))
			default:
				cmds = append(cmds, fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "nope", Digest: digestOf(1), IdemKey: "x"})
			}
		}
		for i, env := range m.apply(cmds...) {
			switch {
			case env.Kind == events.KindPermit && cmds[i].Op == fsm.OpRequest:
				live = append(live, issued{env.GrantID, cmds[i].Caller, cmds[i].Digest})
			case env.Kind == events.KindAttempt && cmds[i].Op == fsm.OpSpend:
				spent = append(spent, issued{env.GrantID, cmds[i].Caller, cmds[i].Digest})
			}
		}
		if len(live) > 16 {
			live = live[len(live)-16:]
		}
		if len(spent) > 16 {
			spent = spent[len(spent)-16:]
		}
		switch r.IntN(20) {
		case 0:
			m.now += int64(r.IntN(15)) * int64(time.Minute) // past expiry and retention
		default:
			m.now += int64(r.IntN(3000)) * int64(time.Millisecond)
		}
	}
	return m
}

// routeEv is a route event of kind k on route r by worker at generation
// gen, with the lease expiring at exp.
func routeEv(k events.Kind, t int64, r, worker string, gen uint64, exp int64) events.Event {
	return events.Event{Kind: k, Time: t, Route: r, Worker: worker, RouteGen: gen, ExpiresAt: exp, Decision: "permit"}
}

// routedPermitEv and routedAttemptEv are a permit and attempt bound to
// route r at generation gen.
func routedPermitEv(t int64, id, worker string, d events.Hash, r string, gen uint64) events.Event {
	e := permitEv(t, id, worker, d, 60*sec, 1)
	e.Route, e.RouteGen = r, gen
	return e
}

func routedAttemptEv(t int64, id, worker string, d events.Hash, permitSeq uint64, r string, gen uint64) events.Event {
	e := attemptEv(t, id, worker, d, permitSeq)
	e.Route, e.RouteGen = r, gen
	return e
}

// routeBase: base() then w1 acquires job-a at generation 1 until t0+20s
// (seq 3) and is permitted g2 under it (seq 4).
func routeBase() *stream {
	return base().add(routeEv(events.KindRouteAcquired, t0+2*sec, "job-a", "w1", 1, t0+20*sec)).
		add(routedPermitEv(t0+3*sec, "g2", "w1", digestB, "job-a", 1))
}
