package grants

// Decision is the top-level answer in an envelope.
type Decision string

// Decisions. Stable wire values.
const (
	Permit           Decision = "permit"
	Deny             Decision = "deny"
	ApprovalRequired Decision = "approval_required"
)

// Reason is a machine code saying why a request or spend was refused. The
// values are a stable wire contract: add new ones, never rename or reuse.
type Reason string

// Recovery is the one safe next step a refused caller may take.
type Recovery string

// Recovery classes. Stable wire values.
const (
	RecoverNone                 Recovery = "none"
	RecoverRequestNewGrant      Recovery = "request_new_grant"
	RecoverRefreshApproval      Recovery = "refresh_approval"
	RecoverRerenderArtifact     Recovery = "rerender_artifact"
	RecoverNarrowDestination    Recovery = "narrow_destination"
	RecoverReacquireOwnership   Recovery = "reacquire_ownership"
	RecoverReconcileConsumption Recovery = "reconcile_consumption"
	RecoverRetryAuthority       Recovery = "retry_authority_lookup"
	RecoverFixRequest           Recovery = "fix_request"
	RecoverRetryLater           Recovery = "retry_later"
)

// Reasons. Each has one row in Reasons below.
const (
	ReasonNone            Reason = ""
	ReasonExpired         Reason = "expired"
	ReasonEpochStale      Reason = "epoch_stale"
	ReasonSourceRevoked   Reason = "source_revoked"
	ReasonWorkerRevoked   Reason = "worker_revoked"
	ReasonLaneRevoked     Reason = "lane_revoked"
	ReasonDestRevoked     Reason = "destination_revoked"
	ReasonOwnerStale      Reason = "owner_stale"
	ReasonDigestMismatch  Reason = "digest_mismatch"
	ReasonAlreadySpent    Reason = "already_spent"
	ReasonNotGrantee      Reason = "not_grantee"
	ReasonUnknownGrant    Reason = "unknown_grant"
	ReasonNotSpent        Reason = "not_spent"
	ReasonGrantRevoked    Reason = "grant_revoked"
	ReasonDeniedByPolicy  Reason = "denied_by_policy"
	ReasonLaneMismatch    Reason = "lane_mismatch"
	ReasonIdemConflict    Reason = "idempotency_conflict"
	ReasonInvalidRequest  Reason = "invalid_request"
	ReasonUnauthorized    Reason = "unauthorized"
	ReasonIssuerUnavail   Reason = "issuer_unavailable"
	ReasonEffectConflict  Reason = "effect_conflict"
	ReasonUnknownVersion  Reason = "unsupported_version"
	ReasonRequestTooLarge Reason = "request_too_large"
	// Reasons of the policy engine (version 2 policy documents).
	ReasonShapeRule        Reason = "shape_rule"
	ReasonShapeReview      Reason = "shape_review"
	ReasonBoundaryCrossing Reason = "boundary_crossing"
	ReasonReviewRequired   Reason = "review_required"
	ReasonPreauthExhausted Reason = "preauth_exhausted"
	ReasonRepeatEffect     Reason = "repeat_effect"
	ReasonQuotaExhausted   Reason = "quota_exhausted"
	ReasonTargetDrift      Reason = "target_drift"
	ReasonTargetAmbiguous  Reason = "target_ambiguous"
	// Reasons of provenance checks.
	ReasonAuthorityTooLow   Reason = "authority_too_low"
	ReasonAuthorityReview   Reason = "authority_review"
	ReasonProtectedTransfer Reason = "protected_transfer"
	ReasonMemoryWrite       Reason = "memory_write_review"
	ReasonSourceConflict    Reason = "source_conflict"
	// Reasons of operator approvals.
	ReasonUnknownReview Reason = "unknown_review"
	// ReasonApprovalUnbindable: an approval exists but cannot be bound to
	// this use; Missing names the fact that failed (see MissingArtifact
	// and the other Missing* values).
	ReasonApprovalUnbindable Reason = "approval_unbindable"
	// Reasons of admission control.
	ReasonRateLimited Reason = "rate_limited"
	// Reasons of route ownership leases.
	ReasonRouteHeld       Reason = "route_held"
	ReasonNotOwner        Reason = "not_owner"
	ReasonUndeclaredRoute Reason = "undeclared_route"
	ReasonRouteLimit      Reason = "route_limit"
	// ReasonScopeWidens refuses a spawn (or a spawned worker's call)
	// that would reach past its parent's scope; Missing names the field.
	ReasonScopeWidens Reason = "scope_widens"
)

// The facts an approval_unbindable refusal names as missing: what did not
// hold when the approval was bound to its use.
const (
	MissingArtifactDigest = "artifact_digest" // the artifact is not the version approved
	MissingEpoch          = "epoch"           // the policy epoch moved since the approval
	MissingReviewer       = "reviewer"        // the approving reviewer lost the role
	MissingSpent          = "spent"           // the approval was already used
	MissingExpired        = "expired"         // the approval lapsed unused
	MissingAmbiguous      = "ambiguous"       // more than one live review could be meant
)

// ReasonInfo documents one reason code.
type ReasonInfo struct {
	Reason   Reason
	Recovery Recovery // the one safe next step
	Meaning  string
}

// Reasons is the single table of refusal codes, their recovery class and
// meaning. The README's envelope table is generated from the same facts; a
// test checks every Reason constant appears here exactly once.
var Reasons = []ReasonInfo{
	{ReasonExpired, RecoverRequestNewGrant, "the control-plane clock passed the grant's expiry"},
	{ReasonEpochStale, RecoverRequestNewGrant, "a new policy epoch was applied after the grant was minted"},
	{ReasonSourceRevoked, RecoverRequestNewGrant, "an origin source bound by the grant was revoked"},
	{ReasonWorkerRevoked, RecoverNone, "the worker was revoked; an operator must reinstate it"},
	{ReasonLaneRevoked, RecoverRequestNewGrant, "the lane's revocation counter moved after minting"},
	{ReasonDestRevoked, RecoverNarrowDestination, "the destination's revocation counter moved after minting"},
	{ReasonOwnerStale, RecoverReacquireOwnership, "the grant (or the lease being renewed) is bound to a route generation that ended: the route was taken over, released or revoked, or its lease lapsed; the detail names both generations"},
	{ReasonDigestMismatch, RecoverRequestNewGrant, "the presented request is not the one the grant was minted for"},
	{ReasonAlreadySpent, RecoverReconcileConsumption, "the grant was already spent under another idempotency key"},
	{ReasonNotGrantee, RecoverNone, "the caller is not the worker the grant was minted for"},
	{ReasonUnknownGrant, RecoverRequestNewGrant, "no live grant has this id (never minted, or aged out after expiry)"},
	{ReasonNotSpent, RecoverNone, "an effect was reported for a grant that was never spent"},
	{ReasonGrantRevoked, RecoverRequestNewGrant, "the grant was cancelled by a revocation"},
	{ReasonDeniedByPolicy, RecoverNone, "the policy does not allow this tool, surface or consequence class in this lane, or an explicit denial matched"},
	{ReasonLaneMismatch, RecoverNone, "the policy places this worker in a different lane"},
	{ReasonIdemConflict, RecoverFixRequest, "the idempotency key was already used for a different request"},
	{ReasonInvalidRequest, RecoverFixRequest, "the request is malformed; the detail names the field"},
	{ReasonUnauthorized, RecoverNone, "the caller may not use this subject"},
	{ReasonIssuerUnavail, RecoverRetryAuthority, "no issuer answered or the entry could not be committed; retry with the same idempotency key"},
	{ReasonEffectConflict, RecoverReconcileConsumption, "a different outcome was already recorded; the effect is now contested"},
	{ReasonUnknownVersion, RecoverFixRequest, "the request's version is not one this issuer speaks"},
	{ReasonRequestTooLarge, RecoverFixRequest, "the request exceeds the size limit"},
	{ReasonShapeRule, RecoverNone, "a shape rule denies this known-dangerous form of call"},
	{ReasonShapeReview, RecoverRefreshApproval, "a shape rule escalates this form of call to review (approval_required)"},
	{ReasonBoundaryCrossing, RecoverRefreshApproval, "the call crosses a protected boundary and no allowance or preauthorization covers it (approval_required)"},
	{ReasonReviewRequired, RecoverRefreshApproval, "the policy requires review for this consequence class or target (approval_required)"},
	{ReasonPreauthExhausted, RecoverRefreshApproval, "the covering preauthorization has no uses or cumulative amount left (approval_required)"},
	{ReasonRepeatEffect, RecoverRefreshApproval, "the same boundary-crossing effect was already permitted inside the ledger window (approval_required)"},
	{ReasonQuotaExhausted, RecoverRequestNewGrant, "a quota window is full; a new request succeeds once the window named in the detail has passed"},
	{ReasonTargetDrift, RecoverRequestNewGrant, "at spend the call's target canonicalizes to something other than the target the grant bound"},
	{ReasonTargetAmbiguous, RecoverNarrowDestination, "the call's target does not resolve to exactly one canonical target"},
	{ReasonAuthorityTooLow, RecoverNone, "a sink field traces only to content below the authority the policy requires (or to nothing: model-made); the grounds name the field and the sources"},
	{ReasonAuthorityReview, RecoverRefreshApproval, "as authority_too_low, where the policy lets the owner approve the call instead (approval_required)"},
	{ReasonProtectedTransfer, RecoverNone, "content from a protected or secret-bearing source would leave the declared domains through a sink field"},
	{ReasonMemoryWrite, RecoverRefreshApproval, "a write to a protected memory or instruction path is recorded as a draft for the owner (approval_required)"},
	{ReasonSourceConflict, RecoverFixRequest, "a source id was registered before with a different descriptor"},
	{ReasonUnknownReview, RecoverNone, "no open review has this id (never opened, already approved, or older than the hour a review stays open)"},
	{ReasonApprovalUnbindable, RecoverRefreshApproval, "an approval exists but does not bind to this use: the artifact changed (missing artifact_digest, recovery rerender_artifact), the policy epoch moved (epoch), the reviewer no longer holds the role (reviewer), it was already used (spent), it lapsed (expired) or more than one review could be meant (ambiguous)"},
	{ReasonRateLimited, RecoverRetryLater, "the worker's recent requests were refused faster than its admission rate allows; the request was not decided, and the refusals past the rate are recorded as counts (refusal_summary); retry once the rate has passed"},
	{ReasonRouteHeld, RecoverRetryLater, "another worker holds a live lease on the route; the detail names the owner, its generation and the time left on its lease"},
	{ReasonNotOwner, RecoverReacquireOwnership, "the caller holds no live lease on the route (never acquired, released, or at another generation)"},
	{ReasonUndeclaredRoute, RecoverNone, "the policy declares no such route, or does not let this worker or lane own it"},
	{ReasonRouteLimit, RecoverRetryLater, "the route's policy entry already holds its max_records route records (live leases and ended ones not yet forgotten); a free record is forgotten a day after its lease ended, or an operator raises the cap"},
	{ReasonScopeWidens, RecoverFixRequest, "a spawn asks for more than its parent may (tools, consequence classes, targets, lifetime, a coordinator lane), or a spawned worker's call falls outside its spawn scope; missing names the field that would widen"},
}

// RecoveryFor returns the recovery class of a reason (RecoverNone for
// unknown reasons and for ReasonNone).
func RecoveryFor(r Reason) Recovery {
	for _, ri := range Reasons {
		if ri.Reason == r {
			return ri.Recovery
		}
	}
	return RecoverNone
}
