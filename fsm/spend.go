package fsm

import (
	"fmt"
	"slices"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Spends: Decide checks an OpSpend against its grant (liveness, grantee,
// digest, counters, target drift) and Evolve marks the grant spent.

func attemptEnvelope(g *grants.Grant) grants.Envelope {
	return grants.Envelope{
		Decision: grants.Permit, GrantID: g.ID, Epoch: g.Epoch, IssuedAt: g.IssuedAt,
		ExpiresAt: g.ExpiresAt, Seq: g.AttemptSeq, Kind: events.KindAttempt, Digest: g.Digest,
		Route: g.Route, RouteGen: g.RouteGen,
	}
}

func decideSpend(s *State, now int64, node string, c *Command) verdict {
	e := base(events.KindSpendRefused, now, node, c)
	e.GrantID, e.Worker, e.Digest, e.IdemKey, e.Epoch = c.GrantID, c.Caller, c.Digest, c.IdemKey, s.epoch
	g, ok := s.liveGrant(c.GrantID, now)
	if !ok {
		return record(deny(e, grants.ReasonUnknownGrant, "live grant", ""))
	}
	if grants.IsRetry(g, c.Caller, c.Digest, c.IdemKey) {
		return reply(attemptEnvelope(g))
	}
	e.RefSeq = g.PermitSeq
	in := grants.SpendInput{
		Now: now, Spender: c.Caller, Digest: c.Digest, IdemKey: c.IdemKey,
		Epoch: s.epoch, Counters: &s.counters, Drift: s.driftOf(g, c),
	}
	if r, missing := grants.CheckSpend(g, in); r != grants.ReasonNone {
		if r != grants.ReasonNotGrantee {
			e.ExpiresAt = g.ExpiresAt
		}
		detail := ""
		if r == grants.ReasonGrantRevoked {
			detail = s.incarnationDetail(g)
		}
		if r == grants.ReasonTargetDrift {
			e.Target, e.Cwd, e.Resolved = in.Drift, orString(c.Cwd, g.Cwd), orString(c.Resolved, g.Resolved)
			detail = "the grant bound " + g.Target
		}
		return record(deny(e, r, missing, detail))
	}
	e.Route, e.RouteGen = g.Route, g.RouteGen
	if stale, detail := s.routeStale(g, now); stale {
		e.ExpiresAt = g.ExpiresAt
		return record(deny(e, grants.ReasonOwnerStale, "live lease on route "+g.Route+" at generation "+fmt.Sprint(g.RouteGen), detail))
	}
	e.Kind = events.KindAttempt
	e.Decision = string(grants.Permit)
	e.Tool, e.Lane, e.Session = g.Tool, g.Lane, g.Session
	e.IssuedAt, e.ExpiresAt = g.IssuedAt, g.ExpiresAt
	e.Counters = slices.Clone(g.Counters)
	e.Target = g.Target
	return record(e)
}

// driftOf returns the canonical target a spend's call resolves to now,
// when it can be re-derived and differs from the bound one: the grant
// bound a target, the spend carried the call's arguments and presented the
// bound digest (any other call is a digest mismatch, not drift), and the
// policy in force can derive a target. The resolution context is the
// spend's where it names one, else the one bound at permit. "" means no
// drift was observed.
func (s *State) driftOf(g *grants.Grant, c *Command) string {
	if g.Target == "" || !c.Args.Carried || c.Digest != g.Digest || s.policy == nil {
		return ""
	}
	t, ok := s.policy.TargetOf(g.Worker, g.Lane, g.Tool, c.Args, orString(c.Cwd, g.Cwd), orString(c.Resolved, g.Resolved))
	if !ok || t == g.Target {
		return ""
	}
	return t
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// evolveAttempt marks a grant spent.
func (s *State) evolveAttempt(e *events.Event) {
	if g := s.grants[e.GrantID]; g != nil {
		g.Status, g.AttemptKey, g.AttemptSeq = grants.StatusSpent, e.IdemKey, e.Seq
		s.touchGrant(g.ID)
	}
}
