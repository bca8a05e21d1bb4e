package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/policy"
)

// Op is a command type. Values are stored in the raft log: append only,
// never renumber or reuse. Retired values: none.
type Op uint8

// Commands.
const (
	// OpRequest asks for a grant for one exact request.
	OpRequest Op = 1
	// OpSpend spends a grant (the attempt).
	OpSpend Op = 2
	// OpEffect reports the outcome of a spent grant.
	OpEffect Op = 3
	// OpRevoke bumps a revocation counter (and bars a worker).
	OpRevoke Op = 4
	// OpSetPolicy applies a policy document and moves the epoch.
	OpSetPolicy Op = 5
	// OpPublished confirms receipts up to Seq are in the stream.
	OpPublished Op = 6
	// OpReinstate lifts a worker's bar.
	OpReinstate Op = 7
	// OpSource registers a content source's descriptor.
	OpSource Op = 8
	// OpApprove approves an open review (an operator's command).
	OpApprove Op = 9
	// OpRaiseFormat raises the receipt format level to Format (see
	// ReceiptFormat); the leader proposes it once every voter's build
	// supports the level.
	OpRaiseFormat Op = 10
	// OpRefusalSummary records, as one receipt, how many requests of one
	// worker the leader's admission control refused (rate_limited) over a
	// window without proposing them. Refused below receipt format level 3.
	OpRefusalSummary Op = 11
	// OpOpenReview opens a review for an artifact (a worker of the
	// coordinator lane): Path, ContentDigest (the artifact's SHA-256),
	// Caption (the slug), Transition, Destination and ReviewerRole.
	// Refused below receipt format level 4, as are the two below.
	OpOpenReview Op = 12
	// OpDecideReview approves or rejects (Outcome "approve" or "reject")
	// the review ReviewID names (an id, a caption or a keep token): an
	// operator's or a reviewer's command.
	OpDecideReview Op = 13
	// OpReviewReply is a person's plain-text reply, as a chat gateway or
	// the operator relays it: Channel, Sender, ReplyAt and Text, decoded by
	// DecodeReply and bound to the live reviews the caller may decide.
	OpReviewReply Op = 14
	// Route ownership leases (route.go), from receipt format level 5.
	// OpRouteAcquire acquires Route for the caller (TTL: the lease asked
	// for; 0 = the route's max_ttl).
	OpRouteAcquire Op = 20
	// OpRouteRenew extends the caller's lease on Route (at RouteGen, if
	// set).
	OpRouteRenew Op = 21
	// OpRouteRelease ends the caller's lease on Route.
	OpRouteRelease Op = 22
	// OpRouteLapse records the lapse of Route's lease as a receipt; the
	// leader proposes it once it sees the lease past its expiry.
	OpRouteLapse Op = 23
	// OpRouteForget forgets Route's record once its lease has been free
	// for RouteRetention (the leader proposes it); from receipt format
	// level 7 (ReceiptFormatRouteRetention).
	OpRouteForget Op = 24
	// OpBreakGlass records an operator's break-glass case (CaseID,
	// GlassScope, TTL, Note as the reason) as a break_glass receipt, from
	// receipt format level 6 (ReceiptFormatBreakGlass). Evidence only: it
	// changes no authority.
	OpBreakGlass Op = 25
	// Fleets (fleet.go), from receipt format level 8 (ReceiptFormatFleet).
	// OpSpawn: the caller spawns a child worker Key in Lane with the
	// scope ScopeTools, ScopeClasses, ScopeTargets and lifetime TTL;
	// ParentLane is the lane a root caller runs in.
	OpSpawn Op = 30
	// OpRestore: the caller restored a checkpoint and starts a new
	// incarnation; the old one's grants are cancelled.
	OpRestore Op = 31
	// OpRespawn: an operator brings worker Key back in Lane under a new
	// incarnation, approval-blocked (Note: why).
	OpRespawn Op = 32
	// OpLift: an operator lifts worker Key's respawn block (Note: why).
	OpLift Op = 33
	// OpGrantSpend asks for a grant for one exact request and spends it
	// at once, in one log entry, for a caller about to run the call: the
	// request is decided exactly as an OpRequest (its fields are those of
	// OpRequest) and, if permitted, the grant is spent as an OpSpend with
	// the request's caller, digest, idempotency key, arguments and
	// resolution context. It writes the permit and the attempt as the two
	// receipts a request and then a spend would; a refusal at either step
	// is the answer. From receipt format level 11
	// (ReceiptFormatGrantSpend); below it the op is refused.
	OpGrantSpend Op = 34
	// OpEffectSource reports the outcome of a spent grant (GrantID,
	// Outcome, Verifier, as OpEffect) and registers the call's result as a
	// content source (SourceID, Session, Tool, Channel, Scope,
	// ContentDigest, Path, Origins, ModelMade, as OpSource) in one log
	// entry: the effect receipt, then the source receipt, each decided as
	// its own op would decide it. From receipt format level 11.
	OpEffectSource Op = 35
)

var opNames = map[Op]string{
	OpRequest: "request", OpSpend: "spend", OpEffect: "effect", OpRevoke: "revoke",
	OpSetPolicy: "set_policy", OpPublished: "published", OpReinstate: "reinstate",
	OpSource: "source", OpApprove: "approve", OpRaiseFormat: "raise_format",
	OpRefusalSummary: "refusal_summary", OpOpenReview: "open_review", OpDecideReview: "decide_review",
	OpReviewReply:  "review_reply",
	OpRouteAcquire: "route_acquire", OpRouteRenew: "route_renew", OpRouteRelease: "route_release",
	OpRouteLapse: "route_lapse", OpRouteForget: "route_forget",
	OpBreakGlass: "break_glass",
	OpSpawn:      "spawn", OpRestore: "restore", OpRespawn: "respawn", OpLift: "lift",
	OpGrantSpend: "grant_spend", OpEffectSource: "effect_source",
}

func (o Op) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command is one request to the state machine. Caller is the identity the
// transport established (a worker id or "operator:<name>"), never a value
// the client wrote in its payload.
type Command struct {
	Op       Op
	Caller   string
	GrantID  string // chosen by the proposing leader for OpRequest
	Lane     string
	Session  string
	Tool     string
	Digest   events.Hash // H(tool, canonical args), computed by the leader
	IdemKey  string
	TTL      int64 // requested lifetime (ns); 0 = the lane's
	Sources  []string
	Outcome  string
	Verifier string
	Key      string // counter key for OpRevoke; worker id for OpReinstate
	Policy   []byte // canonical policy document for OpSetPolicy
	Seq      uint64 // watermark for OpPublished

	// The call as the policy engine sees it (OpRequest; OpSpend for the
	// target-drift check): the canonical arguments flattened by the leader
	// (policy.FlattenArgs, a pure function of the arguments), the label the
	// caller showed a human for the target, the declared amount and byte
	// count, and the resolution context of a path target.
	Args        policy.Args
	TargetLabel string
	Amount      uint64
	HasAmount   bool
	Bytes       uint64
	Cwd         string
	Resolved    string

	// Provenance. OpSource carries a source descriptor: SourceID, the
	// Session and Tool above, Channel, Scope, ContentDigest (SHA-256 of
	// the raw content, never the content), Path, Origins (the sources a
	// derived source was computed from) and ModelMade (part of it traced
	// to nothing registered). OpRequest carries Traces: the worker's
	// account of which registered sources each argument field matched.
	SourceID      string
	Channel       string
	Scope         string
	ContentDigest events.Hash
	Path          string
	Origins       []string
	ModelMade     bool
	Traces        []Trace

	// OpApprove: the review approved, and the operator's note. TTL above
	// is how long the approval waits for the worker's request (0: the
	// default, DefaultApprovalTTL; at most MaxApprovalTTL).
	ReviewID string
	Note     string

	// OpRaiseFormat: the receipt format level asked for.
	Format uint64

	// OpRefusalSummary: Key is the worker, Tool which of its requests were
	// refused (grant, spend, effect or source), Amount how many, and Since
	// and Until the window (unix ns, on the proposing leader's clock).
	Since int64
	Until int64

	// Reviews (OpOpenReview, OpDecideReview, OpReviewReply, and OpRequest
	// naming an approved artifact review in ReviewID with the artifact's
	// current digest in ContentDigest). Caption is the review's slug,
	// Transition the step it authorizes, Destination "recipient:<r>" or
	// "class:<c>", ReviewerRole the role that may decide it. Roles are the
	// reviewer roles the transport established for the caller (never a
	// value the client wrote), as Caller is. Sender, Text and ReplyAt are a
	// plain-text reply as the transport received it (with Channel).
	Caption      string
	Transition   string
	Destination  string
	ReviewerRole string
	Roles        []string
	Sender       string
	Text         string
	ReplyAt      int64
	// Route ownership: the route an op or a grant request is about, and
	// the fencing generation the caller acts under (0: the current one).
	Route    string
	RouteGen uint64
	// OpBreakGlass: the case id and its scope (api.BreakGlassWorkerScope
	// and a worker id); TTL is its lifetime and Note its reason.
	CaseID     string
	GlassScope string
	// Fleets: a spawn's scope (tool patterns, consequence classes, target
	// patterns) and the lane a root parent spawns from.
	ScopeTools   []string
	ScopeClasses []string
	ScopeTargets []string
	ParentLane   string
	// UserKey is the public nkey of a spawned child's NATS user (receipt
	// format level 12): the spawn records it.
	UserKey string
}

// Trace is one argument field's provenance as the worker traced it: Field
// is the JSON pointer of a scalar leaf of the arguments, Covered says raw
// matches cover the whole value, Matches the sources it matched.
type Trace struct {
	Field   string
	Covered bool
	Matches []TraceMatch
}

// TraceMatch is one registered source a field matched, under which
// decoding (Transform) and URL part (Part); Whole says the source alone
// contains the entire raw value.
type TraceMatch struct {
	Source    string
	Transform string
	Part      string
	Whole     bool
	// Field and FieldWhole (receipt format 10): the field of the source's
	// structured result the value was found in (a JSON pointer), and
	// whether the value equals that field whole.
	Field      string
	FieldWhole bool
}

// Batch is one raft log entry: commands the leader coalesced, stamped with
// its wall clock (unix ns) and node id when it proposed them.
type Batch struct {
	Time     int64
	Node     string
	Commands []Command
}
