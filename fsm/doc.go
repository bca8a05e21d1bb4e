// Package fsm is writ's deterministic state machine: it decides each
// committed command against the replicated state and folds the resulting
// events back into that state.
//
// The package is pure. It never reads a clock, draws a random number, does
// I/O or lets map iteration order reach its output: the same log gives
// byte-identical state and byte-identical events on every replica and on
// replay. Time comes from the batch (the leader's wall clock when it
// proposed) through the control-plane clock max(clock, batch time).
//
// Work is split in two, as in event sourcing:
//
//   - Decide(state, command) holds all judgement (policy, spend rules,
//     expiry) and returns events; it never changes state.
//   - Evolve(state, event) holds none: it only records what an event says.
//
// Apply runs Decide and then Evolve for each command of a batch, links the
// events into the hash chain and keeps them in an outbox until the leader
// confirms they are in the receipt stream. A combined command
// (OpGrantSpend, OpEffectSource; receipt format level 11, grantspend.go)
// is two commands Apply decides in turn, the second against the state the
// first one's event left. Folding the receipt stream with
// Evolve alone rebuilds the authority state, which is how an auditor checks
// the digest an issuer reports.
//
// Under a version 2 policy, requests are judged by the policy engine
// (policy.Judge) against the state's usage: the effect ledger,
// preauthorization consumption and quota windows. The leader forwards each
// call's arguments flattened (a pure function of the arguments); the
// engine extracts target, sinks and amount under the policy in force, so
// extraction cannot race a policy change. Permits name the instrument,
// amount, bytes and ledger key they consume and, from receipt format
// level 2 (see below), record when decided the usage facts the policy
// gave (when the ledger entry and the preauthorization record end, the
// quota windows charged), which is all Evolve needs to charge them: the
// fold asks no policy, except for permits without those facts
// (events.Event.Charged unset: the legacy form), which it charges from
// the policy in force as it always did.
// approval_required answers are events of their own kind.
// Version 1 policies are judged exactly as before.
//
// Provenance: workers register content sources (OpSource: a descriptor
// and a content digest, never content) in a replicated registry (the fold
// reads a source event's descriptor through events.Event.SourceDescriptor,
// from the source fields, which Decide writes from receipt format level 2,
// or packed in Sources, Target and Grounds, the legacy form); the
// state machine assigns each its authority (the policy's level for its
// channel, path or tool; the lowest of its origins for derived content)
// and records the revocation counters it was built from. A grant request
// traces argument fields to registered sources; Decide looks each up,
// refuses the request if one was revoked since it was recorded
// (source_revoked), passes the field origins to the policy engine and
// binds the recorded counters in the permit, so revoking any origin later
// refuses the spend. Sources are forgotten SourceRetention after
// registration; at most MaxSourcesPerWorker are live per worker.
//
// Approvals: an approval_required answer opens a review (ReviewID of the
// request's grant id), kept as long as the request's idempotency record.
// OpApprove, an operator's command, closes an open review with an approval
// event (an unknown or closed one is refused unknown_review, as an event)
// and records an approval for the exact call the review held: worker,
// tool and request digest, until its expiry on the control-plane clock.
// When the policy engine judges a later request for that call
// approval_required, the approval turns the answer into a permit that
// names the review (ReviewID, rule "approved:<id>"), never outlives the
// approval and uses it up; a denial, a quota or a revoked worker or
// source still refuses. Revoking a worker drops its reviews and
// approvals.
//
// Reviews as decision records (record.go, replytext.go; receipt format
// level 4): reviews carry a caption (<slug>_v<N>_review) and a keep
// token, are opened by approval_required answers or for an artifact
// (OpOpenReview), decided by operators and reviewers (OpDecideReview) or
// by a plain-text reply decoded by DecodeReply (OpReviewReply), and stay
// in the state with their status until their retention ends. An approval
// is bound to its use when the permit is minted (one review, the artifact
// digest, the reviewer's counter, the epoch, unused, unexpired), else the
// request is refused approval_unbindable. A command may record several
// receipts (a supersession, a batch reply, review_consumed after its
// permit): Apply chains them in order and the answer is the first's.
//
// Receipt format levels (format.go): a new receipt form is written only
// once the cluster has raised the level to it in the log (OpRaiseFormat,
// which the leader proposes when every voter's build supports the level),
// so that replicas of different builds never write different receipts for
// the same log. Level 1, the legacy form, is what every build wrote
// before levels existed; the level only goes up, is kept in snapshots and
// is, like the outbox, left out of Digest and out of the receipt stream.
//
// Refusal summaries (summary.go): the issuer's admission control answers a
// worker that keeps being refused rate_limited without proposing its
// requests, and proposes OpRefusalSummary once a window with their count;
// Decide records it as one refusal_summary event (from receipt format
// level 3; refused below it), which folds like any refusal: evidence only.
//
// Route ownership leases (route.go): a route is a named unit of recurring
// work the policy declares; OpRouteAcquire gives one worker a lease on it
// with a fencing generation (per route, strictly increasing, never
// reused) and an expiry on the control-plane clock; OpRouteRenew extends
// it, OpRouteRelease ends it, and the expiry queue ends it when the clock
// passes its expiry (OpRouteLapse records that as a receipt). The next
// acquire is a take-over naming the lease it replaced. A grant requested
// under a route binds the owner's generation, and its spend is refused
// owner_stale once that generation ended; a worker revocation ends the
// worker's leases in its own receipt. All of it from receipt format
// level 5; below it every route op is refused. From level 7 the leader
// forgets a record free for RouteRetention (OpRouteForget,
// route_forgotten), its generation kept in a state-wide high-water mark
// that a route with no record is acquired above, and a policy entry's
// max_records caps the records its routes hold.
//
// Break-glass cases (breakglass.go): an operator's OpBreakGlass (a case
// id, a worker scope, a lifetime and a reason) is recorded as one
// break_glass event from receipt format level 6 (refused below it). No
// decision depends on it, so it folds as evidence only; auditors read the
// case from the stream and open that worker's payload views until it
// expires.
//
// Fleets (fleet.go), from receipt format level 8: OpSpawn records a child
// worker whose scope (tools, consequence classes, targets, lifetime) is a
// subset of its parent's, never a coordinator, judged under every
// ancestor's lane, its grants binding every ancestor's worker counter;
// every grant binds its worker's incarnation counter, which OpRestore (a
// checkpoint restore) and OpRespawn move, cancelling the old incarnation's
// grants; a worker revocation revokes the whole spawn subtree in one
// entry, listing every cancelled handle; OpRespawn brings a worker back
// in one lane approval-blocked until an operator's OpLift.
//
// Layout: each feature's file holds both halves, the decide function and
// the evolve function for the events it emits (grant.go, spend.go,
// effect.go, revoke.go, epoch.go, source.go, review.go, record.go, format.go, summary.go,
// route.go, breakglass.go, fleet.go); state.go holds
// the state, its queries and its mutators; usage.go and expiry.go the
// bookkeeping permits and the clock drive; batch_codec.go and
// snapshot_codec*.go the log-entry and snapshot encodings.
//
// Business refusals (expired, already spent, revoked, ...) are results and
// events, identical on every replica, never Go errors. State is not safe for
// concurrent use; the raft adapter serialises access.
package fsm
