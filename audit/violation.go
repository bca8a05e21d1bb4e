package audit

import "fmt"

// Violation codes. Stable wire values: add new ones, never rename or reuse.
// The package documentation and Codes describe each one.
const (
	CodeDecode                  = "decode"
	CodeStreamSeqMismatch       = "stream_seq_mismatch"
	CodeSeqGap                  = "seq_gap"
	CodeChainBroken             = "chain_broken"
	CodeUnknownKind             = "unknown_kind"
	CodeInvalidEvent            = "invalid_event"
	CodeTimeBackwards           = "time_backwards"
	CodeDuplicatePermit         = "duplicate_permit"
	CodeAttemptWithoutPermit    = "attempt_without_permit"
	CodeNotGrantee              = "not_grantee"
	CodeAttemptDigestMismatch   = "attempt_digest_mismatch"
	CodeDoubleAttempt           = "double_attempt"
	CodeAttemptAfterExpiry      = "attempt_after_expiry"
	CodeAttemptAfterEpochChange = "attempt_after_epoch_change"
	CodeAttemptAfterRevocation  = "attempt_after_revocation"
	CodeEffectWithoutAttempt    = "effect_without_attempt"
	CodeEffectMissingVerifier   = "effect_missing_verifier"
	CodeEffectBadOutcome        = "effect_bad_outcome"
	CodePermitWithoutApproval   = "permit_without_approval"
	CodeApprovalNotConsumed     = "approval_not_consumed"
	CodeFoldFailed              = "fold_failed"
	CodeStateDigestMismatch     = "state_digest_mismatch"
	// Route ownership leases (route.go).
	CodeRouteGeneration        = "route_generation"
	CodeRouteDoubleOwner       = "route_double_owner"
	CodeRouteNotOwner          = "route_not_owner"
	CodeAttemptAfterRouteEnded = "attempt_after_route_ended"
)

// CodeInfo documents one violation code.
type CodeInfo struct {
	Code    string
	Meaning string
}

// Codes is the table of violation codes, in the order the checks run.
var Codes = []CodeInfo{
	{CodeDecode, "the bytes are not a canonical version-1 event, or the stored hash does not match them"},
	{CodeStreamSeqMismatch, "the message at this stream sequence carries a different event sequence"},
	{CodeSeqGap, "the event is not the next one: a sequence is missing or repeated"},
	{CodeChainBroken, "prev is not the hash of the previous event: one of the two was altered or replaced"},
	{CodeUnknownKind, "the event kind is not one this build knows"},
	{CodeInvalidEvent, "the event carries a field its kind must not, or lacks one its kind must carry (events.Event.StaticValidate)"},
	{CodeTimeBackwards, "the control-plane time is earlier than the previous event's"},
	{CodeDuplicatePermit, "a grant id was permitted while a grant with that id was still live"},
	{CodeAttemptWithoutPermit, "no live permit for the grant, or the attempt names another permit"},
	{CodeNotGrantee, "an attempt or effect by a worker other than the grantee"},
	{CodeAttemptDigestMismatch, "the attempt's request digest differs from the permit's"},
	{CodeDoubleAttempt, "a second attempt for a grant"},
	{CodeAttemptAfterExpiry, "an attempt at or after the permit's expires_at"},
	{CodeAttemptAfterEpochChange, "a policy epoch change between permit and attempt"},
	{CodeAttemptAfterRevocation, "a revocation moved a bound counter or cancelled the grant before the attempt"},
	{CodeEffectWithoutAttempt, "an effect for a grant that is not live or was never attempted"},
	{CodeEffectMissingVerifier, "an effect that does not name its verifier"},
	{CodeEffectBadOutcome, "an effect outcome other than confirmed, failed, unknown or contested"},
	{CodePermitWithoutApproval, "a permit names a review that no earlier, unexpired, unused approval of the same call covers"},
	{CodeApprovalNotConsumed, "a permit that used a review approved as a decision record is not followed by that review's review_consumed receipt, or a review_consumed receipt follows no such permit"},
	{CodeFoldFailed, "the event cannot be folded into the projection (fsm.Evolve refused it)"},
	{CodeStateDigestMismatch, "the projection digest differs from the expected state digest"},
	{CodeRouteGeneration, "a route was acquired at a generation not above every earlier one of that route"},
	{CodeRouteDoubleOwner, "a route was acquired while another lease on it was live (not released, revoked or past its expiry)"},
	{CodeRouteNotOwner, "a renewal, release or lapse names another owner or generation than the route's lease, or a lease that had ended"},
	{CodeAttemptAfterRouteEnded, "an attempt bound to a route generation after that generation ended (taken over, released, revoked or lapsed)"},
}

// Violation is the first place a receipt stream breaks its chain or an
// invariant. It is an error.
type Violation struct {
	Seq    uint64 `json:"seq"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Error reads "violation at seq 42: double_attempt: grant g1 already
// attempted at seq 17".
func (v *Violation) Error() string {
	return fmt.Sprintf("violation at seq %d: %s: %s", v.Seq, v.Code, v.Detail)
}

func violation(seq uint64, code, format string, args ...any) *Violation {
	return &Violation{Seq: seq, Code: code, Detail: fmt.Sprintf(format, args...)}
}
