package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Outcome is what Decide concluded for one command: either events to record
// (the first one is the answer) or, for a retry or a pure bookkeeping
// command, an answer that records nothing.
type Outcome struct {
	Events []events.Event
	Reply  *grants.Envelope
}

// verdict is what the decide functions conclude: Outcome without the
// heap. A command records at most one event, held here by value, so that
// Apply seals and folds it where it lies instead of allocating a slice for
// an event of close to a kilobyte per command.
type verdict struct {
	event events.Event
	reply *grants.Envelope // set for an answer that records nothing
}

func record(e events.Event) verdict { return verdict{event: e} }

func reply(env grants.Envelope) verdict { return verdict{reply: &env} }

// Decide judges one command against the state at control-plane time now.
// It does not modify s.
func Decide(s *State, now int64, node string, c Command) Outcome {
	v := decide(s, now, node, &c)
	if v.reply != nil {
		return Outcome{Reply: v.reply}
	}
	return Outcome{Events: []events.Event{v.event}}
}

// decide is Decide for a command the caller holds by reference (a command
// is over half a kilobyte); it neither modifies nor keeps *c.
func decide(s *State, now int64, node string, c *Command) verdict {
	switch c.Op {
	case OpRequest:
		return decideRequest(s, now, node, c)
	case OpSpend:
		return decideSpend(s, now, node, c)
	case OpEffect:
		return decideEffect(s, now, node, c)
	case OpRevoke:
		return decideRevoke(s, now, node, c)
	case OpSetPolicy:
		return decideSetPolicy(s, now, node, c)
	case OpReinstate:
		return decideReinstate(s, now, node, c)
	case OpSource:
		return decideSource(s, now, node, c)
	case OpApprove:
		return decideApprove(s, now, node, c)
	case OpPublished:
		// Apply moves the watermark before asking; the answer is the
		// watermark in force (a confirmation beyond the chain is capped).
		return reply(grants.Envelope{Decision: grants.Permit, Seq: s.published})
	}
	return reply(grants.Refuse(grants.ReasonInvalidRequest, "op", "unknown command "+c.Op.String()))
}

func base(kind events.Kind, now int64, node string, c *Command) events.Event {
	return events.Event{Kind: kind, Time: now, Node: node, Actor: c.Caller}
}

func deny(e events.Event, r grants.Reason, missing, detail string) events.Event {
	e.Decision = string(grants.Deny)
	e.Reason = string(r)
	e.Missing = missing
	e.Recovery = string(grants.RecoveryFor(r))
	e.Detail = detail
	return e
}

func decideRequest(s *State, now int64, node string, c *Command) verdict {
	e := base(events.KindDeny, now, node, c)
	e.Worker, e.Lane, e.Session, e.Tool = c.Caller, c.Lane, c.Session, c.Tool
	e.Digest, e.IdemKey, e.Epoch, e.Sources = c.Digest, c.IdemKey, s.epoch, c.Sources

	if c.IdemKey != "" {
		if r, ok := s.liveIdem(idemID{c.Caller, c.IdemKey}, now); ok {
			if r.Digest == c.Digest && r.Tool == c.Tool {
				return reply(s.requestAnswer(r))
			}
			e.IdemKey = "" // a conflicting reuse must not replace the original record
			return record(deny(e, grants.ReasonIdemConflict, "fresh idempotency_key",
				"this idempotency key was first used for a different request"))
		}
	}
	switch {
	case c.Caller == "" || c.Tool == "" || c.Lane == "" || c.GrantID == "" || c.Digest.IsZero():
		return record(deny(e, grants.ReasonInvalidRequest, "caller, lane, tool, grant id and digest", "request is missing a required field"))
	case c.TTL < 0:
		return record(deny(e, grants.ReasonInvalidRequest, "ttl", "ttl must not be negative"))
	case slices.Contains(c.Sources, ""):
		// "source/" is not a revocable counter key: a grant bound to it
		// could never be revoked through its source.
		return record(deny(e, grants.ReasonInvalidRequest, "sources", "a source id is empty"))
	case len(c.Traces) > 0 && !validTraces(c.Traces):
		field, detail := checkTraces(c.Traces)
		return record(deny(e, grants.ReasonInvalidRequest, field, detail))
	case s.hasLiveGrant(c.GrantID, now):
		return record(deny(e, grants.ReasonInvalidRequest, "unique grant id", "grant id already in use"))
	case s.barred[c.Caller]:
		return record(deny(e, grants.ReasonWorkerRevoked, "worker reinstated", "worker "+c.Caller+" is revoked"))
	case s.policy == nil:
		return record(deny(e, grants.ReasonDeniedByPolicy, "policy applied", "no policy has been applied yet"))
	}
	// Provenance, under every policy version: a field traced to a revoked
	// source refuses the request, and a permit binds what the traced
	// sources recorded.
	prov, refusal := s.traceProvenance(c.Caller, c.Traces, now)
	e.Sources = withSources(c.Sources, prov.ids)
	if refusal != nil {
		e.Sources = withSources(c.Sources, []string{refusal.source})
		e.Grounds = refusal.grounds
		return record(deny(e, refusal.reason, refusal.missing, refusal.detail))
	}
	var scratch [8]string // the keys of a request naming up to six sources, off the heap
	keys := append(scratch[:0], s.intern.counterKey(revocation.ScopeWorker, c.Caller), s.intern.counterKey(revocation.ScopeLane, c.Lane))
	for _, src := range c.Sources {
		keys = append(keys, s.intern.counterKey(revocation.ScopeSource, src))
	}
	bound := s.bindCounters(keys, prov.counters)
	if len(bound) > MaxGrantCounters {
		return record(deny(e, grants.ReasonInvalidRequest, "provenance", fmt.Sprintf(
			"the request would bind %d revocation counters; a grant may bind at most %d", len(bound), MaxGrantCounters)))
	}
	if s.policy.Version == policy.SchemaVersion {
		return decideJudged(s, now, e, c, prov.fields, bound)
	}
	v := s.policy.Evaluate(c.Caller, c.Lane, c.Tool)
	e.Rules = []string{v.Rule}
	if !v.Allowed {
		return record(deny(e, grants.Reason(v.Reason), v.Missing, ""))
	}
	ttl := int64(v.TTL)
	if c.TTL > 0 && c.TTL < ttl {
		ttl = c.TTL
	}
	if ttl < int64(policy.MinTTL) {
		ttl = int64(policy.MinTTL)
	}
	e.Kind = events.KindPermit
	e.Decision = string(grants.Permit)
	e.GrantID = c.GrantID
	e.IssuedAt = now
	e.ExpiresAt = addSat(now, ttl)
	e.Counters = bound
	return record(e)
}

// requestAnswer rebuilds the original answer to a request from its record.
func (s *State) requestAnswer(r *idemRecord) grants.Envelope {
	a := r.answer()
	if r.GrantID != "" {
		if g, ok := s.grants[r.GrantID]; ok {
			env := permitEnvelope(g)
			env.Grounds = slices.Clone(a.Grounds)
			env.ReviewID = a.ReviewID // the approval that covered it, if any
			return env
		}
	}
	env := grants.Refuse(a.Reason, a.Missing, a.Detail)
	env.Seq, env.Kind, env.Epoch, env.Rules, env.Digest = r.Seq, events.KindDeny, r.Epoch, slices.Clone(a.Rules), r.Digest
	env.Grounds = slices.Clone(a.Grounds)
	if a.Decision == grants.ApprovalRequired {
		env.Decision, env.Kind, env.ReviewID = grants.ApprovalRequired, events.KindApprovalRequired, a.ReviewID
	}
	return env
}

func permitEnvelope(g *grants.Grant) grants.Envelope {
	return grants.Envelope{
		Decision: grants.Permit, GrantID: g.ID, Epoch: g.Epoch, IssuedAt: g.IssuedAt,
		ExpiresAt: g.ExpiresAt, Seq: g.PermitSeq, Kind: events.KindPermit, Digest: g.Digest,
		Counters: slices.Clone(g.Counters), // the caller must not alias state
		Rules:    slices.Clone(g.Rules),
		Surface:  g.Surface, Operation: g.Operation, Consequence: g.Consequence,
		Target: g.Target, TargetLabel: g.TargetLabel, Instrument: g.Instrument,
		InstrumentLeft: g.InstrumentLeft, Amount: g.Amount, Bytes: g.Bytes, LedgerKey: g.LedgerKey,
	}
}

func attemptEnvelope(g *grants.Grant) grants.Envelope {
	return grants.Envelope{
		Decision: grants.Permit, GrantID: g.ID, Epoch: g.Epoch, IssuedAt: g.IssuedAt,
		ExpiresAt: g.ExpiresAt, Seq: g.AttemptSeq, Kind: events.KindAttempt, Digest: g.Digest,
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
		if r == grants.ReasonTargetDrift {
			e.Target, e.Cwd, e.Resolved = in.Drift, orString(c.Cwd, g.Cwd), orString(c.Resolved, g.Resolved)
			detail = "the grant bound " + g.Target
		}
		return record(deny(e, r, missing, detail))
	}
	e.Kind = events.KindAttempt
	e.Decision = string(grants.Permit)
	e.Tool, e.Lane, e.Session = g.Tool, g.Lane, g.Session
	e.IssuedAt, e.ExpiresAt = g.IssuedAt, g.ExpiresAt
	e.Counters = slices.Clone(g.Counters)
	e.Target = g.Target
	return record(e)
}

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
	switch g.Status {
	case grants.StatusPermitted, grants.StatusRevoked:
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
			e.Detail = c.Verifier + " reported " + c.Outcome + " after " + g.Verifier + " reported " + g.Outcome
			e.Digest = g.Digest
			return record(e)
		}
	}
	e.Kind = events.KindEffect
	e.Decision = string(grants.Permit)
	e.Digest = g.Digest
	return record(e)
}

func decideRevoke(s *State, now int64, node string, c *Command) verdict {
	scope, id, err := revocation.ParseKey(c.Key)
	if err != nil {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "key", err.Error()))
	}
	e := base(events.KindRevoke, now, node, c)
	e.Decision = string(grants.Permit)
	e.Counters = []events.Counter{{Key: c.Key, Value: s.counters.Get(c.Key) + 1}}
	if scope == revocation.ScopeWorker {
		e.Worker = id
		e.Cancelled = s.outstanding(id, now)
	}
	return record(e)
}

func decideReinstate(s *State, now int64, node string, c *Command) verdict {
	if c.Key == "" {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "worker", "worker id is required"))
	}
	if !s.barred[c.Key] {
		return reply(grants.Envelope{Decision: grants.Permit, Detail: "worker " + c.Key + " is not revoked"})
	}
	e := base(events.KindReinstate, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker = c.Key
	return record(e)
}

func decideSetPolicy(s *State, now int64, node string, c *Command) verdict {
	p, err := policy.Parse(c.Policy)
	if err != nil {
		// The state machine's answer names the first problem, as it always
		// has (its answers are pinned); the issuer refuses a bad document
		// before proposing it, with every problem listed.
		var ve *policy.ValidationError
		if errors.As(err, &ve) {
			err = ve.Problems[0]
		}
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "policy", err.Error()))
	}
	// The epoch event carries the canonical form and Evolve parses that, so
	// the canonical form must itself parse, to the same canonical form.
	// Otherwise Decide would emit an event Evolve refuses (for example a
	// document near the size limit whose canonical form, with HTML-escaped
	// or U+FFFD-replaced characters, is over it).
	canon := p.Canonical()
	if p2, err := policy.Parse(canon); err != nil || !bytes.Equal(p2.Canonical(), canon) {
		detail := "canonical form does not re-parse to itself"
		if err != nil {
			detail = "canonical form does not parse: " + err.Error()
		}
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "policy", detail))
	}
	e := base(events.KindEpoch, now, node, c)
	e.Decision = string(grants.Permit)
	e.Epoch = s.epoch + 1
	e.Policy = canon
	e.PolicyDigest = events.Sum(e.Policy)
	return record(e)
}

func (s *State) hasLiveGrant(id string, now int64) bool {
	_, ok := s.liveGrant(id, now)
	return ok
}
