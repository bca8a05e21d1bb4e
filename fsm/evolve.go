package fsm

import (
	"fmt"
	"slices"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Evolve folds one sealed event into the state. It makes no judgement: it
// records what the event says. It returns an error only for an event that
// cannot belong to this state (broken chain, unknown kind, a policy that
// does not parse, a source event without an id or a known authority); the
// state is unchanged in that case.
func Evolve(s *State, e events.Event) error { return evolve(s, &e) }

// EvolveRef is Evolve for an event the caller holds by reference: the same
// fold, without a copy of the event (close to a kilobyte, which showed in
// replay profiles). It neither modifies nor keeps *e or its slices; the
// state keeps only strings of it, as with Evolve.
func EvolveRef(s *State, e *events.Event) error { return evolve(s, e) }

func evolve(s *State, e *events.Event) error {
	// The chain link, checked here rather than by Chain.Check, which
	// takes a copy of the event (Chain.Check still words the error).
	if e.Seq != s.chain.Seq+1 || e.Prev != s.chain.Head {
		return fmt.Errorf("%w: %v", ErrReplay, s.chain.Check(*e))
	}
	if !e.Kind.Known() {
		return fmt.Errorf("%w: seq %d has unknown kind %d", ErrReplay, e.Seq, e.Kind)
	}
	var pol *policy.Policy
	var lvl authority.Level
	switch e.Kind {
	case events.KindEpoch:
		p, err := policy.Parse(e.Policy)
		if err != nil {
			return fmt.Errorf("%w: seq %d: %v", ErrReplay, e.Seq, err)
		}
		pol = p
	case events.KindSource:
		l, err := checkSourceEvent(*e)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrReplay, err)
		}
		lvl = l
	}
	s.chain.Seq, s.chain.Head = e.Seq, e.Hash // Chain.Advance, without its copy of e
	s.advance(e.Time)

	switch e.Kind {
	case events.KindPermit:
		g := &grants.Grant{
			ID: e.GrantID, Node: e.Node, Worker: e.Worker, Lane: e.Lane, Session: e.Session,
			Tool: e.Tool, Digest: e.Digest, Epoch: e.Epoch, Counters: e.Counters,
			Sources: e.Sources, IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt,
			IdemKey: e.IdemKey, PermitSeq: e.Seq, Status: grants.StatusPermitted,
			Surface: e.Surface, Operation: e.Operation, Consequence: e.Consequence,
			Target: e.Target, TargetLabel: e.TargetLabel, Cwd: e.Cwd, Resolved: e.Resolved,
			LedgerKey: e.LedgerKey, Instrument: e.Instrument, InstrumentLeft: e.InstrumentLeft,
			Amount: e.Amount, Bytes: e.Bytes, Rules: e.Rules,
		}
		// Shared copies replace the event's lists (which the caller may
		// reuse) and repeated strings.
		s.intern.share(g)
		s.addGrant(g)
		s.charge(e)
		if e.ReviewID != "" {
			s.consumeApproval(*e)
		}
		if e.IdemKey != "" {
			r := &idemRecord{
				Tool: g.Tool, Digest: e.Digest, Seq: e.Seq, GrantID: g.ID, Epoch: e.Epoch,
				Until: retainUntil(g),
			}
			if len(e.Grounds) > 0 || e.ReviewID != "" {
				r.Answer = &idemAnswer{Grounds: slices.Clone(e.Grounds), ReviewID: e.ReviewID}
			}
			s.addIdem(idemID{g.Worker, g.IdemKey}, r, true)
		}
	case events.KindDeny, events.KindApprovalRequired:
		if e.IdemKey != "" {
			a := &idemAnswer{
				Reason: grants.Reason(e.Reason), Missing: e.Missing, Detail: e.Detail,
				Rules: slices.Clone(e.Rules), Grounds: slices.Clone(e.Grounds),
			}
			if e.Kind == events.KindApprovalRequired {
				a.Decision, a.ReviewID = grants.ApprovalRequired, e.ReviewID
			}
			r := &idemRecord{
				Tool: e.Tool, Digest: e.Digest, Seq: e.Seq, Epoch: e.Epoch,
				Until: addSat(e.Time, RetainMargin),
			}
			if !a.empty() {
				r.Answer = a
			}
			s.addIdem(idemID{e.Worker, e.IdemKey}, r, false)
		}
		if e.Kind == events.KindApprovalRequired && e.ReviewID != "" {
			s.addReview(&review{
				ID: e.ReviewID, Worker: s.intern.str(e.Worker), Lane: s.intern.str(e.Lane),
				Session: s.intern.str(e.Session), Tool: s.intern.str(e.Tool), Digest: e.Digest,
				Reason: s.intern.str(e.Reason), Seq: e.Seq, Until: addSat(e.Time, ReviewRetention),
			})
		}
	case events.KindApproval:
		s.evolveApproval(*e)
	case events.KindAttempt:
		if g := s.grants[e.GrantID]; g != nil {
			g.Status, g.AttemptKey, g.AttemptSeq = grants.StatusSpent, e.IdemKey, e.Seq
		}
	case events.KindEffect:
		if g := s.grants[e.GrantID]; g != nil {
			g.Status, g.Outcome, g.Verifier, g.EffectSeq = grants.StatusClosed, s.intern.str(e.Outcome), s.intern.str(e.Verifier), e.Seq
		}
	case events.KindRevoke:
		for _, c := range e.Counters {
			s.counters.Set(c.Key, c.Value)
			if scope, id, err := revocation.ParseKey(c.Key); err == nil && scope == revocation.ScopeWorker {
				s.barred[id] = true
				s.dropReviewsOf(id)
			}
		}
		for _, id := range e.Cancelled {
			if g := s.grants[id]; g != nil && g.Status == grants.StatusPermitted {
				g.Status, g.RevokedSeq = grants.StatusRevoked, e.Seq
			}
		}
	case events.KindReinstate:
		delete(s.barred, e.Worker)
	case events.KindSource:
		s.evolveSource(*e, lvl)
	case events.KindEpoch:
		// The digest of what is in force, computed as Restore computes it
		// (Decide's events carry the same value in PolicyDigest).
		s.epoch, s.policy, s.polDigest = e.Epoch, pol, events.Sum(pol.Canonical())
	case events.KindSpendRefused, events.KindEffectRefused:
		// Durable evidence only; no state beyond the clock and the chain.
	}
	// Decide only records entries that outlive the clock; an event from a
	// replayed stream may not. Forget those now, so that no state ever holds
	// an entry whose retention has passed (Restore relies on this).
	s.prune()
	return nil
}
