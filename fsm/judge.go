package fsm

import (
	"encoding/hex"
	"slices"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// decideJudged decides a well-formed grant request under a version 2
// policy: the policy engine judges it against the state's usage (effect
// ledger, preauthorization consumption, quota windows), and every answer —
// permit, approval_required or deny — is an event carrying the grounds.
// e is the request's deny event, filled in as far as Decide got.
//
// origins are the request's field provenance as the source registry knows
// it; the engine's provenance grounds go into the event whatever the
// answer. bound are the revocation counters a permit binds.
func decideJudged(s *State, now int64, e events.Event, c *Command, origins []policy.FieldOrigin, bound []events.Counter) verdict {
	req := policy.Request{
		Worker: c.Caller, Lane: c.Lane, Tool: c.Tool, Args: c.Args, Digest: c.Digest,
		Cwd: c.Cwd, Resolved: c.Resolved, Label: c.TargetLabel,
		Amount: c.Amount, HasAmount: c.HasAmount, Bytes: c.Bytes, TTL: c.TTL,
		Provenance: origins,
	}
	j := s.policy.Judge(&req, s, now)
	e.Rules = j.Rules
	e.Grounds = slices.Clone(j.Grounds)
	e.Surface, e.Operation, e.Consequence = j.Surface, j.Operation, j.Consequence
	e.Target, e.TargetLabel, e.Cwd, e.Resolved = j.Target, c.TargetLabel, j.Cwd, j.Resolved
	e.Amount, e.Bytes, e.LedgerKey = j.Amount, j.Bytes, j.LedgerKey
	switch j.Decision {
	case grants.Permit:
	case grants.ApprovalRequired:
		if pe, ok := s.approvedPermit(now, e, c, &j, bound); ok {
			return record(pe)
		}
		e.Kind = events.KindApprovalRequired
		e = deny(e, j.Reason, j.Missing, j.Detail)
		e.Decision = string(grants.ApprovalRequired)
		e.ReviewID = ReviewID(c.GrantID)
		return record(e)
	default:
		return record(deny(e, j.Reason, j.Missing, j.Detail))
	}
	e.Kind = events.KindPermit
	e.Decision = string(grants.Permit)
	e.GrantID = c.GrantID
	e.IssuedAt = now
	e.ExpiresAt = addSat(now, j.TTL)
	if j.NotAfter > 0 && j.NotAfter < e.ExpiresAt {
		// A grant never outlives the instrument that covered it.
		e.ExpiresAt = j.NotAfter
	}
	e.Instrument, e.InstrumentLeft = j.Instrument, j.InstrumentLeft
	e.Counters = bound
	return record(e)
}

// ReviewID is the stable id of the review an approval_required answer asks
// for, derived from the grant id the leader chose for the request: the
// same committed request always names the same review, on every replica.
func ReviewID(grantID string) string {
	sum := events.Sum([]byte("writ.review.v1\x00" + grantID))
	return "rv-" + hex.EncodeToString(sum[:10])
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
