// Package audit checks a receipt stream's chain and invariants and folds it
// into a projection.
//
// A Verifier consumes the stream one event at a time, in sequence order,
// from sequence 1 (or from Options.From for a partial check). For each event
// it checks, in this order:
//
//  1. the bytes: canonical encoding and stored hash (Add only; AddEvent
//     trusts an event that came from events.Decode);
//  2. the stream: the JetStream sequence equals the event's own sequence;
//  3. the chain: the sequence is the previous one plus one and Prev is the
//     previous event's hash;
//  4. the kind is known and the control-plane time never goes backwards;
//  5. the grant invariants of DESIGN.md ("Auditor invariants"): every attempt
//     follows exactly one live permit for the same grant, grantee and
//     request digest; at most one attempt per grant; no attempt at or after
//     the grant's expiry, after a policy epoch change, or after a revocation
//     that moved a bound counter or cancelled the grant; every effect ties
//     to the grant's attempt and names its verifier; a permit that names
//     a review follows an approval event of that review for the same
//     worker, tool and request digest, before the approval expires and
//     outliving it by nothing, and uses it up;
//
// and then folds the event into an fsm.New state with fsm.Evolve, so that
// Digest is the projection digest the issuer's State.Digest must equal at
// the same sequence (api.Status.StateDigest, hex).
//
// Source receipts (kind source) register content sources: descriptors,
// the authority the issuer assigned and the revocation counters each
// recorded. The projection keeps the issuer's source registry from them
// (and forgets each source after fsm.SourceRetention, as the issuer does),
// so the registry is covered by the digest comparison. A permit binds the
// recorded counters of the sources its fields traced to, so an attempt
// after a revocation that moved one is attempt_after_revocation like any
// other bound counter.
//
// Verifier.Pipeline checks a stream read in bulk with the same result as
// Add: it decodes and hash-checks messages on a pool of goroutines and
// runs the checks and the fold above in order on one more, stopping at the
// first violation (by position) with nothing after it folded. NewPipeline
// does the same for any sequential fold, such as a bare fsm replay.
//
// The first violation stops the Verifier: it is returned by that Add and by
// every later one, and Summary describes the events before it. Every
// violation is a *Violation whose Code is one of the constants below.
//
// Approval receipts (kind approval) record an operator's approval of a
// review; the projection keeps the open reviews and live approvals the
// issuer keeps, so they too are covered by the digest comparison.
//
// # Violation codes
//
// Codes are a stable contract (scripts match on them); Codes is the same
// table in machine form.
//
//	code                        Seq is                    meaning
//	decode                      the bad message           the bytes are not a canonical version-1 event, or the stored hash does not match them (a flipped bit, a truncated message)
//	stream_seq_mismatch         the stream sequence       the message at this stream sequence carries a different event sequence (events were reordered, dropped or inserted before publishing)
//	seq_gap                     the expected sequence     the event is not the next one: a sequence is missing (deleted message) or repeated
//	chain_broken                the event                 Prev is not the hash of the previous event: this event or its predecessor was altered or replaced
//	unknown_kind                the event                 the kind is not one this build knows; the stream cannot be checked past it
//	invalid_event               the event                 the event carries a field its kind must not (a policy outside an epoch, usage facts outside a permit, both forms of a source descriptor, ...) or lacks one its kind must carry (a permit's grant id, an effect's outcome, ...): events.Event.StaticValidate
//	time_backwards              the event                 the control-plane time is earlier than the previous event's
//	duplicate_permit            the permit                a grant id was permitted while a grant with that id was still live
//	attempt_without_permit      the attempt               no live permit for the grant (never permitted, or forgotten after expiry), or the attempt names another permit sequence
//	not_grantee                 the attempt or effect     the worker is not the one the grant was minted for
//	attempt_digest_mismatch     the attempt               the request digest differs from the permit's
//	double_attempt              the second attempt        the grant was already attempted
//	attempt_after_expiry        the attempt               the attempt's time is at or after the permit's expires_at
//	attempt_after_epoch_change  the attempt               a policy epoch event came between permit and attempt (or the permit's epoch is not the current one)
//	attempt_after_revocation    the attempt               a revoke event moved a counter the permit bound, or listed the grant as cancelled, before the attempt
//	effect_without_attempt      the effect                the grant is not live, was never attempted, or the effect names another attempt sequence
//	effect_missing_verifier     the effect                the effect does not name the verifier that observed it
//	effect_bad_outcome          the effect                the outcome is not confirmed, failed, unknown or contested
//	permit_without_approval     the permit                the permit names a review (an approved call) but no earlier approval event of that review covers it: none, used, expired, revoked with its worker, for another worker, tool or digest, or expiring before the grant; for a decision record (review_approved), also rejected, superseded or expired
//	approval_not_consumed       the receipt after it      a permit used a review approved as a decision record and the next receipt is not that review's review_consumed, or a review_consumed follows no such permit
//	fold_failed                 the event                 fsm.Evolve refused the event (an epoch event whose policy does not parse, a source event without an id or a known authority)
//	state_digest_mismatch       the last event            the projection digest differs from the one expected (CheckDigest)
//	route_generation            the acquire               a route was acquired (route_acquired, route_taken) at a generation not above every earlier one of that route
//	route_double_owner          the acquire               a route was acquired while another worker's lease on it was live (not released, revoked or past its expiry)
//	route_not_owner             the route event           a renewal, release or lapse names another owner or generation than the route's lease, or a lease that had ended
//	attempt_after_route_ended   the attempt               the attempt is bound to a route generation that had ended: taken over, released, revoked or lapsed
//
// # Outcomes
//
// A grant's effects collapse to one outcome, as in the issuer: repeats of
// the current outcome collapse, "unknown" never replaces a definite outcome
// and is replaced by one, an event saying "contested" makes the grant
// contested, and two different definite outcomes make it contested even if
// no event says so. Summary counts grants by that outcome; a spent grant
// with no effect is unresolved, and stays unresolved after it is forgotten.
//
// # Memory
//
// A grant is tracked from its permit until the control-plane time reaches
// its expires_at + fsm.RetainMargin, exactly when the issuer forgets it; an
// attempt or effect after that is refused by the issuer as unknown_grant,
// so finding one in the stream is a violation whether or not the auditor
// still remembers the grant. Memory therefore follows live authority, not
// stream length. The projection (fsm.State) forgets on the same schedule.
package audit
