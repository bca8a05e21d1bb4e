// Package projection keeps a persisted projection of the receipt stream in
// a local bbolt file, so that an auditor can answer questions about the
// stream ("what authorized this effect?", "what did this worker do?",
// "which calls wait for a person?") without replaying it.
//
// A DB holds, in one file:
//
//   - the raw receipts, by sequence (the stream's own bytes, hash-checked
//     on the way in): every answer can be traced back to them;
//   - the issuer's state as an fsm snapshot at the projection's head,
//     so that Digest is fsm.State.Digest of the same stream, which must
//     equal the issuer's state_digest at the same sequence;
//   - indexes folded from the receipts: grants (permit, attempt, effects,
//     refusals against the grant, cancellation, collapsed outcome, the
//     route generation it bound, effects reported late under an ended
//     generation), reviews (approval_required, approval, the permit that
//     consumed it), routes (every lease: acquired or taken over, renewed,
//     released, lapsed, ended by a revocation, and the grants bound to it),
//     sources (registrations and refusals), refusals (deny, spend_refused,
//     effect_refused, approval_required, refusal_summary), revocation
//     counters moved and grants cancelled, epochs, and per-worker and
//     per-lane timelines;
//   - the head (sequence and hash) and the verification status of the
//     events checked by an audit.Verifier while projecting.
//
// Apply extends the projection by one receipt; it must be the next one
// (sequence head+1, prev equal to the head hash), otherwise Apply fails
// with ErrChain and the file is unchanged. Receipts are committed in
// batches (Config.CommitEvery, and Flush); each commit writes the fsm
// snapshot, the indexes and the head in one bbolt transaction, so a crash
// loses at most the receipts after the last commit and Open resumes from
// the committed head: catching up is asking the stream for head+1 onward.
//
// A kind this build does not know stops the projection with
// ErrUnknownKind before anything of that receipt is written: the file
// stays a correct projection of the stream up to the receipt before it.
// Indexing a new kind is one case in index.go's switch; until a kind has
// one, its receipts are kept raw and appear in the worker and lane
// timelines only.
//
// Verification: the receipts projected by one DB value are also checked by
// an audit.Verifier (chain, grant invariants). After a restart the Verifier
// starts at the committed head + 1, a partial check (see audit.Options).
// Status reports the sequence checks resumed from and the first violation;
// `auditor verify` is the complete check from sequence 1.
//
// IndexDigest hashes every index bucket (the raw receipts included, the
// meta bucket excluded), so that a rebuild from sequence 1 and an
// incremental projection can be compared byte for byte.
package projection
