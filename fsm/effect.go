package fsm

import (
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Effects: Decide records the outcome a verifier reports for a spent
// grant (or the conflict between two reports) and Evolve closes the grant.

func decideEffect(s *State, now int64, node string, c *Command) verdict {
	e := base(events.KindEffectRefused, now, node, c)
	e.GrantID, e.Worker, e.Outcome, e.Verifier = c.GrantID, c.Caller, c.Outcome, c.Verifier
	if !grants.ValidOutcome(c.Outcome) || c.Verifier == "" {
		return record(deny(e, grants.ReasonInvalidRequest, "outcome and verifier", "outcome must be confirmed, failed or unknown, and a verifier must be named"))
	}
	g, ok := s.liveGrant(c.GrantID, now)
	if !ok {
		return record(deny(e, grants.ReasonUnknownGrant, "live grant", ""))
	}
	if g.Worker != c.Caller {
		return record(deny(e, grants.ReasonNotGrantee, "grantee", ""))
	}
	e.RefSeq = g.AttemptSeq
	if g.Route != "" {
		// Recorded whatever the lease, but an effect reported once the
		// generation its grant bound has ended is marked stale: the
		// auditor never counts it as clean.
		e.Route, e.RouteGen = g.Route, g.RouteGen
		if stale, why := s.routeStale(g, now); stale {
			e.RouteStale = true
			e.Detail = "reported after its route generation ended: " + why
		}
	}
	switch g.Status {
	case grants.StatusPermitted, grants.StatusRevoked:
		// A refused report is no effect, so it is not a stale one either.
		e.RouteStale = false
		return record(deny(e, grants.ReasonNotSpent, "attempt", ""))
	case grants.StatusClosed:
		switch {
		case g.Outcome == c.Outcome, g.Outcome == grants.OutcomeContested, c.Outcome == grants.OutcomeUnknown:
			// Nothing new: a repeated outcome collapses into the recorded
			// one (whichever verifier repeats it: agreeing verifiers do
			// not contest each other), a contested grant stays contested,
			// and an unknown report adds nothing to a recorded outcome
			// (unknown after unknown from another verifier included).
			env := grants.Envelope{Decision: grants.Permit, GrantID: g.ID, Seq: g.EffectSeq, Kind: events.KindEffect, Outcome: g.Outcome}
			return reply(env)
		case g.Outcome == grants.OutcomeUnknown:
			// A later definite report resolves an unknown outcome.
		default:
			e.Kind = events.KindEffect
			e.Decision = string(grants.Permit)
			e.Outcome = grants.OutcomeContested
			e.Reason = string(grants.ReasonEffectConflict)
			e.Recovery = string(grants.RecoveryFor(grants.ReasonEffectConflict))
			e.Detail = joinDetail(c.Verifier+" reported "+c.Outcome+" after "+g.Verifier+" reported "+g.Outcome, e.Detail)
			e.Digest = g.Digest
			return record(e)
		}
	}
	e.Kind = events.KindEffect
	e.Decision = string(grants.Permit)
	e.Digest = g.Digest
	return record(e)
}

// evolveEffect closes a spent grant with its outcome.
func (s *State) evolveEffect(e *events.Event) {
	if g := s.grants[e.GrantID]; g != nil {
		g.Status, g.Outcome, g.Verifier, g.EffectSeq = grants.StatusClosed, s.intern.str(e.Outcome), s.intern.str(e.Verifier), e.Seq
		s.touchGrant(g.ID)
	}
}

// joinDetail joins two details with "; ", either of which may be empty.
func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}
