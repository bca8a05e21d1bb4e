package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/policy"
)

// Evolve folds one sealed event into the state. It makes no judgement: it
// records what the event says. It returns an error only for an event that
// cannot belong to this state (broken chain, unknown kind, an event its
// kind's fields rule out (events.Event.StaticValidate), a policy that
// does not parse, a source event without an id or a known authority); the
// state is unchanged in that case.
func Evolve(s *State, e events.Event) error { return EvolveRef(s, &e) }

// EvolveRef is Evolve for an event the caller holds by reference: the same
// fold, without a copy of the event (close to a kilobyte, which showed in
// replay profiles). It neither modifies nor keeps *e or its slices; the
// state keeps only strings of it, as with Evolve.
func EvolveRef(s *State, e *events.Event) error {
	// Events from outside (a receipt stream being replayed or audited)
	// are validated as a whole before anything of them is folded. Apply
	// folds Decide's own events with evolve directly: those pass by
	// construction (the property tests check every one).
	if e.Kind.Known() {
		if err := e.StaticValidate(); err != nil {
			return fmt.Errorf("%w: %w", ErrReplay, err)
		}
	}
	return evolve(s, e)
}

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
		p, err := epochPolicy(e)
		if err != nil {
			return err
		}
		pol = p
	case events.KindSource:
		l, err := checkSourceEvent(*e)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrReplay, err)
		}
		lvl = l
	case events.KindSpawn, events.KindIncarnation:
		if err := checkFleetEvent(e); err != nil {
			return fmt.Errorf("%w: %v", ErrReplay, err)
		}
	}
	s.chain.Seq, s.chain.Head = e.Seq, e.Hash // Chain.Advance, without its copy of e
	s.advance(e.Time)

	switch e.Kind {
	case events.KindPermit:
		s.evolvePermit(e)
	case events.KindDeny, events.KindApprovalRequired:
		s.evolveRefusal(e)
	case events.KindApproval:
		s.evolveApproval(*e)
	case events.KindAttempt:
		s.evolveAttempt(e)
	case events.KindEffect:
		s.evolveEffect(e)
	case events.KindRevoke:
		s.evolveRevoke(e)
	case events.KindReinstate:
		s.evolveReinstate(e)
	case events.KindSource:
		s.evolveSource(*e, lvl)
	case events.KindEpoch:
		s.evolveEpoch(e, pol)
	case events.KindReviewOpened:
		s.evolveReviewOpened(e)
	case events.KindReviewApproved, events.KindReviewRejected, events.KindReviewConsumed,
		events.KindReviewSuperseded, events.KindReviewExpired:
		s.evolveReviewStatus(e)
	case events.KindReviewOrphaned:
		// Evidence: the reply is remembered, so that seeing it again
		// decides nothing.
		s.noteReply(e)
	case events.KindRouteAcquired, events.KindRouteTaken, events.KindRouteRenewed,
		events.KindRouteReleased, events.KindRouteLapsed, events.KindRouteForgotten:
		s.evolveRoute(e)
	case events.KindSpawn:
		s.evolveSpawn(e)
	case events.KindIncarnation:
		s.evolveIncarnation(e)
	case events.KindLift:
		s.evolveLift(e)
	case events.KindSpendRefused, events.KindEffectRefused, events.KindRefusalSummary, events.KindBreakGlass:
		// Durable evidence only; no state beyond the clock and the chain.
	}
	// Decide only records entries that outlive the clock; an event from a
	// replayed stream may not. Forget those now, so that no state ever holds
	// an entry whose retention has passed (Restore relies on this).
	s.prune()
	return nil
}
