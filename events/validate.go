package events

import "fmt"

// StaticValidate checks what can be checked of one event alone: that its
// kind is known, and that it carries the fields its kind must carry and
// none its kind must not (a decision its kind never takes, a policy
// outside an epoch event, usage facts outside a permit, source fields
// outside a source registration, ...). It does not look at other events
// (the chain, whether a grant exists): that is the fold's business.
//
// Every event Decide has written, in either form of the fields that
// changed shape (usage facts, source descriptors), passes; a decoded
// event that does not is refused where it would be folded (fsm.Evolve),
// with an error wrapping ErrInvalidEvent that names the first problem.
func (e *Event) StaticValidate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: seq %d %s: %s", ErrInvalidEvent, e.Seq, e.Kind, fmt.Sprintf(format, args...))
	}
	if e.Seq == 0 {
		return bad("no sequence number")
	}
	if int(e.Kind) >= len(kindDecision) || kindDecision[e.Kind] == "" {
		return bad("unknown kind %d", uint16(e.Kind))
	}
	// The decision follows from the kind, and the fold never reads it
	// (but for a source event's); a stream may omit it, not contradict it.
	if e.Decision != "" && e.Decision != kindDecision[e.Kind] {
		return bad("decision %q", e.Decision)
	}

	// Fields that belong to one kind only.
	if e.Kind != KindEpoch && (len(e.Policy) > 0 || !e.PolicyDigest.IsZero()) {
		return bad("a policy outside an epoch event")
	}
	if e.Kind != KindRevoke && e.Kind != KindIncarnation && len(e.Cancelled) > 0 {
		return bad("cancelled grants outside a revocation")
	}
	if e.Kind != KindPermit && (e.Charged || e.LedgerUntil != 0 || e.InstrumentUntil != 0 || len(e.Quotas) > 0) {
		return bad("usage facts outside a permit")
	}
	if !e.Charged && (e.LedgerUntil != 0 || e.InstrumentUntil != 0 || len(e.Quotas) > 0) {
		return bad("usage facts without charged")
	}
	if e.LedgerUntil != 0 && e.LedgerKey == "" {
		return bad("a ledger end without a ledger key")
	}
	if e.InstrumentUntil != 0 && e.Instrument == "" {
		return bad("an instrument end without an instrument")
	}
	for _, q := range e.Quotas {
		if q.Key == "" {
			return bad("a quota window without a key")
		}
	}
	hasSourceFields := e.SourceID != "" || len(e.Origins) > 0 || e.SourcePath != "" || e.ModelMade
	if hasSourceFields && e.Kind != KindSource && e.Kind != KindDeny {
		return bad("source fields outside a source registration")
	}
	if hasSourceFields {
		switch {
		case e.SourceID == "":
			return bad("source fields without a source id")
		case len(e.Sources) > 0:
			// One form or the other (see SourceDescriptor), never both.
			return bad("a source id and a packed source list")
		}
	}

	if e.Kind != KindSpawn && (e.Parent != "" || e.ParentLane != "" || e.UserKey != "" || len(e.ScopeTools) > 0 || len(e.ScopeClasses) > 0 || len(e.ScopeTargets) > 0) {
		return bad("spawn fields outside a spawn")
	}
	if e.Kind != KindSpawn && e.Kind != KindIncarnation && e.Incarnation != 0 {
		return bad("an incarnation outside a spawn or an incarnation event")
	}
	if e.Kind != KindIncarnation && e.Blocked {
		return bad("an approval block outside an incarnation event")
	}
	if e.Kind != KindBreakGlass && (e.CaseID != "" || e.GlassScope != "") {
		return bad("break-glass fields outside a break-glass event")
	}
	if e.Kind != KindRouteTaken && (e.PrevOwner != "" || e.PrevGen != 0) {
		return bad("a previous owner outside a take-over")
	}
	if e.Kind != KindRevoke && len(e.Routes) > 0 {
		return bad("ended routes outside a revocation")
	}
	if e.Kind != KindRevoke && (len(e.Reviews) > 0 || len(e.Workers) > 0) {
		return bad("revoked workers or cancelled reviews outside a revocation")
	}
	if e.RouteStale && e.Kind != KindEffect {
		return bad("a stale route generation outside an effect")
	}
	if (e.Route == "") != (e.RouteGen == 0) && e.Kind != KindDeny && e.Kind != KindApprovalRequired {
		// A refused request may name a route it could not bind.
		return bad("a route without a generation, or a generation without a route")
	}

	// What each kind must carry: what the fold keys its records on, so
	// that an event without it cannot be folded into a record nobody can
	// name (a grant without an id, an effect without an outcome, ...).
	switch e.Kind {
	case KindPermit:
		if e.GrantID == "" || e.Worker == "" {
			return bad("a permit names no grant or worker")
		}
	case KindApprovalRequired:
		if e.ReviewID == "" {
			return bad("approval_required names no review")
		}
	case KindAttempt:
		if e.GrantID == "" {
			return bad("an attempt names no grant")
		}
	case KindEffect:
		if e.GrantID == "" || e.Outcome == "" {
			return bad("an effect names no grant or outcome")
		}
	case KindRevoke:
		if len(e.Counters) == 0 {
			return bad("a revocation moves no counter")
		}
	case KindEpoch:
		if len(e.Policy) == 0 {
			return bad("an epoch event without a policy")
		}
	case KindReinstate:
		if e.Worker == "" {
			return bad("a reinstatement names no worker")
		}
	case KindSource:
		if id, _, _, _ := e.SourceDescriptor(); id == "" {
			return bad("a source event names no source")
		}
	case KindApproval:
		if e.ReviewID == "" || e.Worker == "" || e.Tool == "" {
			return bad("an approval names no review, worker or tool")
		}
	case KindRefusalSummary:
		if e.Worker == "" || e.Amount == 0 || e.ExpiresAt < e.IssuedAt {
			return bad("a refusal summary names no worker, counts nothing or ends before it starts")
		}
	case KindReviewOpened:
		if e.ReviewID == "" || e.Worker == "" || e.Caption == "" || e.ArtifactVersion == 0 || e.ArtifactDigest.IsZero() {
			return bad("an opened review names no review, worker, caption, version or artifact digest")
		}
	case KindReviewApproved, KindReviewRejected, KindReviewConsumed, KindReviewExpired, KindReviewSuperseded:
		if e.ReviewID == "" {
			return bad("a review receipt names no review")
		}
	case KindRouteAcquired, KindRouteRenewed, KindRouteReleased, KindRouteLapsed, KindRouteTaken, KindRouteForgotten:
		if e.Route == "" || e.Worker == "" || e.RouteGen == 0 {
			return bad("a route event names no route, owner or generation")
		}
		if e.Kind == KindRouteTaken && e.PrevGen >= e.RouteGen {
			return bad("a take-over at generation %d replaces generation %d", e.RouteGen, e.PrevGen)
		}
	case KindSpawn:
		if e.Worker == "" || e.Parent == "" || e.Lane == "" || e.Incarnation == 0 || e.ExpiresAt <= e.IssuedAt {
			return bad("a spawn names no child, parent, lane or incarnation, or ends before it starts")
		}
	case KindIncarnation:
		if e.Worker == "" || e.Incarnation == 0 || len(e.Counters) != 1 {
			return bad("an incarnation names no worker or incarnation, or binds no incarnation counter")
		}
	case KindLift:
		if e.Worker == "" || e.Actor == "" {
			return bad("a lift names no worker or operator")
		}
	case KindBreakGlass:
		if e.CaseID == "" || e.GlassScope == "" || e.Worker == "" || e.Actor == "" || e.Detail == "" || e.ExpiresAt <= e.IssuedAt {
			return bad("a break-glass case names no case, scope, worker, operator or reason, or ends before it starts")
		}
	}
	hasReply := e.ReplyChannel != "" || e.ReplySender != "" || e.ReplyText != "" || e.ReplyAt != 0
	if hasReply && e.Kind != KindReviewApproved && e.Kind != KindReviewRejected && e.Kind != KindReviewOrphaned {
		return bad("a reply outside a review decision or an orphaned reply")
	}
	if e.Kind == KindReviewOrphaned && !hasReply {
		return bad("an orphaned reply without the reply")
	}
	return nil
}

// kindDecisions is the decision each kind is written with.
var kindDecisions = map[Kind]string{
	KindPermit:           "permit",
	KindDeny:             "deny",
	KindAttempt:          "permit",
	KindSpendRefused:     "deny",
	KindEffect:           "permit",
	KindEffectRefused:    "deny",
	KindRevoke:           "permit",
	KindEpoch:            "permit",
	KindReinstate:        "permit",
	KindApprovalRequired: "approval_required",
	KindSource:           "permit",
	KindApproval:         "permit",
	KindRefusalSummary:   "deny",
	KindReviewOpened:     "permit",
	KindReviewApproved:   "permit",
	KindReviewRejected:   "deny",
	KindReviewConsumed:   "permit",
	KindReviewOrphaned:   "deny",
	KindReviewExpired:    "deny",
	KindReviewSuperseded: "deny",
	KindRouteAcquired:    "permit",
	KindRouteRenewed:     "permit",
	KindRouteReleased:    "permit",
	KindRouteLapsed:      "permit",
	KindRouteTaken:       "permit",
	KindRouteForgotten:   "permit",
	KindBreakGlass:       "permit",
	KindSpawn:            "permit",
	KindIncarnation:      "permit",
	KindLift:             "permit",
}

// kindDecision is kindDecisions indexed by kind ("" for a kind with
// none): StaticValidate runs for every replayed event, and a slice index
// costs less than two map lookups.
var kindDecision = func() []string {
	var n Kind
	for k := range kindDecisions {
		n = max(n, k+1)
	}
	out := make([]string, n)
	for k, d := range kindDecisions {
		out[k] = d
	}
	return out
}()
