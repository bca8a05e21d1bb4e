package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "regenerate events/testdata/golden from goldenEvents (review the diff: these bytes are kept forever)")

const goldenDir = "testdata/golden"

// t0 is 2026-01-01T00:00:00Z in unix nanoseconds on the control-plane clock.
const t0 int64 = 1767225600000000000

// goldenPolicy is a canonical policy document as an epoch event carries it.
const goldenPolicy = `{"version":1,"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"],"ttl":"2m0s"},"isolated":{"tools":["Read","Grep"],"ttl":"30s"},"specialist":{"tools":["Read","Edit","Bash"],"deny":["mcp__*"]}},"workers":{"w-cron-1":"isolated"}}`

// goldenEvents is one realistic event of every kind, in the order they are
// chained (seq 1..n). Together they set every field of Event at least once
// (TestGoldenCoversEveryField). Never edit an entry: the encoded bytes are a
// compatibility promise. Add new kinds or fields as new entries.
func goldenEvents() []Event {
	reqDigest := Sum([]byte("writ.request.v1 Bash {\"command\":\"go test ./...\"}"))
	polDigest := Sum([]byte(goldenPolicy))
	return []Event{
		{
			Kind: KindEpoch, RaftIndex: 3, Time: t0, Node: "issuer-a", Actor: "operator",
			Epoch: 1, Decision: "permit", Policy: []byte(goldenPolicy), PolicyDigest: polDigest,
		},
		{
			Kind: KindPermit, RaftIndex: 7, Time: t0 + 1_500_000_000, Node: "issuer-a",
			GrantID: "g-01JH6Z3Q8R", Worker: "w-coder-2", Lane: "specialist", Session: "s-7f3a",
			Tool: "Bash", Digest: reqDigest, Epoch: 1, Decision: "permit",
			IssuedAt: t0 + 1_500_000_000, ExpiresAt: t0 + 61_500_000_000, IdemKey: "req-42",
			Counters: []Counter{
				{Key: "lane/specialist", Value: 0},
				{Key: "source/doc-17", Value: 2},
				{Key: "worker/w-coder-2", Value: 1},
			},
			Rules: []string{"lanes.specialist.tools:Bash"}, Actor: "w-coder-2",
			Sources: []string{"doc-17", "issue-tracker"},
			Target:  "repo:writ-dev/writ", Consequence: "arbitrary_execution",
		},
		{
			Kind: KindDeny, RaftIndex: 8, Time: t0 + 2_000_000_000, Node: "issuer-b",
			Worker: "w-research-1", Lane: "isolated", Session: "s-91c2", Tool: "mcp__github__create_issue",
			Digest: Sum([]byte("deny request")), Epoch: 1, Decision: "deny", Reason: "denied_by_policy",
			Missing: "tool mcp__github__create_issue allowed in lane isolated", Recovery: "none",
			IdemKey: "req-43", Rules: []string{"lanes.isolated.tools"}, Actor: "w-research-1",
			Sources: []string{"web-3"},
		},
		{
			Kind: KindAttempt, RaftIndex: 9, Time: t0 + 3_000_000_000, Node: "issuer-a",
			GrantID: "g-01JH6Z3Q8R", Worker: "w-coder-2", Lane: "specialist", Session: "s-7f3a",
			Tool: "Bash", Digest: reqDigest, Epoch: 1, Decision: "permit",
			IssuedAt: t0 + 1_500_000_000, ExpiresAt: t0 + 61_500_000_000, IdemKey: "spend-42",
			RefSeq: 2, Actor: "w-coder-2",
			Counters: []Counter{
				{Key: "lane/specialist", Value: 0},
				{Key: "source/doc-17", Value: 2},
				{Key: "worker/w-coder-2", Value: 1},
			},
		},
		{
			Kind: KindSpendRefused, RaftIndex: 10, Time: t0 + 4_000_000_000, Node: "issuer-a",
			GrantID: "g-01JH6Z3Q8R", Worker: "w-coder-2", Digest: reqDigest, Epoch: 1,
			Decision: "deny", Reason: "already_spent", Missing: "unspent", Recovery: "reconcile_consumption",
			ExpiresAt: t0 + 61_500_000_000, IdemKey: "spend-43", RefSeq: 2, Actor: "w-coder-2",
		},
		{
			Kind: KindEffect, RaftIndex: 11, Time: t0 + 9_000_000_000, Node: "issuer-b",
			GrantID: "g-01JH6Z3Q8R", Worker: "w-coder-2", Digest: reqDigest, Decision: "permit",
			Outcome: "confirmed", Verifier: "ci-runner", RefSeq: 4, Actor: "w-coder-2",
		},
		{
			Kind: KindEffectRefused, RaftIndex: 12, Time: t0 + 9_500_000_000, Node: "issuer-b",
			GrantID: "g-unknown", Worker: "w-coder-2", Decision: "deny", Reason: "unknown_grant",
			Missing: "live grant", Recovery: "request_new_grant", Outcome: "failed", Verifier: "ci-runner",
			Actor: "w-coder-2", Detail: "no live grant has this id",
		},
		{
			Kind: KindRevoke, RaftIndex: 13, Time: t0 + 12_000_000_000, Node: "issuer-a",
			Worker: "w-coder-2", Decision: "permit", Actor: "operator",
			Counters:  []Counter{{Key: "worker/w-coder-2", Value: 2}},
			Cancelled: []string{"g-01JH6Z4A11", "g-01JH6Z4B22", ""},
		},
		{
			Kind: KindReinstate, RaftIndex: 14, Time: t0 + 20_000_000_000, Node: "issuer-a",
			Worker: "w-coder-2", Decision: "permit", Actor: "operator",
			Detail: "replacement starts read-only",
		},
		{
			Kind: KindApprovalRequired, RaftIndex: 15, Time: t0 + 21_000_000_000, Node: "issuer-a",
			Worker: "w-billing-1", Lane: "coordinator", Session: "s-a11c", Tool: "mcp__stripe__refund",
			Digest: Sum([]byte("refund request")), Epoch: 2, Decision: "approval_required",
			Reason: "preauth_exhausted", Missing: "preauthorizations.refunds-q3.cumulative",
			Recovery: "refresh_approval", IdemKey: "req-77", Actor: "w-billing-1",
			Rules:  []string{"lane:coordinator", "surface:payments", "boundary:class:outbound_send", "preauth:refunds-q3"},
			Target: "raw:ch_3PXq", Consequence: "outbound_send",
			ReviewID: "rv-6f1c2a9b0d3e4f5a6b7c", TargetLabel: "refund order 1042",
			Surface: "payments", Operation: "refund", Instrument: "refunds-q3",
			InstrumentLeft: "uses=3 amount=20", Amount: 150, Bytes: 48,
			LedgerKey: "w-billing-1|tool:mcp__stripe__refund raw:ch_3PXq",
			Cwd:       "/work/w-billing-1", Resolved: "/work/w-billing-1/orders/1042.json",
		},
		{
			Kind: KindSource, RaftIndex: 16, Time: t0 + 22_000_000_000, Node: "issuer-a",
			Worker: "w-billing-1", Session: "s-a11c", Decision: "permit", Actor: "w-billing-1",
			Sources: []string{"src-3b8e51c0a2d4", "src-19f0c2aa7e61", "src-77d2e0b4c913"},
			Channel: "derived", Authority: "evidence", Scope: "task",
			Target:        "path:/work/w-billing-1/notes/payees.md",
			Counters:      []Counter{{Key: "source/src-19f0c2aa7e61", Value: 0}, {Key: "source/src-77d2e0b4c913", Value: 1}},
			ContentDigest: Sum([]byte("payee notes")),
		},
		{
			Kind: KindDeny, RaftIndex: 17, Time: t0 + 23_000_000_000, Node: "issuer-a",
			Worker: "w-billing-1", Lane: "coordinator", Session: "s-a11c", Tool: "mcp__bank__send_money",
			Digest: Sum([]byte("send_money request")), Epoch: 2, Decision: "deny",
			Reason: "authority_too_low", Missing: "recipient traced to instruction",
			Recovery: "none", IdemKey: "req-78", Actor: "w-billing-1",
			Rules:   []string{"lane:coordinator", "surface:payments", "authority:payee-from-user"},
			Sources: []string{"src-3b8e51c0a2d4"},
			Grounds: []string{
				"field=recipient source=src-3b8e51c0a2d4 authority=evidence counter=source/src-3b8e51c0a2d4=0 transform=raw",
				"field=amount model_made authority=evidence",
			},
		},
		{
			Kind: KindApproval, RaftIndex: 18, Time: t0 + 30_000_000_000, Node: "issuer-a",
			Worker: "w-billing-1", Lane: "coordinator", Tool: "mcp__stripe__refund",
			Digest: Sum([]byte("refund request")), Decision: "permit", Actor: "operator",
			ReviewID: "rv-6f1c2a9b0d3e4f5a6b7c", ExpiresAt: t0 + 630_000_000_000,
			Detail: "confirmed with the customer by phone",
		},
		// Added with recorded usage facts: a permit that carries what its
		// fold charges (the ledger entry's end, the preauthorization
		// record's end, the quota windows).
		{
			Kind: KindPermit, RaftIndex: 19, Time: t0 + 31_000_000_000, Node: "issuer-a",
			GrantID: "g-01JH7A0K2M", Worker: "w-billing-1", Lane: "coordinator", Session: "s-a11c",
			Tool: "mcp__stripe__refund", Digest: Sum([]byte("refund request")), Epoch: 2, Decision: "permit",
			IssuedAt: t0 + 31_000_000_000, ExpiresAt: t0 + 91_000_000_000, IdemKey: "req-79", Actor: "w-billing-1",
			Counters: []Counter{{Key: "lane/coordinator", Value: 0}, {Key: "worker/w-billing-1", Value: 0}},
			Rules:    []string{"lane:coordinator", "surface:payments", "preauth:refunds-q3", "quota:refund-rate"},
			Target:   "raw:ch_3PXq", Consequence: "outbound_send", Surface: "payments", Operation: "refund",
			Instrument: "refunds-q3", InstrumentLeft: "uses=2 amount=5", Amount: 15,
			LedgerKey: "w-billing-1|tool:mcp__stripe__refund raw:ch_3PXq",
			Charged:   true, LedgerUntil: t0 + 631_000_000_000, InstrumentUntil: t0 + 86_400_000_000_000,
			Quotas: []QuotaWindow{
				{Key: "refund-rate/worker/w-billing-1", Start: t0, Until: t0 + 3_600_000_000_000},
				{Key: "refund-volume/lane/coordinator", Start: t0, Until: t0 + 86_400_000_000_000},
			},
		},
		// Added with source registration fields: a derived source with
		// its id, origins, path and model-made flag in fields of their own.
		{
			Kind: KindSource, RaftIndex: 20, Time: t0 + 32_000_000_000, Node: "issuer-a",
			Worker: "w-billing-1", Session: "s-a11c", Decision: "permit", Actor: "w-billing-1",
			SourceID: "src-5c0e9d21f4a8", Origins: []string{"src-19f0c2aa7e61", "src-77d2e0b4c913"},
			SourcePath: "/work/w-billing-1/notes/refunds.md", ModelMade: true,
			Channel: "derived", Authority: "evidence", Scope: "task",
			Counters:      []Counter{{Key: "source/src-19f0c2aa7e61", Value: 0}, {Key: "source/src-5c0e9d21f4a8", Value: 0}, {Key: "source/src-77d2e0b4c913", Value: 1}},
			ContentDigest: Sum([]byte("refund notes")),
		},
		// Added with refusal summaries: a worker's requests that admission
		// control refused without deciding, counted over one window.
		{
			Kind: KindRefusalSummary, RaftIndex: 21, Time: t0 + 34_000_000_000, Node: "issuer-a",
			Worker: "w-flood-1", Tool: "spend", Decision: "deny", Reason: "rate_limited", Missing: "admission",
			Recovery: "retry_later", Actor: "issuer:issuer-a", Amount: 1234,
			IssuedAt: t0 + 32_000_000_000, ExpiresAt: t0 + 33_000_000_000,
			Detail: "worker w-flood-1: 1234 spend requests refused as rate_limited between 2026-01-01T00:00:32Z and 2026-01-01T00:00:33Z",
		},
		// Added with reviews as decision records: an artifact put up for
		// review, approved by a plain-text reply kept verbatim, used by a
		// permit, a reply that bound nothing, a rejection, an approval
		// that lapsed and a version superseded by the next one.
		{
			Kind: KindReviewOpened, RaftIndex: 22, Time: t0 + 35_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Lane: "coordinator", Actor: "w-coord-1", Decision: "permit", Epoch: 1,
			ReviewID: "rv-5e1f0a2b3c4d5e6f7a8b", ExpiresAt: t0 + 3_635_000_000_000,
			ArtifactPath: "out/q3-report.pdf", ArtifactVersion: 2, ArtifactDigest: Sum([]byte("q3 report v2")),
			Caption: "q3-report", Transition: "review_ready->send", Destination: "recipient:cfo@example.com",
			ReviewerRole: "finance", Candidates: []string{"rv-0a1b2c3d4e5f6a7b8c9d"},
		},
		{
			Kind: KindReviewApproved, RaftIndex: 23, Time: t0 + 36_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Lane: "coordinator", Actor: "reviewer:dana", Decision: "permit", Epoch: 1,
			ReviewID: "rv-5e1f0a2b3c4d5e6f7a8b", RefSeq: 17, ExpiresAt: t0 + 936_000_000_000,
			Caption: "q3-report", ArtifactVersion: 2, ArtifactDigest: Sum([]byte("q3 report v2")),
			ReviewerRole: "finance", Counters: []Counter{{Key: "reviewer/dana", Value: 0}},
			ReplyChannel: "slack:#finance", ReplySender: "dana", ReplyAt: t0 + 35_900_000_000, ReplyText: "q3-report_v2_keep",
		},
		{
			Kind: KindReviewConsumed, RaftIndex: 24, Time: t0 + 37_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Lane: "coordinator", Tool: "send_email", Decision: "permit", GrantID: "g-0c1d2e3f",
			ReviewID: "rv-5e1f0a2b3c4d5e6f7a8b", RefSeq: 19, Caption: "q3-report", ArtifactVersion: 2,
			Transition: "review_ready->send",
		},
		{
			Kind: KindReviewOrphaned, RaftIndex: 25, Time: t0 + 38_000_000_000, Node: "issuer-a",
			Actor: "reviewer:dana", Decision: "deny", Missing: "live review", RefSeq: 18,
			ReplyChannel: "slack:#finance", ReplySender: "dana", ReplyAt: t0 + 37_900_000_000, ReplyText: "lgtm",
			Detail: "the reply binds to no live review dana may decide",
		},
		{
			Kind: KindReviewRejected, RaftIndex: 26, Time: t0 + 39_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Actor: "operator:root", Decision: "deny", ReviewID: "rv-6f2a1b3c4d5e6f7a8b9c",
			RefSeq: 20, Caption: "q4-plan", ArtifactVersion: 1, Detail: "numbers are stale",
		},
		{
			Kind: KindReviewExpired, RaftIndex: 27, Time: t0 + 40_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Decision: "deny", ReviewID: "rv-7a3b2c4d5e6f7a8b9c0d", RefSeq: 21,
			Caption: "bash", ArtifactVersion: 3, ExpiresAt: t0 + 39_500_000_000,
		},
		{
			Kind: KindReviewSuperseded, RaftIndex: 28, Time: t0 + 41_000_000_000, Node: "issuer-a",
			Worker: "w-coord-1", Decision: "deny", ReviewID: "rv-0a1b2c3d4e5f6a7b8c9d", RefSeq: 17,
			Caption: "q3-report", ArtifactVersion: 1, ArtifactDigest: Sum([]byte("q3 report v1")),
		},
		// Added with break-glass cases: an operator opens the payloads of
		// one worker's receipts to auditors for 30 minutes.
		{
			Kind: KindBreakGlass, RaftIndex: 22, Time: t0 + 35_000_000_000, Node: "issuer-a",
			Worker: "w-coder-2", Decision: "permit", Actor: "operator", CaseID: "inc-2026-0117",
			GlassScope: "worker:w-coder-2", IssuedAt: t0 + 35_000_000_000, ExpiresAt: t0 + 35_000_000_000 + 1_800_000_000_000,
			Detail: "payment to an unknown payee: need the exact targets",
		},
		// Added with route ownership leases: a cron worker acquires a
		// route, renews it, works under it (a permit and an attempt bound
		// to generation 1), its lease lapses, another worker takes the
		// route over at generation 2, the late effect of generation 1 is
		// recorded as stale, the new owner releases, and a revocation
		// ends a lease.
		{
			Kind: KindRouteAcquired, RaftIndex: 22, Time: t0 + 40_000_000_000, Node: "issuer-a",
			Worker: "w-cron-1", Lane: "isolated", Decision: "permit", Actor: "w-cron-1",
			Route: "inbox-triage@acme", RouteGen: 1, IssuedAt: t0 + 40_000_000_000, ExpiresAt: t0 + 70_000_000_000,
		},
		{
			Kind: KindRouteRenewed, RaftIndex: 23, Time: t0 + 50_000_000_000, Node: "issuer-a",
			Worker: "w-cron-1", Lane: "isolated", Decision: "permit", Actor: "w-cron-1",
			Route: "inbox-triage@acme", RouteGen: 1, IssuedAt: t0 + 40_000_000_000, ExpiresAt: t0 + 80_000_000_000,
		},
		{
			Kind: KindPermit, RaftIndex: 24, Time: t0 + 51_000_000_000, Node: "issuer-a",
			GrantID: "g-cron-0001", Worker: "w-cron-1", Lane: "isolated", Session: "s-cron", Tool: "Read",
			Digest: reqDigest, Epoch: 1, Decision: "permit", Actor: "w-cron-1",
			IssuedAt: t0 + 51_000_000_000, ExpiresAt: t0 + 81_000_000_000, IdemKey: "k-cron-1",
			Counters: []Counter{{Key: "lane/isolated", Value: 0}, {Key: "worker/w-cron-1", Value: 0}},
			Rules:    []string{"lane:isolated"}, Route: "inbox-triage@acme", RouteGen: 1,
		},
		{
			Kind: KindAttempt, RaftIndex: 25, Time: t0 + 52_000_000_000, Node: "issuer-a",
			GrantID: "g-cron-0001", Worker: "w-cron-1", Lane: "isolated", Session: "s-cron", Tool: "Read",
			Digest: reqDigest, Epoch: 1, Decision: "permit", Actor: "w-cron-1", IdemKey: "k-cron-1-spend",
			IssuedAt: t0 + 51_000_000_000, ExpiresAt: t0 + 81_000_000_000, RefSeq: 19,
			Counters: []Counter{{Key: "lane/isolated", Value: 0}, {Key: "worker/w-cron-1", Value: 0}},
			Route:    "inbox-triage@acme", RouteGen: 1,
		},
		{
			Kind: KindRouteLapsed, RaftIndex: 26, Time: t0 + 80_000_000_000, Node: "issuer-a",
			Worker: "w-cron-1", Decision: "permit", Actor: "issuer:issuer-a",
			Route: "inbox-triage@acme", RouteGen: 1, IssuedAt: t0 + 40_000_000_000, ExpiresAt: t0 + 80_000_000_000,
			Detail: "the lease of w-cron-1 at generation 1 lapsed at 2026-01-01T00:01:20Z",
		},
		{
			Kind: KindRouteTaken, RaftIndex: 27, Time: t0 + 81_000_000_000, Node: "issuer-a",
			Worker: "w-cron-2", Lane: "isolated", Decision: "permit", Actor: "w-cron-2",
			Route: "inbox-triage@acme", RouteGen: 2, IssuedAt: t0 + 81_000_000_000, ExpiresAt: t0 + 111_000_000_000,
			PrevOwner: "w-cron-1", PrevGen: 1,
		},
		{
			Kind: KindEffect, RaftIndex: 28, Time: t0 + 82_000_000_000, Node: "issuer-a",
			GrantID: "g-cron-0001", Worker: "w-cron-1", Outcome: "confirmed", Verifier: "hook:post-tool-use",
			Digest: reqDigest, Decision: "permit", Actor: "w-cron-1", RefSeq: 20,
			Route: "inbox-triage@acme", RouteGen: 1, RouteStale: true,
			Detail: "reported under route inbox-triage@acme generation 1, which ended (the route is at generation 2)",
		},
		{
			Kind: KindRouteReleased, RaftIndex: 29, Time: t0 + 90_000_000_000, Node: "issuer-a",
			Worker: "w-cron-2", Lane: "isolated", Decision: "permit", Actor: "w-cron-2",
			Route: "inbox-triage@acme", RouteGen: 2, IssuedAt: t0 + 81_000_000_000,
		},
		{
			Kind: KindRevoke, RaftIndex: 30, Time: t0 + 95_000_000_000, Node: "issuer-a", Actor: "operator",
			Decision: "permit", Worker: "w-cron-3", Counters: []Counter{{Key: "worker/w-cron-3", Value: 1}},
			Routes: []string{"nightly-backup"},
		},
		// Added with route retention: the released route's record is
		// forgotten a day after its last lease ended; the generation
		// high-water mark keeps its generation 2.
		{
			Kind: KindRouteForgotten, RaftIndex: 31, Time: t0 + 90_000_000_000 + 86_400_000_000_000, Node: "issuer-a",
			Worker: "w-cron-2", Lane: "isolated", Decision: "permit", Actor: "issuer:issuer-a",
			Route: "inbox-triage@acme", RouteGen: 2, IssuedAt: t0 + 81_000_000_000, ExpiresAt: t0 + 111_000_000_000,
			Detail: "forgot route inbox-triage@acme: generation 2 of w-cron-2 ended (released) at 2026-01-01T00:01:30Z; acquired again, it starts above generation 2",
		},
		// Added with fleets: a coordinator spawns a research child with a
		// narrowed scope, the child restores a checkpoint (a new
		// incarnation cancels the old one's grant), the parent is revoked
		// with its subtree in one entry, an operator respawns the child
		// approval-blocked and later lifts the block.
		{
			Kind: KindSpawn, RaftIndex: 32, Time: t0 + 86_500_000_000_000 + 100_000_000_000, Node: "issuer-a", Actor: "w-coord-1",
			Decision: "permit", Worker: "w-coord-1-research", Parent: "w-coord-1", ParentLane: "specialist", Lane: "isolated", Incarnation: 1,
			ScopeTools: []string{"Read", "WebFetch"}, ScopeClasses: []string{"local_read", "remote_query"},
			ScopeTargets: []string{"path:/srv/repo/*"}, IssuedAt: t0 + 86_500_000_000_000 + 100_000_000_000, ExpiresAt: t0 + 86_500_000_000_000 + 3_700_000_000_000,
		},
		{
			Kind: KindIncarnation, RaftIndex: 33, Time: t0 + 86_500_000_000_000 + 110_000_000_000, Node: "issuer-a", Actor: "w-coord-1-research",
			Decision: "permit", Worker: "w-coord-1-research", Incarnation: 2,
			Counters: []Counter{{Key: "incarnation/w-coord-1-research", Value: 2}}, Cancelled: []string{"g-research-7"},
		},
		{
			Kind: KindRevoke, RaftIndex: 34, Time: t0 + 86_500_000_000_000 + 120_000_000_000, Node: "issuer-a", Actor: "operator",
			Decision: "permit", Worker: "w-coord-1",
			Counters:  []Counter{{Key: "worker/w-coord-1", Value: 1}, {Key: "worker/w-coord-1-research", Value: 1}},
			Cancelled: []string{"g-coord-3", "g-research-8"}, Reviews: []string{"rv-g-coord-4"},
			Workers: []string{"w-coord-1", "w-coord-1-research"},
		},
		{
			Kind: KindIncarnation, RaftIndex: 35, Time: t0 + 86_500_000_000_000 + 130_000_000_000, Node: "issuer-a", Actor: "operator",
			Decision: "permit", Worker: "w-coord-1-research", Lane: "isolated", Incarnation: 3, Blocked: true,
			Counters: []Counter{{Key: "incarnation/w-coord-1-research", Value: 3}},
		},
		{
			Kind: KindLift, RaftIndex: 36, Time: t0 + 86_500_000_000_000 + 140_000_000_000, Node: "issuer-a", Actor: "operator",
			Decision: "permit", Worker: "w-coord-1-research", Detail: "incident inc-2026-0117 closed",
		},
		// Added with worker NATS credentials: a spawn names the public key
		// of the child's NATS user.
		{
			Kind: KindSpawn, RaftIndex: 37, Time: t0 + 86_500_000_000_000 + 150_000_000_000, Node: "issuer-a", Actor: "w-coord-2",
			Decision: "permit", Worker: "w-coord-2-build", Parent: "w-coord-2", ParentLane: "specialist", Lane: "isolated", Incarnation: 1,
			IssuedAt: t0 + 86_500_000_000_000 + 150_000_000_000, ExpiresAt: t0 + 86_500_000_000_000 + 1_950_000_000_000,
			UserKey: "UA5WUJ54Z23KILLCUOUNAKTPBVZWKMQVO4O6EQ5GHLAERIMLLHNCTYM5",
		},
	}
}

// goldenNames names each golden event's files: the kind's name, with
// "_2", "_3", ... for later events of the same kind.
func goldenNames(evs []Event) []string {
	seen := map[Kind]int{}
	out := make([]string, len(evs))
	for i, e := range evs {
		seen[e.Kind]++
		out[i] = e.Kind.String()
		if n := seen[e.Kind]; n > 1 {
			out[i] += fmt.Sprintf("_%d", n)
		}
	}
	return out
}

// goldenChain seals goldenEvents as one chain and returns the sealed events
// with their encodings.
func goldenChain() ([]Event, [][]byte) {
	var c Chain
	evs := goldenEvents()
	encs := make([][]byte, len(evs))
	for i := range evs {
		encs[i] = c.Append(&evs[i], nil)
	}
	return evs, encs
}

func goldenPath(name string) string { return filepath.Join(goldenDir, name) }

func formatHex(b []byte) []byte {
	s := hex.EncodeToString(b)
	var out bytes.Buffer
	for len(s) > 64 {
		out.WriteString(s[:64])
		out.WriteByte('\n')
		s = s[64:]
	}
	out.WriteString(s)
	out.WriteByte('\n')
	return out.Bytes()
}

func parseHex(t testing.TB, text []byte) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
	if err != nil {
		t.Fatalf("bad hex: %v", err)
	}
	return b
}

func renderJSON(t testing.TB, e Event) []byte {
	t.Helper()
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	return append(b, '\n')
}

// readGolden returns every golden encoding in testdata/golden keyed by the
// file's base name without extension.
func readGolden(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".hex")] = parseHex(t, text)
	}
	return out
}

func TestGoldenRewrite(t *testing.T) {
	if !*rewrite {
		t.Skip("run with -rewrite to regenerate the golden files")
	}
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	evs, encs := goldenChain()
	names := goldenNames(evs)
	for i := range evs {
		if err := os.WriteFile(goldenPath(names[i])+".hex", formatHex(encs[i]), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath(names[i])+".json", renderJSON(t, mustDecode(t, encs[i])), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("rewrote %d golden events in %s", len(evs), goldenDir)
}

// TestGoldenEncodingsUnchanged: the encoder still produces, byte for byte,
// the encodings stored in testdata/golden, and the directory holds exactly
// one encoding per known kind.
func TestGoldenEncodingsUnchanged(t *testing.T) {
	if *rewrite {
		t.Skip("rewriting")
	}
	stored := readGolden(t)
	evs, encs := goldenChain()
	names := goldenNames(evs)
	want := map[string]bool{}
	for i, name := range names {
		want[name] = true
		got, ok := stored[name]
		if !ok {
			t.Errorf("%s: no golden file (run go test ./events -run Golden -rewrite)", name)
			continue
		}
		if !bytes.Equal(got, encs[i]) {
			t.Errorf("%s: encoding drifted from the golden file:\n got  %x\n want %x", name, encs[i], got)
		}
	}
	for name := range stored {
		if !want[name] {
			t.Errorf("%s.hex: golden file has no entry in goldenEvents", name)
		}
	}
	var kinds []string
	for k := range kindNames {
		if !want[k.String()] {
			kinds = append(kinds, k.String())
		}
	}
	sort.Strings(kinds)
	if len(kinds) > 0 {
		t.Errorf("known kinds without a golden event: %v", kinds)
	}
}

// TestGoldenDecode: every stored golden encoding decodes to the expected
// fields, carries the SHA-256 of its body as its hash, re-encodes to the
// identical bytes, renders to the stored JSON, and the files form one chain.
func TestGoldenDecode(t *testing.T) {
	if *rewrite {
		t.Skip("rewriting")
	}
	stored := readGolden(t)
	evs, _ := goldenChain()
	names := goldenNames(evs)
	var chain Chain
	for i, want := range evs {
		name := names[i]
		t.Run(name, func(t *testing.T) {
			b, ok := stored[name]
			if !ok {
				t.Fatalf("no golden file")
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Errorf("decoded fields differ:\n got  %+v\n want %+v", got, want)
			}
			// The hash field is the last 35 bytes: key 127<<3|2 (fa 07),
			// length 32 (20), digest. The digest covers everything before.
			const hashField = 3 + 32
			if len(b) < 1+hashField || !bytes.Equal(b[len(b)-hashField:len(b)-32], []byte{0xfa, 0x07, 0x20}) {
				t.Fatalf("encoding does not end with a hash field: %x", b)
			}
			if sum := Sum(b[:len(b)-hashField]); got.Hash != sum || !bytes.Equal(b[len(b)-32:], sum[:]) {
				t.Errorf("hash %s is not SHA-256 of the body %s", got.Hash, sum)
			}
			if re := got.Encode(); !bytes.Equal(re, b) {
				t.Errorf("re-encoding differs:\n got  %x\n want %x", re, b)
			}
			js, err := os.ReadFile(goldenPath(name) + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if r := renderJSON(t, got); !bytes.Equal(r, js) {
				t.Errorf("JSON rendering drifted:\n got  %s\n want %s", r, js)
			}
			if err := chain.Check(got); err != nil {
				t.Errorf("golden chain broken: %v", err)
			}
			chain.Advance(got)
		})
	}
}

// TestGoldenCoversEveryField: the golden events set every Event field at
// least once, so a field whose encoding changes cannot slip past the golden
// files. Adding a field to Event without a golden entry fails here.
func TestGoldenCoversEveryField(t *testing.T) {
	evs, _ := goldenChain()
	typ := reflect.TypeFor[Event]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		set := false
		for _, e := range evs {
			if !reflect.ValueOf(e).Field(i).IsZero() {
				set = true
				break
			}
		}
		if !set {
			t.Errorf("no golden event sets Event.%s", f.Name)
		}
	}
}
