package audit

import (
	"slices"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Options configure a Verifier. The zero value checks a whole stream from
// sequence 1 and folds it into a projection.
type Options struct {
	// From is the first sequence the Verifier will be given. 0 and 1 mean
	// the whole stream. A larger value is a partial check: the first
	// event's Prev is taken on trust, there is no projection (Digest is
	// zero), and checks that need events before From (the permit of an
	// attempt minted earlier, a counter never revoked inside the window)
	// are skipped and counted in Summary.Unchecked. Everything inside the
	// window is checked as usual.
	From uint64
	// NoProjection skips the fsm fold; the checks are unchanged and Digest
	// is zero. For benchmarks and for callers that only need the checks.
	NoProjection bool
}

// grant is what the Verifier remembers about one live grant.
type grant struct {
	id        string
	worker    string
	digest    events.Hash
	counters  []events.Counter
	expiresAt int64
	epoch     uint64

	permitSeq    uint64 // 0 for a grant first seen after Options.From
	attemptSeq   uint64
	effectSeq    uint64
	cancelledSeq uint64
	outcome      int8 // outcome index, or noOutcome
	partial      bool // permit not seen (partial check)
	approx       bool // partial, and forgetAt is only an upper bound
	forgetAt     int64
	gen          uint32
}

// Outcome indices.
const (
	noOutcome  int8 = -1
	oConfirmed int8 = 0
	oFailed    int8 = 1
	oUnknown   int8 = 2
	oContested int8 = 3
	nOutcomes       = 4
)

var outcomeNames = [nOutcomes]string{
	grants.OutcomeConfirmed, grants.OutcomeFailed, grants.OutcomeUnknown, grants.OutcomeContested,
}

func outcomeIndex(s string) int8 {
	switch s {
	case grants.OutcomeConfirmed:
		return oConfirmed
	case grants.OutcomeFailed:
		return oFailed
	case grants.OutcomeUnknown:
		return oUnknown
	case grants.OutcomeContested:
		return oContested
	}
	return noOutcome
}

// combineOutcome is how a new effect report changes a grant's outcome.
func combineOutcome(prev, next int8) int8 {
	switch {
	case next == oContested, prev == oContested:
		return oContested
	case prev == noOutcome, prev == next, prev == oUnknown:
		return next
	case next == oUnknown:
		return prev
	}
	return oContested // two different definite outcomes
}

type counterState struct {
	value uint64
	seq   uint64 // the revoke event that set it
}

// expiry schedules a grant slot for forgetting.
type expiry struct {
	at   int64
	slot int32
	gen  uint32
}

// kindSlots bounds the per-kind counters; unknown kinds stop the Verifier
// before they are counted.
const kindSlots = 64

// Verifier checks a receipt stream event by event. It is not safe for
// concurrent use.
type Verifier struct {
	opts    Options
	from    uint64 // first expected sequence
	partial bool

	chain    events.Chain
	started  bool
	lastTime int64
	viol     *Violation

	live  map[string]int32 // grant id -> slot
	slots []grant
	free  []int32
	exp   []expiry // min-heap on at

	counters map[string]counterState
	// approvals by review id, until used, expired or their worker revoked
	approvals   map[string]approvalState
	approvalExp approvalHeap
	// toConsume is the permit whose review_consumed must be the next
	// receipt (decision records, receipt format level 4).
	toConsume pendingConsume
	epoch     uint64
	epochSeq  uint64

	nEvents    uint64
	firstSeq   uint64
	firstTime  int64
	kinds      [kindSlots]uint64
	permitted  uint64
	spent      uint64
	cancelled  uint64
	unresolved uint64
	unchecked  uint64
	outcomes   [nOutcomes]uint64

	routes map[string]*lease // route leases, by route name (route.go)
	// routeFloor is the generation high-water mark: the highest
	// generation of a forgotten route (route.go).
	routeFloor uint64
	stale      uint64 // effects recorded route_stale

	state *fsm.State // nil without a projection

	scratch events.Event // Add decodes into it
}

// NewVerifier returns a Verifier for a stream that starts at opts.From.
func NewVerifier(opts Options) *Verifier {
	v := &Verifier{
		opts:     opts,
		from:     max(opts.From, 1),
		live:     make(map[string]int32),
		counters: make(map[string]counterState),
	}
	v.partial = v.from > 1
	if !v.partial && !opts.NoProjection {
		v.state = fsm.New()
	}
	return v
}

// Violation returns the first violation, or nil.
func (v *Verifier) Violation() *Violation { return v.viol }

// Head is the chain head after the last accepted event.
func (v *Verifier) Head() events.Chain { return v.chain }

// Events is the number of events accepted.
func (v *Verifier) Events() uint64 { return v.nEvents }

// Tracked is the number of grants currently remembered.
func (v *Verifier) Tracked() int { return len(v.live) }

// Digest is the projection digest after the last accepted event: what the
// issuer's fsm.State.Digest is at the same sequence. It is zero for a
// partial check or with NoProjection.
func (v *Verifier) Digest() events.Hash {
	if v.state == nil {
		return events.Hash{}
	}
	return v.state.Digest()
}

// Projection is the folded state (nil for a partial check or with
// NoProjection). The caller must not modify it.
func (v *Verifier) Projection() *fsm.State { return v.state }

// CheckDigest compares the projection digest with want (an issuer's
// state_digest taken when its chain head was this Verifier's head) and
// records a state_digest_mismatch violation at the last sequence if they
// differ. It returns the Verifier's violation, if any.
func (v *Verifier) CheckDigest(want events.Hash) error {
	if v.viol != nil {
		return v.viol
	}
	if v.state == nil {
		return v.fail(violation(v.chain.Seq, CodeStateDigestMismatch, "no projection to compare (partial check or NoProjection)"))
	}
	if got := v.state.Digest(); got != want {
		return v.fail(violation(v.chain.Seq, CodeStateDigestMismatch,
			"projection digest %s at seq %d differs from expected %s (compare with the issuer's state_digest when its seq is %d)",
			got, v.chain.Seq, want, v.chain.Seq))
	}
	return nil
}

func (v *Verifier) fail(x *Violation) error {
	v.viol = x
	return x
}

func (v *Verifier) next() uint64 {
	if !v.started {
		return v.from
	}
	return v.chain.Seq + 1
}

// Add decodes and checks one message of the receipt stream. streamSeq is
// its JetStream sequence, or 0 when there is none to compare. It returns
// the first violation (a *Violation), now or from an earlier call.
// Pipeline does the same for many messages, decoding them in parallel.
func (v *Verifier) Add(raw []byte, streamSeq uint64) error {
	return v.addRaw(raw, streamSeq, events.DecodeInto)
}

// addRaw is Add and AddShared with their decode.
func (v *Verifier) addRaw(raw []byte, streamSeq uint64, decode func([]byte, *events.Event) error) error {
	if v.viol != nil {
		return v.viol
	}
	// Decoded into the Verifier's own event, whose lists the next Add
	// overwrites: add copies what it keeps.
	err := decode(raw, &v.scratch)
	return v.addDecoded(&v.scratch, err, streamSeq, false)
}

// AddShared is Add for a message handed over for good, as to
// events.DecodeShared: raw must never be modified afterwards, since what
// the Verifier keeps of it (its projection's strings) views it. A message
// received from NATS qualifies. It saves the copy Add makes of each
// message's strings.
func (v *Verifier) AddShared(raw []byte, streamSeq uint64) error {
	return v.addRaw(raw, streamSeq, events.DecodeShared)
}

// addDecoded is Add after the decode: e and err are what events.Decode or
// DecodeInto gave for the message. owned says add may keep e's slices
// (otherwise it copies what it keeps). Add and Pipeline share it, so both
// report the same violation for the same messages.
func (v *Verifier) addDecoded(e *events.Event, err error, streamSeq uint64, owned bool) error {
	if v.viol != nil {
		return v.viol
	}
	want := v.next()
	if streamSeq > want {
		return v.fail(violation(want, CodeSeqGap,
			"the stream jumps to seq %d: seq %d is missing (deleted or never published)", streamSeq, want))
	}
	if err != nil {
		at := streamSeq
		if at == 0 {
			at = want
		}
		return v.fail(violation(at, CodeDecode, "%v", err))
	}
	if streamSeq != 0 && e.Seq != streamSeq {
		return v.fail(violation(streamSeq, CodeStreamSeqMismatch,
			"stream seq %d holds event seq %d", streamSeq, e.Seq))
	}
	return v.add(e, owned)
}

// AddEvent checks one decoded event. It trusts e.Hash: pass only events
// from events.Decode (Add decodes and checks the bytes).
func (v *Verifier) AddEvent(e events.Event) error {
	if v.viol != nil {
		return v.viol
	}
	return v.add(&e, true)
}

// AddEventRef is AddEvent for an event the caller holds by reference and
// may overwrite afterwards (a loop decoding with events.DecodeInto into
// one event): the same checks, without a copy of the event. It keeps none
// of e's slices (it copies what it keeps).
func (v *Verifier) AddEventRef(e *events.Event) error {
	if v.viol != nil {
		return v.viol
	}
	return v.add(e, false)
}

func (v *Verifier) add(e *events.Event, owned bool) error {
	want := v.next()
	if e.Seq != want {
		if v.started {
			return v.fail(violation(want, CodeSeqGap, "expected seq %d after %d, got seq %d", want, v.chain.Seq, e.Seq))
		}
		return v.fail(violation(want, CodeSeqGap, "expected the stream to start at seq %d, got seq %d", want, e.Seq))
	}
	if (v.started || !v.partial) && e.Prev != v.chain.Head {
		if v.chain.Seq == 0 {
			return v.fail(violation(e.Seq, CodeChainBroken, "the first event's prev must be empty, got %s", e.Prev.Short()))
		}
		return v.fail(violation(e.Seq, CodeChainBroken,
			"prev %s is not the hash %s of seq %d: seq %d or seq %d was altered or replaced",
			e.Prev.Short(), v.chain.Head.Short(), v.chain.Seq, v.chain.Seq, e.Seq))
	}
	if !e.Kind.Known() || int(e.Kind) >= kindSlots {
		return v.fail(violation(e.Seq, CodeUnknownKind, "kind %d is not known to this auditor", uint16(e.Kind)))
	}
	if err := e.StaticValidate(); err != nil {
		return v.fail(violation(e.Seq, CodeInvalidEvent, "%v", err))
	}
	if v.started && e.Time < v.lastTime {
		return v.fail(violation(e.Seq, CodeTimeBackwards,
			"time %s is before the previous event's %s", ts(e.Time), ts(v.lastTime)))
	}
	v.forget(e.Time)
	v.forgetApprovals(e.Time)

	var x *Violation
	if v.toConsume.review != "" && e.Kind != events.KindReviewConsumed {
		x := violation(e.Seq, CodeApprovalNotConsumed, "permit seq %d used review %s, and the next receipt is %s, not its review_consumed",
			v.toConsume.permit, v.toConsume.review, e.Kind)
		v.toConsume = pendingConsume{}
		return v.fail(x)
	}
	switch e.Kind {
	case events.KindReviewApproved:
		v.reviewApproved(e)
	case events.KindReviewRejected, events.KindReviewSuperseded, events.KindReviewExpired:
		v.reviewClosed(e)
	case events.KindReviewConsumed:
		x = v.consumed(e)
	case events.KindPermit:
		x = v.permit(e, owned)
		if x == nil && e.ReviewID != "" {
			x = v.approvedPermit(e)
		}
	case events.KindApproval:
		v.approval(e)
	case events.KindAttempt:
		x = v.attempt(e)
		if x == nil {
			x = v.routeAttempt(e)
		}
	case events.KindEffect:
		x = v.effect(e)
		if e.RouteStale {
			v.stale++
		}
	case events.KindRevoke:
		v.revoke(e)
		v.revokeApprovals(e)
		v.revokeRoutes(e)
	case events.KindSpawn, events.KindIncarnation:
		// A spawn sets the child's incarnation counter; an incarnation
		// moves it and cancels the old incarnation's grants.
		v.revoke(e)
	case events.KindRouteAcquired, events.KindRouteTaken, events.KindRouteRenewed, events.KindRouteReleased, events.KindRouteLapsed,
		events.KindRouteForgotten:
		x = v.route(e)
	case events.KindEpoch:
		v.epoch, v.epochSeq = e.Epoch, e.Seq
	}
	if x != nil {
		return v.fail(x)
	}
	if v.state != nil {
		if err := fsm.EvolveRef(v.state, e); err != nil {
			return v.fail(violation(e.Seq, CodeFoldFailed, "%v", err))
		}
	}
	if !v.started {
		v.started, v.firstSeq, v.firstTime = true, e.Seq, e.Time
	}
	v.chain.Seq, v.chain.Head = e.Seq, e.Hash
	v.lastTime = e.Time
	v.nEvents++
	v.kinds[e.Kind]++
	// Like fsm.Evolve, never keep a grant whose retention has passed, even
	// one the event itself added.
	v.forget(e.Time)
	return nil
}

// forget drops grants whose expiry plus fsm.RetainMargin has been reached
// by the control-plane time t, as fsm.State does before it folds an event.
func (v *Verifier) forget(t int64) {
	for len(v.exp) > 0 && v.exp[0].at <= t {
		x := v.popExpiry()
		g := &v.slots[x.slot]
		if g.gen != x.gen || g.forgetAt != x.at {
			continue // superseded (see permit)
		}
		v.release(x.slot)
	}
}

func (v *Verifier) release(slot int32) {
	g := &v.slots[slot]
	delete(v.live, g.id)
	*g = grant{gen: g.gen + 1}
	v.free = append(v.free, slot)
}

func (v *Verifier) alloc(id string, at int64) *grant {
	var slot int32
	if n := len(v.free); n > 0 {
		slot = v.free[n-1]
		v.free = v.free[:n-1]
	} else {
		slot = int32(len(v.slots))
		v.slots = append(v.slots, grant{})
	}
	v.live[id] = slot
	g := &v.slots[slot]
	g.id, g.outcome, g.forgetAt = id, noOutcome, at
	v.pushExpiry(expiry{at: at, slot: slot, gen: g.gen})
	return g
}

func (v *Verifier) permit(e *events.Event, owned bool) *Violation {
	if slot, ok := v.live[e.GrantID]; ok {
		g := &v.slots[slot]
		switch {
		case g.approx:
			// A cancellation of a grant minted before the window, kept
			// for an upper bound of its life: the issuer may well have
			// forgotten it already, so the id is free again.
			v.release(slot)
		case g.partial:
			return violation(e.Seq, CodeDuplicatePermit, "grant %s is still live (attempted at seq %d)", e.GrantID, g.attemptSeq)
		default:
			return violation(e.Seq, CodeDuplicatePermit, "grant %s is still live (permitted at seq %d)", e.GrantID, g.permitSeq)
		}
	}
	g := v.alloc(e.GrantID, fsm.RetainUntil(e.ExpiresAt))
	g.worker, g.digest, g.counters = e.Worker, e.Digest, e.Counters
	if !owned {
		g.counters = slices.Clone(e.Counters)
	}
	g.expiresAt, g.epoch, g.permitSeq = e.ExpiresAt, e.Epoch, e.Seq
	v.permitted++
	return nil
}

func (v *Verifier) attempt(e *events.Event) *Violation {
	slot, ok := v.live[e.GrantID]
	if !ok {
		if v.partial && e.RefSeq != 0 && e.RefSeq < v.from {
			return v.attemptBeforeWindow(e)
		}
		return violation(e.Seq, CodeAttemptWithoutPermit,
			"no live permit for grant %s (never permitted, or forgotten after it expired)", e.GrantID)
	}
	g := &v.slots[slot]
	if g.partial {
		// Seen before only as an attempt or a cancellation inside the
		// window; its permit came before it.
		switch {
		case g.attemptSeq != 0:
			return violation(e.Seq, CodeDoubleAttempt, "grant %s already attempted at seq %d", e.GrantID, g.attemptSeq)
		default:
			return violation(e.Seq, CodeAttemptAfterRevocation,
				"grant %s was cancelled by the revoke at seq %d", e.GrantID, g.cancelledSeq)
		}
	}
	if e.RefSeq != g.permitSeq {
		return violation(e.Seq, CodeAttemptWithoutPermit,
			"attempt names permit seq %d but grant %s was permitted at seq %d", e.RefSeq, e.GrantID, g.permitSeq)
	}
	if e.Worker != g.worker {
		return violation(e.Seq, CodeNotGrantee, "worker %q attempted grant %s, minted for %q", e.Worker, e.GrantID, g.worker)
	}
	if g.cancelledSeq != 0 {
		return violation(e.Seq, CodeAttemptAfterRevocation,
			"grant %s was cancelled by the revoke at seq %d", e.GrantID, g.cancelledSeq)
	}
	if g.attemptSeq != 0 {
		return violation(e.Seq, CodeDoubleAttempt, "grant %s already attempted at seq %d", e.GrantID, g.attemptSeq)
	}
	if e.Time >= g.expiresAt {
		return violation(e.Seq, CodeAttemptAfterExpiry,
			"grant %s attempted at %s, at or after its expiry %s", e.GrantID, ts(e.Time), ts(g.expiresAt))
	}
	if v.epochSeq > g.permitSeq {
		return violation(e.Seq, CodeAttemptAfterEpochChange,
			"grant %s (epoch %d, permitted at seq %d) attempted after the epoch change at seq %d", e.GrantID, g.epoch, g.permitSeq, v.epochSeq)
	}
	if g.epoch != v.epoch && (!v.partial || v.epochSeq != 0) {
		return violation(e.Seq, CodeAttemptAfterEpochChange,
			"grant %s was minted under epoch %d but the current epoch is %d", e.GrantID, g.epoch, v.epoch)
	}
	if x := v.checkCounters(e, g.counters); x != nil {
		return x
	}
	if e.Digest != g.digest {
		return violation(e.Seq, CodeAttemptDigestMismatch,
			"attempt digest %s differs from grant %s's request digest %s", e.Digest.Short(), e.GrantID, g.digest.Short())
	}
	g.attemptSeq = e.Seq
	v.spent++
	v.unresolved++
	return nil
}

// attemptBeforeWindow checks, as far as the window allows, an attempt whose
// permit came before Options.From, and starts tracking the grant so its
// effects are checked. The attempt event repeats the permit's expiry and
// counters; they are trusted.
func (v *Verifier) attemptBeforeWindow(e *events.Event) *Violation {
	if e.Time >= e.ExpiresAt {
		return violation(e.Seq, CodeAttemptAfterExpiry,
			"grant %s attempted at %s, at or after its expiry %s", e.GrantID, ts(e.Time), ts(e.ExpiresAt))
	}
	if v.epochSeq > e.RefSeq {
		return violation(e.Seq, CodeAttemptAfterEpochChange,
			"grant %s (permitted at seq %d) attempted after the epoch change at seq %d", e.GrantID, e.RefSeq, v.epochSeq)
	}
	if x := v.checkCounters(e, e.Counters); x != nil {
		return x
	}
	g := v.alloc(e.GrantID, fsm.RetainUntil(e.ExpiresAt))
	g.partial = true
	g.worker, g.digest, g.expiresAt, g.permitSeq, g.attemptSeq = e.Worker, e.Digest, e.ExpiresAt, e.RefSeq, e.Seq
	v.unchecked++
	v.spent++
	v.unresolved++
	return nil
}

// checkCounters reports a bound counter that a revoke moved. In a partial
// check, counters no revoke inside the window named are unknown and skipped.
func (v *Verifier) checkCounters(e *events.Event, bound []events.Counter) *Violation {
	if len(v.counters) == 0 {
		return nil
	}
	for _, c := range bound {
		cur, ok := v.counters[c.Key]
		if !ok && v.partial {
			continue
		}
		if cur.value != c.Value {
			return violation(e.Seq, CodeAttemptAfterRevocation,
				"grant %s bound counter %s=%d but the revoke at seq %d set it to %d", e.GrantID, c.Key, c.Value, cur.seq, cur.value)
		}
	}
	return nil
}

func (v *Verifier) effect(e *events.Event) *Violation {
	if e.Verifier == "" {
		return violation(e.Seq, CodeEffectMissingVerifier, "effect for grant %s names no verifier", e.GrantID)
	}
	o := outcomeIndex(e.Outcome)
	if o == noOutcome {
		return violation(e.Seq, CodeEffectBadOutcome, "effect for grant %s has outcome %q", e.GrantID, e.Outcome)
	}
	slot, ok := v.live[e.GrantID]
	if !ok {
		if v.partial && e.RefSeq != 0 && e.RefSeq < v.from {
			v.unchecked++
			return nil
		}
		return violation(e.Seq, CodeEffectWithoutAttempt,
			"no live grant %s (never permitted, or forgotten after it expired)", e.GrantID)
	}
	g := &v.slots[slot]
	if g.attemptSeq == 0 {
		return violation(e.Seq, CodeEffectWithoutAttempt, "grant %s was never attempted", e.GrantID)
	}
	if e.RefSeq != g.attemptSeq {
		return violation(e.Seq, CodeEffectWithoutAttempt,
			"effect names attempt seq %d but grant %s was attempted at seq %d", e.RefSeq, e.GrantID, g.attemptSeq)
	}
	if e.Worker != g.worker {
		return violation(e.Seq, CodeNotGrantee, "worker %q reported the effect of grant %s, minted for %q", e.Worker, e.GrantID, g.worker)
	}
	prev := g.outcome
	next := combineOutcome(prev, o)
	if prev == noOutcome {
		v.unresolved--
	} else {
		v.outcomes[prev]--
	}
	v.outcomes[next]++
	g.outcome, g.effectSeq = next, e.Seq
	return nil
}

func (v *Verifier) revoke(e *events.Event) {
	for _, c := range e.Counters {
		v.counters[c.Key] = counterState{value: c.Value, seq: e.Seq}
	}
	for _, id := range e.Cancelled {
		slot, ok := v.live[id]
		if !ok {
			if !v.partial {
				continue
			}
			// A grant minted before the window: remember the
			// cancellation for as long as the grant can possibly live.
			g := v.alloc(id, fsm.RetainUntil(fsm.AddSat(e.Time, int64(policy.MaxTTL))))
			g.partial, g.approx, g.cancelledSeq = true, true, e.Seq
			v.cancelled++
			continue
		}
		g := &v.slots[slot]
		if g.attemptSeq == 0 && g.cancelledSeq == 0 {
			g.cancelledSeq = e.Seq
			v.cancelled++
		}
	}
}

// ts formats a control-plane time for a violation's detail.
func ts(t int64) string { return time.Unix(0, t).UTC().Format(time.RFC3339Nano) }

// Expiry min-heap, written out so that pushes and pops do not allocate.

func (v *Verifier) pushExpiry(x expiry) {
	h := append(v.exp, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= h[i].at {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	v.exp = h
}

func (v *Verifier) popExpiry() expiry {
	h := v.exp
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].at < h[l].at {
			m = r
		}
		if h[i].at <= h[m].at {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	v.exp = h
	return top
}
