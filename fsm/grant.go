package fsm

import (
	"fmt"
	"slices"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Grant requests: Decide judges an OpRequest (under a version 1 policy
// here, under a version 2 policy in decideJudged) and Evolve records the
// permit, or the refusal and the review an approval_required answer opens.

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
	case len(c.Traces) > 0 && !validTraces(c.Traces, s.TypedTraces()):
		field, detail := checkTraces(c.Traces, s.TypedTraces())
		return record(deny(e, grants.ReasonInvalidRequest, field, detail))
	case s.hasLiveGrant(c.GrantID, now):
		return record(deny(e, grants.ReasonInvalidRequest, "unique grant id", "grant id already in use"))
	case s.barred[c.Caller]:
		return record(deny(e, grants.ReasonWorkerRevoked, "worker reinstated", "worker "+c.Caller+" is revoked"))
	case s.policy == nil:
		return record(deny(e, grants.ReasonDeniedByPolicy, "policy applied", "no policy has been applied yet"))
	}
	fleet := s.WritesFleet()
	if fleet {
		// A spawned or respawned worker: its spawn record first.
		if v, ok := s.fleetCheck(e, c, now); !ok {
			return v
		}
	}
	// Work under a route: only the live owner, at the generation it
	// names, and the permit binds that generation (route.go).
	var rg *policy.RouteGrant
	if c.Route != "" {
		g, gen, reason, detail := s.routeBinding(now, c)
		if s.WritesRoutes() {
			e.Route = c.Route
		}
		if reason != grants.ReasonNone {
			return record(deny(e, reason, "live lease on route "+c.Route, detail))
		}
		rg, e.RouteGen = &g, gen
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
	if fleet {
		keys = s.fleetKeys(c.Caller, keys)
	}
	bound := s.bindCounters(keys, prov.counters)
	if len(bound) > MaxGrantCounters {
		return record(deny(e, grants.ReasonInvalidRequest, "provenance", fmt.Sprintf(
			"the request would bind %d revocation counters; a grant may bind at most %d", len(bound), MaxGrantCounters)))
	}
	if s.policy.Version == policy.SchemaVersion {
		return decideJudged(s, now, node, e, c, prov.fields, bound, rg)
	}
	if c.ReviewID != "" && s.WritesReviews() {
		return record(deny(e, grants.ReasonInvalidRequest, "version 2 policy", "a request binds an artifact review only under a version 2 policy"))
	}
	v := s.policy.Evaluate(c.Caller, c.Lane, c.Tool)
	e.Rules = []string{v.Rule}
	if !v.Allowed {
		return record(deny(e, grants.Reason(v.Reason), v.Missing, ""))
	}
	if fleet {
		if fv, ok := s.fleetLegacy(e, c); !ok {
			return fv
		}
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
	e.ExpiresAt = AddSat(now, ttl)
	e.Counters = bound
	s.recordUsage(&e)
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
		Route: g.Route, RouteGen: g.RouteGen,
	}
}

func (s *State) hasLiveGrant(id string, now int64) bool {
	_, ok := s.liveGrant(id, now)
	return ok
}

// decideJudged decides a well-formed grant request under a version 2
// policy: the policy engine judges it against the state's usage (effect
// ledger, preauthorization consumption, quota windows), and every answer —
// permit, approval_required or deny — is an event carrying the grounds.
// e is the request's deny event, filled in as far as Decide got.
//
// origins are the request's field provenance as the source registry knows
// it; the engine's provenance grounds go into the event whatever the
// answer. bound are the revocation counters a permit binds.
//
// rg is what the request's route allows (nil for work under no route): a
// call of a consequence class the route does not allow is denied.
func decideJudged(s *State, now int64, node string, e events.Event, c *Command, origins []policy.FieldOrigin, bound []events.Counter, rg *policy.RouteGrant) verdict {
	req := policy.Request{
		Worker: c.Caller, Lane: c.Lane, Tool: c.Tool, Args: c.Args, Digest: c.Digest,
		Cwd: c.Cwd, Resolved: c.Resolved, Label: c.TargetLabel,
		Amount: c.Amount, HasAmount: c.HasAmount, Bytes: c.Bytes, TTL: c.TTL,
		Provenance: origins, Features: s.judgeFeatures(),
	}
	j := s.policy.Judge(&req, s, now)
	if s.WritesFleet() {
		if v, ok := s.fleetJudge(e, c, &j, &req, now); !ok {
			e.Rules = j.Rules
			return v
		}
	}
	e.Rules = j.Rules
	e.Grounds = slices.Clone(j.Grounds)
	e.Surface, e.Operation, e.Consequence = j.Surface, j.Operation, j.Consequence
	e.Target, e.TargetLabel, e.Cwd, e.Resolved = j.Target, c.TargetLabel, j.Cwd, j.Resolved
	e.Amount, e.Bytes, e.LedgerKey = j.Amount, j.Bytes, j.LedgerKey
	if rg != nil && j.Decision != grants.Deny && !rg.Allows(j.Consequence) {
		e.Rules = append(e.Rules, rg.Rule)
		return record(deny(e, grants.ReasonDeniedByPolicy, "route "+c.Route+" allowing "+j.Consequence, fmt.Sprintf(
			"work under route %s may spend %v, not %s (%s)", c.Route, rg.Classes(), j.Consequence, rg.Rule)))
	}
	if c.ReviewID != "" && s.WritesReviews() && j.Decision != grants.Deny {
		// A request that names the artifact review approving it.
		return s.decideArtifactUse(now, node, e, c, &j, bound)
	}
	switch j.Decision {
	case grants.Permit:
	case grants.ApprovalRequired:
		if pe, ok := s.approvedPermit(now, e, c, &j, bound); ok {
			return record(pe)
		}
		if s.WritesReviews() {
			if r, f, ok := s.heldApproval(now, c); ok {
				if f != nil {
					return s.unbindable(e, f, now, node, c)
				}
				return s.recordPermit(now, node, e, c, &j, bound, r)
			}
		}
		e.Kind = events.KindApprovalRequired
		e = deny(e, j.Reason, j.Missing, j.Detail)
		e.Decision = string(grants.ApprovalRequired)
		e.ReviewID = ReviewID(c.GrantID)
		if s.WritesReviews() {
			// A decision record: its caption, under the tool's slug.
			e.Caption = SlugFor(c.Tool)
			e.ArtifactVersion = s.nextVersion(e.Caption)
		}
		return record(e)
	default:
		return record(deny(e, j.Reason, j.Missing, j.Detail))
	}
	e.Kind = events.KindPermit
	e.Decision = string(grants.Permit)
	e.GrantID = c.GrantID
	e.IssuedAt = now
	e.ExpiresAt = AddSat(now, j.TTL)
	if j.NotAfter > 0 && j.NotAfter < e.ExpiresAt {
		// A grant never outlives the instrument that covered it.
		e.ExpiresAt = j.NotAfter
	}
	e.Instrument, e.InstrumentLeft = j.Instrument, j.InstrumentLeft
	e.Counters = bound
	s.recordUsage(&e)
	return record(e)
}

// evolvePermit records a permit: the grant, what it consumed, the approval
// it used up and the idempotency record of its request.
func (s *State) evolvePermit(e *events.Event) {
	// A permit with an idempotency key gets its grant and the request's
	// record in one allocation: both are forgotten by the same expiry
	// item (see addGrant), so neither keeps the other alive for long.
	var g *grants.Grant
	var rec *idemRecord
	var both *permitRecords
	if e.IdemKey != "" {
		both = new(permitRecords)
		g, rec = &both.grant, &both.idem
	} else {
		g = new(grants.Grant)
	}
	*g = grants.Grant{
		ID: e.GrantID, Node: e.Node, Worker: e.Worker, Lane: e.Lane, Session: e.Session,
		Tool: e.Tool, Digest: e.Digest, Epoch: e.Epoch, Counters: e.Counters,
		Sources: e.Sources, IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt,
		IdemKey: e.IdemKey, PermitSeq: e.Seq, Status: grants.StatusPermitted,
		Surface: e.Surface, Operation: e.Operation, Consequence: e.Consequence,
		Target: e.Target, TargetLabel: e.TargetLabel, Cwd: e.Cwd, Resolved: e.Resolved,
		LedgerKey: e.LedgerKey, Instrument: e.Instrument, InstrumentLeft: e.InstrumentLeft,
		Amount: e.Amount, Bytes: e.Bytes, Rules: e.Rules,
		Route: e.Route, RouteGen: e.RouteGen,
	}
	// Shared copies replace the event's lists (which the caller may
	// reuse) and repeated strings.
	s.intern.share(g)
	if both != nil {
		s.addPermit(both)
	} else {
		s.addGrant(g)
	}
	s.charge(e)
	if e.ReviewID != "" {
		s.consumeApproval(*e)
	}
	if rec != nil {
		*rec = idemRecord{
			Tool: g.Tool, Digest: e.Digest, Seq: e.Seq, GrantID: g.ID, Epoch: e.Epoch,
			Until: RetainUntil(g.ExpiresAt),
		}
		if len(e.Grounds) > 0 || e.ReviewID != "" {
			rec.Answer = &idemAnswer{Grounds: slices.Clone(e.Grounds), ReviewID: e.ReviewID}
		}
		s.addIdem(idemID{g.Worker, g.IdemKey}, rec, true)
	}
}

// permitRecords is a permit's grant and its request's idempotency record,
// allocated together. Its expiry item refers to both (see addPermit), so
// that prune recognises the record by its address instead of reading it.
// The record comes first: prune reads it next to the grant's id and
// expiry, in the same few cache lines.
type permitRecords struct {
	idem  idemRecord
	grant grants.Grant
}

// evolveRefusal records a refused request (deny or approval_required):
// the idempotency record of its answer and, for approval_required, the
// review it opens.
func (s *State) evolveRefusal(e *events.Event) {
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
			Until: AddSat(e.Time, RetainMargin),
		}
		if !a.empty() {
			r.Answer = a
		}
		s.addIdem(idemID{e.Worker, e.IdemKey}, r, false)
	}
	if e.Kind == events.KindApprovalRequired && e.ReviewID != "" {
		r := &review{
			ID: e.ReviewID, Worker: s.intern.str(e.Worker), Lane: s.intern.str(e.Lane),
			Session: s.intern.str(e.Session), Tool: s.intern.str(e.Tool), Digest: e.Digest,
			Reason: s.intern.str(e.Reason), Seq: e.Seq, Until: AddSat(e.Time, ReviewRetention),
		}
		if e.Caption != "" {
			// A decision record (receipt format level 4).
			r.Slug, r.Version, r.Epoch = s.intern.str(e.Caption), e.ArtifactVersion, e.Epoch
		}
		s.addReview(r)
	}
}
