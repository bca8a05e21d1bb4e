package faults

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The lease model: one route's lease register on the replicated
// control-plane clock, for porcupine.
//
// The control-plane clock is the time the leader stamps on each log entry:
// it never runs backwards in log order, and a linearization is a log
// order. A lease acquired (or renewed) at time T expires at T+L (L: the
// lease the test asks for, under the route's max_ttl), and is live at
// time t exactly while t < expiry; nothing but the owner's renewal moves
// an expiry, and nothing but the clock passing it ends a lease the owner
// did not release. The model checks every answer against those rules:
//
//   - An answer that has a receipt carries its time (the receipt's time,
//     read back from the stream by seq): the model requires times to be
//     nondecreasing along the linearization and judges the lease live or
//     lapsed at that exact time.
//   - An answer without a receipt (a refusal, a lease answered as it
//     stands) happened at some unknown time no earlier than the last one.
//     The model keeps a lower bound (Clock) and judges it at the earliest
//     time consistent with the answer: "live" needs Clock < expiry;
//     "lapsed" moves Clock up to the expiry. Choosing the earliest time is
//     exact, because every later constraint is either another lower bound
//     or "before an expiry".
//   - An operation whose answer was lost may have taken effect at any time
//     after its invocation, or never (porcupine places it anywhere after
//     its call). If it acquired or renewed, the new expiry is T+L for an
//     unknown T: the model keeps the expiry as an interval [ELo, EHi] and
//     narrows it as later answers are judged (the first answer with a
//     time T2 after it bounds T <= T2; an answer that states the expiry
//     pins it). Where the interval straddles an answer's time, both
//     outcomes are kept (a nondeterministic model): the check stays exact
//     for every history of definite answers, and for lost answers it is
//     only as permissive as the unknown time forces it to be.
//   - The client retries an attempt whose answer it did not get, so an
//     operation's effect may have come from an earlier attempt: an
//     acquire answered with a lease at the next generation acquired it (at
//     the lease's IssuedAt); a renewal answered with an expiry may have
//     moved it at expiry-L; a release refused may have released first.
//
// Generations are checked exactly: an acquisition takes the next
// generation, never a reused or skipped one; take-overs (route_taken)
// only after a lapse, plain acquisitions only of a free route.

type lmOp string

const (
	lmAcquire lmOp = "acquire"
	lmRenew   lmOp = "renew"
	lmRelease lmOp = "release"
	lmRequest lmOp = "request" // a grant request under a generation
	lmSpend   lmOp = "spend"   // the spend of a grant bound to a generation
)

const lmInf = int64(math.MaxInt64)

// lmIn is an operation on one route; L is the lease its acquire or renew
// asks for (ns).
type lmIn struct {
	Op     lmOp
	Worker string
	Gen    uint64 // renew, release, request, spend: the generation acted under
	L      int64
}

// lmOut is an answer. Unknown: the client never learned it. T > 0: the
// answer's receipt time. Gen, Issued, Exp: the lease an acquire or renew
// answered with (Issued: when it was acquired). Taken: an acquire's
// receipt was route_taken.
type lmOut struct {
	Unknown bool
	OK      bool
	T       int64
	Gen     uint64
	Issued  int64
	Exp     int64
	Taken   bool
}

// Lease ends as the model tracks them.
const (
	lmLive     = ""
	lmReleased = "released"
	lmLapsed   = "lapsed" // known lapsed: the clock has reached the expiry
)

type lmState struct {
	Gen      uint64
	Owner    string
	End      string
	ELo, EHi int64 // the expiry lies in [ELo, EHi]
	Clock    int64 // the control-plane time is at least this
	// PendL > 0: a lost answer set the expiry to T+PendL for an unknown
	// T, or kept PendHi if that was larger; the next answer with a time
	// bounds T.
	PendL, PendHi int64
}

// timed applies an answer's time T: the clock may not run backwards, and
// a pending unknown expiry is bounded by it.
func (s lmState) timed(t int64) (lmState, bool) {
	if t < s.Clock {
		return s, false
	}
	s.Clock = t
	if s.PendL > 0 {
		s.EHi = min(s.EHi, max(s.PendHi, t+s.PendL))
		s.PendL, s.PendHi = 0, 0
	}
	return s, s.ELo <= s.EHi
}

// at judges the lease at time t (known), returning the states where it is
// live and those where it is not (ended or lapsed).
func (s lmState) at(t int64) (live, ended []lmState) {
	if s.Owner == "" || s.End != lmLive {
		return nil, []lmState{s}
	}
	if t < s.EHi { // may be live: expiry > t
		l := s
		l.ELo = max(l.ELo, t+1)
		live = append(live, l)
	}
	if t >= s.ELo { // may have lapsed: expiry <= t
		e := s
		e.EHi = min(e.EHi, t)
		e.End = lmLapsed
		ended = append(ended, e)
	}
	return live, ended
}

// sometime judges the lease at an unknown time no earlier than Clock,
// taking the earliest time consistent with each outcome.
func (s lmState) sometime() (live, ended []lmState) {
	if s.Owner == "" || s.End != lmLive {
		return nil, []lmState{s}
	}
	if s.Clock < s.EHi {
		l := s
		l.ELo = max(l.ELo, s.Clock+1)
		live = append(live, l)
	}
	// Lapsed: the time is at least the expiry, at the earliest its lower
	// bound. Once lapsed the expiry no longer matters, only the clock.
	e := s
	e.Clock = max(e.Clock, e.ELo)
	e.End = lmLapsed
	e.PendL, e.PendHi = 0, 0
	ended = append(ended, e)
	return live, ended
}

// judge judges the lease at the answer's time: known, or unknown.
func (s lmState) judge(out lmOut) (live, ended []lmState) {
	if out.T > 0 {
		st, ok := s.timed(out.T)
		if !ok {
			return nil, nil
		}
		return st.at(out.T)
	}
	return s.sometime()
}

func (s lmState) owns(w string, gen uint64) bool { return s.Owner == w && s.Gen == gen }

func lmStep(state, input, output any) []any {
	s, in, out := state.(lmState), input.(lmIn), output.(lmOut)
	var next []any
	add := func(ss ...lmState) {
		for _, x := range ss {
			if x.ELo <= x.EHi {
				next = append(next, x)
			}
		}
	}
	switch in.Op {
	case lmAcquire:
		switch {
		case out.Unknown:
			add(s) // no effect
			// Or it acquired, at some T >= Clock when the route was free.
			_, free := s.sometime()
			for _, f := range free {
				add(f.acquired(in.Worker, f.Clock+in.L, lmInf, in.L, 0))
			}
		case out.OK && out.Gen == s.Gen+1:
			// This operation acquired the next generation, at out.Issued.
			if out.Exp != out.Issued+in.L || (out.T > 0 && out.T != out.Issued) {
				return nil
			}
			st, ok := s.timed(out.Issued)
			if !ok {
				return nil
			}
			_, free := st.at(out.Issued)
			for _, f := range free {
				if out.T > 0 && out.Taken != (f.End == lmLapsed) {
					continue // taken exactly when the lease it replaced lapsed
				}
				add(f.acquired(in.Worker, out.Exp, out.Exp, 0, 0))
			}
		case out.OK:
			// The lease as it stands: the caller already holds it.
			if !s.owns(in.Worker, out.Gen) || out.T > 0 {
				return nil
			}
			live, _ := s.sometime()
			for _, l := range live {
				if out.Exp >= l.ELo && out.Exp <= l.EHi && l.Clock < out.Exp {
					l.ELo, l.EHi, l.PendL = out.Exp, out.Exp, 0
					add(l)
				}
			}
		default:
			// Refused: another worker holds a live lease.
			if s.Owner == in.Worker {
				return nil
			}
			live, _ := s.judge(out)
			add(live...)
		}
	case lmRenew:
		if !s.owns(in.Worker, in.Gen) {
			if out.OK {
				return nil
			}
			add(s) // not the owner at that generation: refused, no effect
			break
		}
		switch {
		case out.Unknown:
			add(s)
			live, _ := s.sometime()
			for _, l := range live {
				l.PendHi, l.PendL = l.EHi, in.L
				l.ELo, l.EHi = max(l.ELo, l.Clock+in.L), lmInf
				add(l)
			}
		case out.OK && out.T > 0:
			// Moved the expiry to T+L, while live at T.
			if out.Exp != out.T+in.L {
				return nil
			}
			live, _ := s.judge(out)
			for _, l := range live {
				if l.ELo < out.Exp {
					l.ELo, l.EHi = out.Exp, out.Exp
					add(l)
				}
			}
		case out.OK:
			// The lease as it stands (already runs until Exp) ...
			live, _ := s.sometime()
			for _, l := range live {
				if out.Exp >= l.ELo && out.Exp <= l.EHi && l.Clock+in.L <= out.Exp {
					l.ELo, l.EHi, l.PendL = out.Exp, out.Exp, 0
					add(l)
				}
			}
			// ... or an earlier attempt of this operation moved it at
			// Exp-L, while live then.
			t1 := out.Exp - in.L
			if st, ok := s.timed(t1); ok {
				live, _ := st.at(t1)
				for _, l := range live {
					if l.ELo < out.Exp {
						l.ELo, l.EHi = out.Exp, out.Exp
						add(l)
					}
				}
			}
		default:
			// Refused while the caller owned that generation: it lapsed.
			_, ended := s.judge(out)
			add(ended...)
		}
	case lmRelease:
		if !s.owns(in.Worker, in.Gen) {
			if out.OK {
				return nil
			}
			add(s)
			break
		}
		switch {
		case out.Unknown:
			add(s)
			live, _ := s.sometime()
			for _, l := range live {
				l.End = lmReleased
				add(l)
			}
		case out.OK:
			live, _ := s.judge(out)
			for _, l := range live {
				l.End = lmReleased
				add(l)
			}
		default:
			// Refused: lapsed, or an earlier attempt released it.
			if s.End == lmReleased {
				add(s)
				break
			}
			live, ended := s.sometime()
			add(ended...)
			for _, l := range live {
				l.End = lmReleased
				add(l)
			}
		}
	case lmRequest, lmSpend:
		// Permitted (spent) exactly while the generation's owner holds a
		// live lease.
		if out.Unknown {
			add(s)
			break
		}
		live, ended := s.judge(out)
		switch {
		case out.OK && s.owns(in.Worker, in.Gen):
			add(live...)
		case out.OK:
		case s.owns(in.Worker, in.Gen):
			add(ended...)
		default:
			// Another generation: refused, and the time still counts.
			add(live...)
			add(ended...)
		}
	}
	return next
}

// acquired is the state after worker acquired the next generation with
// its expiry in [lo, hi] (pendL > 0: hi is bounded by the next time).
func (s lmState) acquired(worker string, lo, hi, pendL, pendHi int64) lmState {
	return lmState{Gen: s.Gen + 1, Owner: worker, End: lmLive, ELo: lo, EHi: hi, Clock: s.Clock, PendL: pendL, PendHi: pendHi}
}

var leaseClockModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{lmState{}} },
	Step: lmStep,
	DescribeOperation: func(input, output any) string {
		in, out := input.(lmIn), output.(lmOut)
		res := "refused"
		switch {
		case out.Unknown:
			res = "unknown"
		case out.OK:
			res = "ok"
		}
		at := "t=?"
		if out.T > 0 {
			at = fmt.Sprintf("t=%d", out.T)
		}
		if out.Gen > 0 || out.Exp > 0 {
			res += fmt.Sprintf(" gen=%d issued=%d exp=%d taken=%v", out.Gen, out.Issued, out.Exp, out.Taken)
		}
		return fmt.Sprintf("%s(%s, gen %d) %s -> %s", in.Op, in.Worker, in.Gen, at, res)
	},
	DescribeState: func(state any) string {
		s := state.(lmState)
		return fmt.Sprintf("gen %d owner %q end %q expiry [%d, %d] clock>=%d", s.Gen, s.Owner, s.End, s.ELo, s.EHi, s.Clock)
	},
}).ToModel()

// TestLeaseClockModelCatchesViolations checks the checker: taking over a
// lease before its expiry, working or renewing under a generation after
// its expiry, an expiry that is not the clock rule's, a generation reused
// or skipped and a clock running backwards are illegal; a take-over after
// the expiry, a refusal at an unknown time after it, and lost answers that
// may have taken effect are legal.
func TestLeaseClockModelCatchesViolations(t *testing.T) {
	const L = int64(1000)
	op := func(cid int, o lmOp, w string, gen uint64, call, ret int64, out lmOut) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: lmIn{Op: o, Worker: w, Gen: gen, L: L}, Output: out, Call: call, Return: ret}
	}
	acq := func(gen uint64, t int64, taken bool) lmOut {
		return lmOut{OK: true, T: t, Gen: gen, Issued: t, Exp: t + L, Taken: taken}
	}
	at := func(t int64) lmOut { return lmOut{OK: true, T: t} }
	refusedAt := func(t int64) lmOut { return lmOut{T: t} }
	unknown := lmOut{Unknown: true}
	inf := lmInf
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"acquire, work, release, acquire", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRequest, "a", 1, 2, 3, at(200)), op(1, lmSpend, "a", 1, 4, 5, at(300)),
			op(1, lmRelease, "a", 1, 6, 7, at(400)), op(2, lmAcquire, "b", 0, 8, 9, acq(2, 500, false))}, porcupine.Ok},
		{"take-over after the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(2, lmAcquire, "b", 0, 2, 3, acq(2, 1100, true))}, porcupine.Ok},
		{"take-over before the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(2, lmAcquire, "b", 0, 2, 3, acq(2, 1099, true))}, porcupine.Illegal},
		{"take-over reported as a plain acquire", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(2, lmAcquire, "b", 0, 2, 3, acq(2, 1200, false))}, porcupine.Illegal},
		{"generation reused", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRelease, "a", 1, 2, 3, at(200)), op(2, lmAcquire, "b", 0, 4, 5, acq(1, 300, false))}, porcupine.Illegal},
		{"generation skipped", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(2, 100, false))}, porcupine.Illegal},
		{"expiry not acquire time plus lease", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, lmOut{OK: true, T: 100, Gen: 1, Issued: 100, Exp: 100 + L + 1})}, porcupine.Illegal},
		{"spend at the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmSpend, "a", 1, 2, 3, at(1100))}, porcupine.Illegal},
		{"spend refused before the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmSpend, "a", 1, 2, 3, refusedAt(1099))}, porcupine.Illegal},
		{"renewal extends, then work past the first expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRenew, "a", 1, 2, 3, lmOut{OK: true, T: 900, Exp: 1900}),
			op(1, lmRequest, "a", 1, 4, 5, at(1500)), op(2, lmAcquire, "b", 0, 6, 7, lmOut{})}, porcupine.Ok},
		{"renewal after the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRenew, "a", 1, 2, 3, lmOut{OK: true, T: 1100, Exp: 2100})}, porcupine.Illegal},
		{"renewal stretching the lease", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRenew, "a", 1, 2, 3, lmOut{OK: true, T: 500, Exp: 1600})}, porcupine.Illegal},
		{"clock runs backwards", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 500, false)), op(1, lmRequest, "a", 1, 2, 3, at(400))}, porcupine.Illegal},
		{"renewal refused after a take-over was seen", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(2, lmAcquire, "b", 0, 2, 3, acq(2, 1200, true)),
			op(1, lmRenew, "a", 1, 4, 5, lmOut{})}, porcupine.Ok},
		{"a refused renewal means lapsed: no work at that generation after", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRenew, "a", 1, 2, 3, lmOut{}),
			op(1, lmRequest, "a", 1, 4, 5, at(900))}, porcupine.Illegal},
		{"held refused to another, then taken after the expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(2, lmAcquire, "b", 0, 2, 3, lmOut{}),
			op(2, lmAcquire, "b", 0, 4, 5, acq(2, 1100, true))}, porcupine.Ok},
		{"held refused after a known lapse", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmSpend, "a", 1, 2, 3, refusedAt(1200)),
			op(2, lmAcquire, "b", 0, 4, 5, lmOut{})}, porcupine.Illegal},
		{"lost acquire may have won: later work bounds its expiry", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, inf, unknown), op(2, lmAcquire, "b", 0, 2, 3, lmOut{}),
			op(3, lmRequest, "c", 9, 4, 5, refusedAt(5000)), op(2, lmAcquire, "b", 0, 6, 7, acq(2, 6000, true))}, porcupine.Ok},
		{"lost acquire: a take-over before any expiry it could have", []porcupine.Operation{
			op(3, lmRequest, "c", 9, 0, 1, refusedAt(5000)), op(1, lmAcquire, "a", 0, 2, inf, unknown),
			op(1, lmRequest, "a", 1, 3, 4, at(5100)), op(2, lmAcquire, "b", 0, 5, 6, acq(2, 5200, true))}, porcupine.Illegal},
		{"lost acquire: a take-over once its latest expiry passed", []porcupine.Operation{
			op(3, lmRequest, "c", 9, 0, 1, refusedAt(5000)), op(1, lmAcquire, "a", 0, 2, inf, unknown),
			op(1, lmRequest, "a", 1, 3, 4, at(5100)), op(2, lmAcquire, "b", 0, 5, 6, acq(2, 6100, true))}, porcupine.Ok},
		{"lost acquire: a take-over before its latest expiry, after the work", []porcupine.Operation{
			op(3, lmRequest, "c", 9, 0, 1, refusedAt(5000)), op(1, lmAcquire, "a", 0, 2, inf, unknown),
			op(1, lmRequest, "a", 1, 3, 4, at(5100)), op(2, lmAcquire, "b", 0, 5, 6, acq(2, 6050, true))}, porcupine.Ok},
		{"lost renewal may have extended", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRenew, "a", 1, 2, inf, unknown),
			op(1, lmRequest, "a", 1, 4, 5, at(1500))}, porcupine.Ok},
		{"acquired by a lost attempt, answered as it stands", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, lmOut{OK: true, Gen: 1, Issued: 100, Exp: 100 + L})}, porcupine.Ok},
		{"release refused after an earlier attempt released", []porcupine.Operation{
			op(1, lmAcquire, "a", 0, 0, 1, acq(1, 100, false)), op(1, lmRelease, "a", 1, 2, 3, lmOut{}),
			op(2, lmAcquire, "b", 0, 4, 5, acq(2, 300, false))}, porcupine.Ok},
	} {
		if got := porcupine.CheckOperationsTimeout(leaseClockModel, tc.h, 5*time.Second); got != tc.want {
			t.Errorf("%s: porcupine says %s, want %s", tc.name, got, tc.want)
		}
	}
}

// sortOps orders operations by call time (porcupine does not need it; the
// failure listing reads better).
func sortOps(ops []porcupine.Operation) {
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
}
