package events

import "fmt"

// Kind says what happened. Values are part of the wire format: append only,
// never renumber, never reuse. Retired kinds: none yet.
type Kind uint16

const (
	// KindPermit: a grant was minted for one exact request.
	KindPermit Kind = 1
	// KindDeny: a grant request was refused.
	KindDeny Kind = 2
	// KindAttempt: a grant was spent; execution may start.
	KindAttempt Kind = 3
	// KindSpendRefused: a spend was refused; the grant is unchanged.
	KindSpendRefused Kind = 4
	// KindEffect: an effect report was recorded against a spent grant.
	KindEffect Kind = 5
	// KindEffectRefused: an effect report could not be tied to an attempt.
	KindEffectRefused Kind = 6
	// KindRevoke: a revocation counter moved (worker, source, lane, ...).
	KindRevoke Kind = 7
	// KindEpoch: a policy was applied and the policy epoch moved.
	KindEpoch Kind = 8
	// KindReinstate: a previously revoked worker may ask for grants again.
	KindReinstate Kind = 9
	// KindApprovalRequired: a grant request needs a review before it can be
	// permitted; the event names the review id, the reason and the grounds.
	KindApprovalRequired Kind = 10
	// KindSource: a content source was registered (descriptor only, never
	// content), so it has a replicated revocation counter.
	KindSource Kind = 11
	// KindApproval: an operator approved an open review; the worker's next
	// request for the same exact call (tool and digest) is permitted once,
	// until the approval expires.
	KindApproval Kind = 12
	// KindRefusalSummary: requests of one worker that admission control
	// refused (rate_limited) without deciding them, counted over a window:
	// Worker, Tool (which request: grant, spend, effect or source), Amount
	// (how many), IssuedAt and ExpiresAt (the window). Written only at
	// receipt format level 3 or above (fsm.ReceiptFormatSummaries).
	KindRefusalSummary Kind = 13
	// Review receipts, written only at receipt format level 4 or above
	// (fsm.ReceiptFormatReviews). A review is a durable decision record:
	// who asked for what (the request digest, or an artifact's path,
	// version and digest), which transition it would authorize, where to,
	// and which reviewer role may decide it.
	//
	// KindReviewOpened: a review was opened explicitly for an artifact.
	KindReviewOpened Kind = 14
	// KindReviewApproved: an operator or a reviewer approved a review (by
	// command or by a plain-text reply, kept verbatim).
	KindReviewApproved Kind = 15
	// KindReviewRejected: an operator or a reviewer rejected a review.
	KindReviewRejected Kind = 16
	// KindReviewConsumed: an approved review was used by the permit with
	// the sequence number RefSeq; it authorizes nothing more.
	KindReviewConsumed Kind = 17
	// KindReviewOrphaned: a plain-text reply bound to no live review (or
	// repeated one already seen): evidence only, it decides nothing.
	KindReviewOrphaned Kind = 18
	// KindReviewExpired: an approved review's approval lapsed before it
	// was used, seen when a request tried to use it.
	KindReviewExpired Kind = 19
	// KindReviewSuperseded: a new version of the artifact was put up for
	// review; the old review can no longer be decided or used.
	KindReviewSuperseded Kind = 20

	// Route ownership leases (kinds 23-27), written only at receipt
	// format level 5 or above (fsm.ReceiptFormatRoutes). Each names the
	// Route, the owner (Worker), the lease's fencing generation
	// (RouteGen) and, but for a release, its expiry (ExpiresAt) on the
	// control-plane clock.

	// KindRouteAcquired: a worker acquired a free route (released, or
	// never held) under a new generation.
	KindRouteAcquired Kind = 23
	// KindRouteRenewed: the owner extended its lease to ExpiresAt.
	KindRouteRenewed Kind = 24
	// KindRouteReleased: the owner ended its lease.
	KindRouteReleased Kind = 25
	// KindRouteLapsed: a lease's expiry passed without a renewal; the
	// route is free and the generation ended.
	KindRouteLapsed Kind = 26
	// KindRouteTaken: a worker acquired a route whose previous lease
	// lapsed or was ended by a revocation: PrevOwner and PrevGen name it.
	KindRouteTaken Kind = 27
	// KindRouteForgotten: a route's record, free (released, lapsed or
	// revoked) for the retention, was forgotten; RouteGen is its last
	// generation, which the state-wide generation high-water mark now
	// covers, so the route acquired again starts above it. Written only
	// at receipt format level 7 or above
	// (fsm.ReceiptFormatRouteRetention).
	KindRouteForgotten Kind = 28

	// KindBreakGlass: an operator opened a break-glass case: auditors may
	// show the payloads of one scope's receipts (targets, keys, notes),
	// which they otherwise show only as digests, until ExpiresAt. Actor
	// (who), CaseID, GlassScope ("worker:<id>"), Worker (the scope's
	// worker), Detail (the reason), IssuedAt and ExpiresAt. Written only
	// at receipt format level 6 or above (fsm.ReceiptFormatBreakGlass).
	KindBreakGlass Kind = 30

	// Fleets (kinds 31-33), written only at receipt format level 8 or
	// above (fsm.ReceiptFormatFleet).
	//
	// KindSpawn: a worker (Parent, also Actor) spawned a child worker
	// (Worker) in Lane, with its scope (ScopeTools, ScopeClasses,
	// ScopeTargets, absent for "what the parent may"), its lifetime
	// (IssuedAt, ExpiresAt: never past the parent's) and its first
	// Incarnation. Every grant the child gets binds the revocation
	// counters of its ancestors.
	KindSpawn Kind = 31
	// KindIncarnation: a worker's incarnation moved to Incarnation, by a
	// checkpoint restore (Actor the worker) or an operator's respawn
	// (Actor the operator, Lane the lane it respawns in, Blocked set: the
	// new incarnation starts approval-blocked). Counters carries the
	// worker's incarnation counter, which every grant binds, and
	// Cancelled the unspent grants of the old incarnation.
	KindIncarnation Kind = 32
	// KindLift: an operator lifted a respawned worker's approval block.
	KindLift Kind = 33
)

var kindNames = map[Kind]string{
	KindPermit:           "permit",
	KindDeny:             "deny",
	KindAttempt:          "attempt",
	KindSpendRefused:     "spend_refused",
	KindEffect:           "effect",
	KindEffectRefused:    "effect_refused",
	KindRevoke:           "revoke",
	KindEpoch:            "epoch",
	KindReinstate:        "reinstate",
	KindApprovalRequired: "approval_required",
	KindSource:           "source",
	KindApproval:         "approval",
	KindRefusalSummary:   "refusal_summary",
	KindReviewOpened:     "review_opened",
	KindReviewApproved:   "review_approved",
	KindReviewRejected:   "review_rejected",
	KindReviewConsumed:   "review_consumed",
	KindReviewOrphaned:   "review_orphaned",
	KindReviewExpired:    "review_expired",
	KindReviewSuperseded: "review_superseded",
	KindRouteAcquired:    "route_acquired",
	KindRouteRenewed:     "route_renewed",
	KindRouteReleased:    "route_released",
	KindRouteLapsed:      "route_lapsed",
	KindRouteTaken:       "route_taken",
	KindRouteForgotten:   "route_forgotten",
	KindBreakGlass:       "break_glass",
	KindSpawn:            "spawn",
	KindIncarnation:      "incarnation",
	KindLift:             "lift",
}

var kindSubjects = map[Kind]string{
	KindPermit:           SubjectPrefix + "permit",
	KindDeny:             SubjectPrefix + "deny",
	KindAttempt:          SubjectPrefix + "attempt",
	KindSpendRefused:     SubjectPrefix + "spend.refused",
	KindEffect:           SubjectPrefix + "effect",
	KindEffectRefused:    SubjectPrefix + "effect.refused",
	KindRevoke:           SubjectPrefix + "revoke",
	KindEpoch:            SubjectPrefix + "epoch",
	KindReinstate:        SubjectPrefix + "reinstate",
	KindApprovalRequired: SubjectPrefix + "approval.required",
	KindSource:           SubjectPrefix + "source",
	KindApproval:         SubjectPrefix + "approval",
	KindRefusalSummary:   SubjectPrefix + "refusal.summary",
	KindReviewOpened:     SubjectPrefix + "review.opened",
	KindReviewApproved:   SubjectPrefix + "review.approved",
	KindReviewRejected:   SubjectPrefix + "review.rejected",
	KindReviewConsumed:   SubjectPrefix + "review.consumed",
	KindReviewOrphaned:   SubjectPrefix + "review.orphaned",
	KindReviewExpired:    SubjectPrefix + "review.expired",
	KindReviewSuperseded: SubjectPrefix + "review.superseded",
	KindRouteAcquired:    SubjectPrefix + "route.acquired",
	KindRouteRenewed:     SubjectPrefix + "route.renewed",
	KindRouteReleased:    SubjectPrefix + "route.released",
	KindRouteLapsed:      SubjectPrefix + "route.lapsed",
	KindRouteTaken:       SubjectPrefix + "route.taken",
	KindRouteForgotten:   SubjectPrefix + "route.forgotten",
	KindBreakGlass:       SubjectPrefix + "break.glass",
	KindSpawn:            SubjectPrefix + "spawn",
	KindIncarnation:      SubjectPrefix + "incarnation",
	KindLift:             SubjectPrefix + "lift",
}

// kindKnown is kindNames as a table, for Known: replay asks it of every
// event, and a map lookup showed in its profile.
var kindKnown = func() (t [64]bool) {
	for k := range kindNames {
		t[k] = true // a kind past the table's end fails here, at init
	}
	return t
}()

// Known reports whether k is a kind this version of writ understands.
func (k Kind) Known() bool { return int(k) < len(kindKnown) && kindKnown[k] }

// String returns the kind's stable lower-case name, or "kind(N)".
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// KindFromString is the inverse of String for known kinds.
func KindFromString(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n == s {
			return k, true
		}
	}
	return 0, false
}

// MarshalText implements encoding.TextMarshaler.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Kind) UnmarshalText(b []byte) error {
	v, ok := KindFromString(string(b))
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownKind, b)
	}
	*k = v
	return nil
}
