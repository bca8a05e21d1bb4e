package events

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"
)

// Version is the encoding version this package writes.
const Version = 1

// Counter is a revocation counter as bound by a grant or moved by a
// revocation: a key such as "worker/w1" or "source/s9" and its value.
type Counter struct {
	Key   string `json:"key"`
	Value uint64 `json:"value"`
}

// Event is one receipt. Which fields are set depends on Kind; every field is
// optional on the wire. Payloads carry ids and digests, never raw content or
// secrets (a policy document is the operator's trust root, not a secret).
type Event struct {
	Version      uint8     `json:"v"`
	Seq          uint64    `json:"seq"`
	Kind         Kind      `json:"kind"`
	RaftIndex    uint64    `json:"raft_index,omitempty"`
	Time         int64     `json:"time"`
	Prev         Hash      `json:"prev"`
	Node         string    `json:"node,omitempty"`
	GrantID      string    `json:"grant_id,omitempty"`
	Worker       string    `json:"worker,omitempty"`
	Lane         string    `json:"lane,omitempty"`
	Session      string    `json:"session,omitempty"`
	Tool         string    `json:"tool,omitempty"`
	Digest       Hash      `json:"digest,omitzero"`
	Epoch        uint64    `json:"epoch,omitempty"`
	Decision     string    `json:"decision,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Missing      string    `json:"missing,omitempty"`
	Recovery     string    `json:"recovery,omitempty"`
	IssuedAt     int64     `json:"issued_at,omitempty"`
	ExpiresAt    int64     `json:"expires_at,omitempty"`
	IdemKey      string    `json:"idempotency_key,omitempty"`
	Outcome      string    `json:"outcome,omitempty"`
	Verifier     string    `json:"verifier,omitempty"`
	RefSeq       uint64    `json:"ref_seq,omitempty"`
	Counters     []Counter `json:"counters,omitempty"`
	Cancelled    []string  `json:"cancelled,omitempty"`
	Rules        []string  `json:"rules,omitempty"`
	Target       string    `json:"target,omitempty"`
	Consequence  string    `json:"consequence,omitempty"`
	Actor        string    `json:"actor,omitempty"`
	Policy       []byte    `json:"policy,omitempty"`
	PolicyDigest Hash      `json:"policy_digest,omitzero"`
	Sources      []string  `json:"sources,omitempty"`
	Detail       string    `json:"detail,omitempty"`
	// Grounds of the policy engine (version 2 policy documents); see
	// grants.Envelope. Cwd and Resolved are the resolution context a path
	// target was canonicalized in (the grant binds them for the target
	// drift check at spend).
	ReviewID       string `json:"review_id,omitempty"`
	TargetLabel    string `json:"target_label,omitempty"`
	Surface        string `json:"surface,omitempty"`
	Operation      string `json:"operation,omitempty"`
	Instrument     string `json:"instrument,omitempty"`
	InstrumentLeft string `json:"instrument_left,omitempty"`
	Amount         uint64 `json:"amount,omitempty"`
	Bytes          uint64 `json:"bytes,omitempty"`
	LedgerKey      string `json:"ledger_key,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
	Resolved       string `json:"resolved,omitempty"`
	// Provenance. A source event (KindSource) registers one content
	// source: Sources[0] is its id and the rest its origins (a derived
	// source), Channel, Scope and ContentDigest describe it, Authority is
	// the level the issuer assigned, Target is the path or tool it came
	// from, Counters the origin revocation counters it recorded. Grounds
	// on a grant decision are one line per sink field that decided it:
	// "field=<f> source=<id> authority=<level> counter=<key>=<n>
	// transform=<t>" (see fsm).
	Channel       string   `json:"channel,omitempty"`
	Authority     string   `json:"authority,omitempty"`
	ContentDigest Hash     `json:"content_digest,omitzero"`
	Scope         string   `json:"scope,omitempty"`
	Grounds       []string `json:"grounds,omitempty"`
	// Usage facts (tags 50-53), on permits decided at receipt format
	// level 2 or above (fsm.ReceiptFormat): everything folding the
	// permit's consumption needs, recorded when the permit was decided,
	// so that Evolve, replay and the auditor read them here instead of
	// asking the policy in force. Charged says the permit carries them
	// (it may charge nothing); a permit without it is in the legacy form,
	// and its fold takes them from the policy in force, as it always did. LedgerUntil is when the effect-ledger entry of
	// LedgerKey is forgotten (the permit's time plus the ledger window);
	// InstrumentUntil when the consumption record of Instrument may be
	// (the preauthorization's expiry, or the grant's retention when the
	// policy names none); Quotas the quota windows the permit counts
	// against.
	Charged         bool          `json:"charged,omitempty"`
	LedgerUntil     int64         `json:"ledger_until,omitempty"`
	InstrumentUntil int64         `json:"instrument_until,omitempty"`
	Quotas          []QuotaWindow `json:"quotas,omitempty"`
	// Source registrations (tags 54-57), on source events and the
	// refusals of source registrations decided at receipt format level 2
	// or above: the source's id, its origins (sorted), the path it was
	// read from and whether part of it traced to nothing registered. The
	// legacy form packs these into Sources (id then origins), Target
	// ("path:<p>") and Grounds ("model_made"); both read to the same
	// source through SourceDescriptor, which every reader uses.
	SourceID   string   `json:"source_id,omitempty"`
	Origins    []string `json:"origins,omitempty"`
	SourcePath string   `json:"source_path,omitempty"`
	ModelMade  bool     `json:"model_made,omitempty"`
	// Reviews (tags 58-69), on review receipts written at receipt format
	// level 4 or above (fsm.ReceiptFormatReviews) and on the
	// approval_required answers that open a review at that level. Caption
	// is the review's slug and ArtifactVersion its version N (the human
	// caption is <slug>_v<N>_review, the keep token <slug>_v<N>_keep);
	// ArtifactPath and ArtifactDigest name the artifact an explicit review
	// covers (the SHA-256 of its bytes); Transition is the step the review
	// would authorize ("review_ready->send"), Destination where it leads
	// ("recipient:<r>" or "class:<c>") and ReviewerRole who may decide it.
	// A plain-text reply is kept verbatim: ReplyChannel, ReplySender,
	// ReplyAt (unix ns, as the transport stamped it) and ReplyText.
	// Candidates lists the captions a reply could have bound to.
	ArtifactPath    string   `json:"artifact_path,omitempty"`
	ArtifactVersion uint64   `json:"artifact_version,omitempty"`
	ArtifactDigest  Hash     `json:"artifact_digest,omitzero"`
	Caption         string   `json:"caption,omitempty"`
	Transition      string   `json:"transition,omitempty"`
	Destination     string   `json:"destination,omitempty"`
	ReviewerRole    string   `json:"reviewer_role,omitempty"`
	ReplyChannel    string   `json:"reply_channel,omitempty"`
	ReplySender     string   `json:"reply_sender,omitempty"`
	ReplyAt         int64    `json:"reply_at,omitempty"`
	ReplyText       string   `json:"reply_text,omitempty"`
	Candidates      []string `json:"candidates,omitempty"`
	// Route ownership (tags 70-75), written only at receipt format level
	// 5 or above (fsm.ReceiptFormatRoutes). Route names a unit of
	// recurring work and RouteGen the fencing generation of a lease on
	// it: on route events (the lease the event is about), and on the
	// grant events of work done under the route (permit, refusals,
	// attempt, spend refusal, effect: the generation the grant bound).
	// PrevOwner and PrevGen name the lease a take-over (route_taken)
	// replaced. Routes lists, on a worker revocation, the routes whose
	// leases it ended. RouteStale marks an effect reported for a grant
	// whose route generation had ended by then: recorded, never clean.
	Route      string   `json:"route,omitempty"`
	RouteGen   uint64   `json:"route_gen,omitempty"`
	PrevOwner  string   `json:"prev_owner,omitempty"`
	PrevGen    uint64   `json:"prev_gen,omitempty"`
	Routes     []string `json:"routes,omitempty"`
	RouteStale bool     `json:"route_stale,omitempty"`
	// Break-glass cases (tags 80-81), on break_glass events only: the
	// case's id and its scope ("worker:<id>").
	CaseID     string `json:"case_id,omitempty"`
	GlassScope string `json:"glass_scope,omitempty"`
	// Fleets (tags 82-90), written only at receipt format level 8 or
	// above (fsm.ReceiptFormatFleet). Parent names the worker that
	// spawned Worker (spawn events) and Incarnation the worker's
	// incarnation a spawn or an incarnation event starts. ScopeTools,
	// ScopeClasses and ScopeTargets are a spawned worker's scope: the tool
	// patterns, consequence classes and target patterns its grants may
	// have (absent: what its parent may). Blocked marks an incarnation
	// that starts approval-blocked (a respawn): every call it makes needs
	// a review until an operator lifts the block. On a worker revocation,
	// Workers lists every worker it revoked (the worker named, then its
	// descendants) and Reviews the open reviews and approvals it
	// cancelled.
	Parent       string   `json:"parent,omitempty"`
	Incarnation  uint64   `json:"incarnation,omitempty"`
	ScopeTools   []string `json:"scope_tools,omitempty"`
	ScopeClasses []string `json:"scope_classes,omitempty"`
	ScopeTargets []string `json:"scope_targets,omitempty"`
	Reviews      []string `json:"reviews,omitempty"`
	Blocked      bool     `json:"blocked,omitempty"`
	Workers      []string `json:"workers,omitempty"`
	// ParentLane is, on a spawn by a worker the fleet has no record of
	// (a root), the lane the parent spawned from: the child is judged
	// under it too.
	ParentLane string `json:"parent_lane,omitempty"`
	// UserKey is, on a spawn at receipt format level 12, the public nkey
	// of the child's NATS user: the issuer signs a credential for it and
	// revokes it on the NATS servers when the child is revoked.
	UserKey string `json:"user_key,omitempty"`
	Hash    Hash   `json:"hash"`
}

// QuotaWindow is one quota window a permit counts against: the quota key
// (quota id and scope), the window's start and when it ends.
type QuotaWindow struct {
	Key   string `json:"key"`
	Start int64  `json:"start"`
	Until int64  `json:"until"`
}

// Field tags. Append only; never renumber or reuse. Retired tags: none.
// Tags 34-44 were added with version 2 policy documents, 45-49 with
// provenance, 50-53 with recorded usage facts and 54-57 with source
// registration fields, 58-69 with reviews, 70-75 with route ownership
// leases, 80-81 with break-glass cases and 82-90 with fleets; a decoder that predates them skips them (they
// still count towards the hash).
const (
	tagSeq          = 1
	tagKind         = 2
	tagRaftIndex    = 3
	tagTime         = 4
	tagPrev         = 5
	tagNode         = 6
	tagGrantID      = 7
	tagWorker       = 8
	tagLane         = 9
	tagSession      = 10
	tagTool         = 11
	tagDigest       = 12
	tagEpoch        = 13
	tagDecision     = 14
	tagReason       = 15
	tagMissing      = 16
	tagRecovery     = 17
	tagIssuedAt     = 18
	tagExpiresAt    = 19
	tagIdemKey      = 20
	tagOutcome      = 21
	tagVerifier     = 22
	tagRefSeq       = 23
	tagCounters     = 24
	tagCancelled    = 25
	tagRules        = 26
	tagTarget       = 27
	tagConsequence  = 28
	tagActor        = 29
	tagPolicy       = 30
	tagPolicyDigest = 31
	tagSources      = 32
	tagDetail       = 33
	tagReviewID     = 34
	tagTargetLabel  = 35
	tagSurface      = 36
	tagOperation    = 37
	tagInstrument   = 38
	tagInstLeft     = 39
	tagAmount       = 40
	tagBytes        = 41
	tagLedgerKey    = 42
	tagCwd          = 43
	tagResolved     = 44
	tagChannel      = 45
	tagAuthority    = 46
	tagContentHash  = 47
	tagScope        = 48
	tagGrounds      = 49
	tagCharged      = 50
	tagLedgerUntil  = 51
	tagInstUntil    = 52
	tagQuotas       = 53
	tagSourceID     = 54
	tagOrigins      = 55
	tagSourcePath   = 56
	tagModelMade    = 57
	tagArtPath      = 58
	tagArtVersion   = 59
	tagArtDigest    = 60
	tagCaption      = 61
	tagTransition   = 62
	tagDestination  = 63
	tagReviewerRole = 64
	tagReplyChannel = 65
	tagReplySender  = 66
	tagReplyAt      = 67
	tagReplyText    = 68
	tagCandidates   = 69
	// Added with route ownership leases.
	tagRoute      = 70
	tagRouteGen   = 71
	tagPrevOwner  = 72
	tagPrevGen    = 73
	tagRoutes     = 74
	tagRouteStale = 75
	// Tags 76-79 are unassigned; this version skips them as unknown
	// (gapTag).
	// Added with break-glass cases.
	tagCaseID     = 80
	tagGlassScope = 81
	// Added with fleets (spawn, incarnations, subtree revocation).
	tagParent       = 82
	tagIncarnation  = 83
	tagScopeTools   = 84
	tagScopeClasses = 85
	tagScopeTargets = 86
	tagReviews      = 87
	tagBlocked      = 88
	tagWorkers      = 89
	tagParentLane   = 90
	// Tags 91-94 are unassigned here; this version skips them as unknown
	// (gapTag). Added with worker NATS credentials.
	tagUserKey = 95
	tagLast    = tagUserKey // the highest tag this version knows, bar the hash
	tagHash    = 127
)

// hashFieldLen is the size of the trailing hash field: a two-byte key
// (127<<3 | 2), a one-byte length and the 32-byte digest.
const hashFieldLen = 2 + 1 + len(Hash{})

// hashFieldHead is how the hash field starts: its key and length.
var hashFieldHead = [3]byte{(tagHash<<3|wireBytes)&0x7f | 0x80, (tagHash<<3 | wireBytes) >> 7, byte(len(Hash{}))}

// appendBody appends the version byte and every field except the hash.
// bodyLen must stay in step with it (TestEncodedLen checks that).
func (e *Event) appendBody(buf []byte) []byte {
	w := Writer{buf: buf}
	w.Byte(Version)
	w.Uint(tagSeq, e.Seq)
	w.Uint(tagKind, uint64(e.Kind))
	w.Uint(tagRaftIndex, e.RaftIndex)
	w.Int(tagTime, e.Time)
	w.Hash(tagPrev, e.Prev)
	w.String(tagNode, e.Node)
	w.String(tagGrantID, e.GrantID)
	w.String(tagWorker, e.Worker)
	w.String(tagLane, e.Lane)
	w.String(tagSession, e.Session)
	w.String(tagTool, e.Tool)
	w.Hash(tagDigest, e.Digest)
	w.Uint(tagEpoch, e.Epoch)
	w.String(tagDecision, e.Decision)
	w.String(tagReason, e.Reason)
	w.String(tagMissing, e.Missing)
	w.String(tagRecovery, e.Recovery)
	w.Int(tagIssuedAt, e.IssuedAt)
	w.Int(tagExpiresAt, e.ExpiresAt)
	w.String(tagIdemKey, e.IdemKey)
	w.String(tagOutcome, e.Outcome)
	w.String(tagVerifier, e.Verifier)
	w.Uint(tagRefSeq, e.RefSeq)
	for _, c := range e.Counters {
		// One element: the value as a uvarint, then the key's bytes.
		w.key(tagCounters, wireBytes)
		w.buf = binary.AppendUvarint(w.buf, uint64(uvarintLen(c.Value)+len(c.Key)))
		w.buf = binary.AppendUvarint(w.buf, c.Value)
		w.buf = append(w.buf, c.Key...)
	}
	w.Strings(tagCancelled, e.Cancelled)
	w.Strings(tagRules, e.Rules)
	w.String(tagTarget, e.Target)
	w.String(tagConsequence, e.Consequence)
	w.String(tagActor, e.Actor)
	w.Raw(tagPolicy, e.Policy)
	w.Hash(tagPolicyDigest, e.PolicyDigest)
	w.Strings(tagSources, e.Sources)
	w.String(tagDetail, e.Detail)
	w.String(tagReviewID, e.ReviewID)
	w.String(tagTargetLabel, e.TargetLabel)
	w.String(tagSurface, e.Surface)
	w.String(tagOperation, e.Operation)
	w.String(tagInstrument, e.Instrument)
	w.String(tagInstLeft, e.InstrumentLeft)
	w.Uint(tagAmount, e.Amount)
	w.Uint(tagBytes, e.Bytes)
	w.String(tagLedgerKey, e.LedgerKey)
	w.String(tagCwd, e.Cwd)
	w.String(tagResolved, e.Resolved)
	w.String(tagChannel, e.Channel)
	w.String(tagAuthority, e.Authority)
	w.Hash(tagContentHash, e.ContentDigest)
	w.String(tagScope, e.Scope)
	w.Strings(tagGrounds, e.Grounds)
	w.Bool(tagCharged, e.Charged)
	w.Int(tagLedgerUntil, e.LedgerUntil)
	w.Int(tagInstUntil, e.InstrumentUntil)
	for _, q := range e.Quotas {
		// One element: start and end as zigzag varints, then the key's
		// bytes.
		w.key(tagQuotas, wireBytes)
		w.buf = binary.AppendUvarint(w.buf, uint64(quotaLen(q)))
		w.buf = binary.AppendUvarint(w.buf, zigzag(q.Start))
		w.buf = binary.AppendUvarint(w.buf, zigzag(q.Until))
		w.buf = append(w.buf, q.Key...)
	}
	w.String(tagSourceID, e.SourceID)
	w.Strings(tagOrigins, e.Origins)
	w.String(tagSourcePath, e.SourcePath)
	w.Bool(tagModelMade, e.ModelMade)
	w.String(tagArtPath, e.ArtifactPath)
	w.Uint(tagArtVersion, e.ArtifactVersion)
	w.Hash(tagArtDigest, e.ArtifactDigest)
	w.String(tagCaption, e.Caption)
	w.String(tagTransition, e.Transition)
	w.String(tagDestination, e.Destination)
	w.String(tagReviewerRole, e.ReviewerRole)
	w.String(tagReplyChannel, e.ReplyChannel)
	w.String(tagReplySender, e.ReplySender)
	w.Int(tagReplyAt, e.ReplyAt)
	w.String(tagReplyText, e.ReplyText)
	w.Strings(tagCandidates, e.Candidates)
	w.String(tagRoute, e.Route)
	w.Uint(tagRouteGen, e.RouteGen)
	w.String(tagPrevOwner, e.PrevOwner)
	w.Uint(tagPrevGen, e.PrevGen)
	w.Strings(tagRoutes, e.Routes)
	w.Bool(tagRouteStale, e.RouteStale)
	w.String(tagCaseID, e.CaseID)
	w.String(tagGlassScope, e.GlassScope)
	w.String(tagParent, e.Parent)
	w.Uint(tagIncarnation, e.Incarnation)
	w.Strings(tagScopeTools, e.ScopeTools)
	w.Strings(tagScopeClasses, e.ScopeClasses)
	w.Strings(tagScopeTargets, e.ScopeTargets)
	w.Strings(tagReviews, e.Reviews)
	w.Bool(tagBlocked, e.Blocked)
	w.Strings(tagWorkers, e.Workers)
	w.String(tagParentLane, e.ParentLane)
	w.String(tagUserKey, e.UserKey)
	return w.buf
}

// bodyLen is the number of bytes appendBody writes. Seal uses it to grow
// the buffer once; were it ever wrong the encoding would still be right,
// only built with more than one allocation.
func (e *Event) bodyLen() int {
	n := 1 // version byte
	n += uintLen(tagSeq, e.Seq)
	n += uintLen(tagKind, uint64(e.Kind))
	n += uintLen(tagRaftIndex, e.RaftIndex)
	n += intLen(tagTime, e.Time)
	n += hashLen(tagPrev, e.Prev)
	n += strLen(tagNode, e.Node)
	n += strLen(tagGrantID, e.GrantID)
	n += strLen(tagWorker, e.Worker)
	n += strLen(tagLane, e.Lane)
	n += strLen(tagSession, e.Session)
	n += strLen(tagTool, e.Tool)
	n += hashLen(tagDigest, e.Digest)
	n += uintLen(tagEpoch, e.Epoch)
	n += strLen(tagDecision, e.Decision)
	n += strLen(tagReason, e.Reason)
	n += strLen(tagMissing, e.Missing)
	n += strLen(tagRecovery, e.Recovery)
	n += intLen(tagIssuedAt, e.IssuedAt)
	n += intLen(tagExpiresAt, e.ExpiresAt)
	n += strLen(tagIdemKey, e.IdemKey)
	n += strLen(tagOutcome, e.Outcome)
	n += strLen(tagVerifier, e.Verifier)
	n += uintLen(tagRefSeq, e.RefSeq)
	for _, c := range e.Counters {
		m := uvarintLen(c.Value) + len(c.Key)
		n += keyLen(tagCounters) + uvarintLen(uint64(m)) + m
	}
	n += strsLen(tagCancelled, e.Cancelled)
	n += strsLen(tagRules, e.Rules)
	n += strLen(tagTarget, e.Target)
	n += strLen(tagConsequence, e.Consequence)
	n += strLen(tagActor, e.Actor)
	if len(e.Policy) > 0 {
		n += keyLen(tagPolicy) + uvarintLen(uint64(len(e.Policy))) + len(e.Policy)
	}
	n += hashLen(tagPolicyDigest, e.PolicyDigest)
	n += strsLen(tagSources, e.Sources)
	n += strLen(tagDetail, e.Detail)
	n += strLen(tagReviewID, e.ReviewID)
	n += strLen(tagTargetLabel, e.TargetLabel)
	n += strLen(tagSurface, e.Surface)
	n += strLen(tagOperation, e.Operation)
	n += strLen(tagInstrument, e.Instrument)
	n += strLen(tagInstLeft, e.InstrumentLeft)
	n += uintLen(tagAmount, e.Amount)
	n += uintLen(tagBytes, e.Bytes)
	n += strLen(tagLedgerKey, e.LedgerKey)
	n += strLen(tagCwd, e.Cwd)
	n += strLen(tagResolved, e.Resolved)
	n += strLen(tagChannel, e.Channel)
	n += strLen(tagAuthority, e.Authority)
	n += hashLen(tagContentHash, e.ContentDigest)
	n += strLen(tagScope, e.Scope)
	n += strsLen(tagGrounds, e.Grounds)
	if e.Charged {
		n += uintLen(tagCharged, 1)
	}
	n += intLen(tagLedgerUntil, e.LedgerUntil)
	n += intLen(tagInstUntil, e.InstrumentUntil)
	for _, q := range e.Quotas {
		m := quotaLen(q)
		n += keyLen(tagQuotas) + uvarintLen(uint64(m)) + m
	}
	n += strLen(tagSourceID, e.SourceID)
	n += strsLen(tagOrigins, e.Origins)
	n += strLen(tagSourcePath, e.SourcePath)
	if e.ModelMade {
		n += uintLen(tagModelMade, 1)
	}
	n += strLen(tagArtPath, e.ArtifactPath)
	n += uintLen(tagArtVersion, e.ArtifactVersion)
	n += hashLen(tagArtDigest, e.ArtifactDigest)
	n += strLen(tagCaption, e.Caption)
	n += strLen(tagTransition, e.Transition)
	n += strLen(tagDestination, e.Destination)
	n += strLen(tagReviewerRole, e.ReviewerRole)
	n += strLen(tagReplyChannel, e.ReplyChannel)
	n += strLen(tagReplySender, e.ReplySender)
	n += intLen(tagReplyAt, e.ReplyAt)
	n += strLen(tagReplyText, e.ReplyText)
	n += strsLen(tagCandidates, e.Candidates)
	n += strLen(tagRoute, e.Route)
	n += uintLen(tagRouteGen, e.RouteGen)
	n += strLen(tagPrevOwner, e.PrevOwner)
	n += uintLen(tagPrevGen, e.PrevGen)
	n += strsLen(tagRoutes, e.Routes)
	if e.RouteStale {
		n += uintLen(tagRouteStale, 1)
	}
	n += strLen(tagCaseID, e.CaseID)
	n += strLen(tagGlassScope, e.GlassScope)
	n += strLen(tagParent, e.Parent)
	n += uintLen(tagIncarnation, e.Incarnation)
	n += strsLen(tagScopeTools, e.ScopeTools)
	n += strsLen(tagScopeClasses, e.ScopeClasses)
	n += strsLen(tagScopeTargets, e.ScopeTargets)
	n += strsLen(tagReviews, e.Reviews)
	if e.Blocked {
		n += uintLen(tagBlocked, 1)
	}
	n += strsLen(tagWorkers, e.Workers)
	n += strLen(tagParentLane, e.ParentLane)
	n += strLen(tagUserKey, e.UserKey)
	return n
}

// zigzag maps a signed value to the unsigned varint Writer.Int writes.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// quotaLen is the length of one encoded quota window element.
func quotaLen(q QuotaWindow) int {
	return uvarintLen(zigzag(q.Start)) + uvarintLen(zigzag(q.Until)) + len(q.Key)
}

// Sizes of the fields Writer writes, zero where it writes nothing.

func uvarintLen(v uint64) int {
	if v < 0x80 {
		return 1
	}
	return (bits.Len64(v) + 6) / 7
}

// keyLen folds to a constant for a constant tag.
func keyLen(tag uint32) int {
	switch {
	case tag < 1<<4:
		return 1
	case tag < 1<<11:
		return 2
	}
	return uvarintLen(uint64(tag) << 3)
}

func uintLen(tag uint32, v uint64) int {
	if v == 0 {
		return 0
	}
	return keyLen(tag) + uvarintLen(v)
}

func intLen(tag uint32, v int64) int { return uintLen(tag, uint64(v<<1)^uint64(v>>63)) }

func strLen(tag uint32, s string) int {
	if s == "" {
		return 0
	}
	return keyLen(tag) + uvarintLen(uint64(len(s))) + len(s)
}

func strsLen(tag uint32, ss []string) int {
	n := 0
	for _, s := range ss {
		n += keyLen(tag) + uvarintLen(uint64(len(s))) + len(s)
	}
	return n
}

func hashLen(tag uint32, h Hash) int {
	if h.IsZero() {
		return 0
	}
	return keyLen(tag) + 1 + len(h)
}

// sealSpare is the spare capacity from which Seal appends to a buffer
// without measuring the event first. Events take a few hundred bytes; a
// longer one makes append grow the buffer as usual.
const sealSpare = 1024

// Seal sets e.Version and e.Hash from the event's other fields and returns
// the canonical encoding, appended to buf. It allocates only when buf lacks
// the room, and then once, for exactly the room it needs (rounded up to an
// allocation size class), so Seal(nil) allocates once; a buffer with at
// least 1 KiB to spare is appended to directly. The hash is computed over
// the appended bytes in place.
func (e *Event) Seal(buf []byte) []byte {
	e.Version = Version
	if cap(buf)-len(buf) < sealSpare {
		buf = slices.Grow(buf, e.bodyLen()+hashFieldLen)
	}
	start := len(buf)
	buf = e.appendBody(buf)
	e.Hash = Sum(buf[start:])
	w := Writer{buf: buf}
	w.Raw(tagHash, e.Hash[:])
	return w.buf
}

// Encode returns the canonical encoding of a sealed event. It recomputes
// the hash, so an Event whose Hash field was edited by hand encodes to the
// bytes it should have had; use Decode to check stored bytes.
func (e Event) Encode() []byte { return e.Seal(nil) }

// Decode parses and verifies one encoded event: canonical form, known
// version and a stored hash equal to the SHA-256 of the bytes before it.
// Unknown tags are skipped (forward compatibility); unknown kinds decode
// (an auditor reports them) but Kind.Known is false.
//
// The event never aliases b: the caller may reuse b at once. Its string
// fields are substrings of one copy of b made for this event (of the bytes
// from the first string field up to the hash field): one allocation for
// all of them, but keeping any one string keeps that whole copy, most of
// len(b), alive. A caller that keeps a few strings of many events for long
// can clone them (strings.Clone). Policy and the list slices are allocated
// for the event, each sized for its contents.
func Decode(b []byte) (Event, error) {
	var e Event
	if err := decode(b, &e, false); err != nil {
		return Event{}, err
	}
	return e, nil
}

// DecodeInto is Decode writing into *e, for loops that decode many events
// one after another (replay, audit). It accepts, rejects and fills in
// exactly what Decode does, with these differences:
//
//   - Every field of *e is overwritten; a field absent from b is left zero,
//     except that an absent list (Counters, Cancelled, Rules, Sources,
//     Grounds, Quotas, Origins, Candidates, Routes) or Policy is left empty
//     but possibly non-nil: test it with len, not against nil.
//   - The backing arrays of those ten slices are reused: after the call they
//     may share memory with the slices *e held before it, whose contents
//     are overwritten. A caller that keeps one of them (or a subslice)
//     across a later DecodeInto with the same e must copy it first
//     (slices.Clone). Strings are never reused or overwritten: they may be
//     kept freely, with the same retention as Decode's (each decoded event's
//     strings share one copy of its input).
//   - On error *e is reset as above (no field set, slice capacity kept),
//     never left half-decoded.
//
// Like Decode, the result never aliases b (unless slices the caller had
// put in *e did).
func DecodeInto(b []byte, e *Event) error { return decodeReset(b, e, false) }

// DecodeShared is DecodeInto for input the caller hands over for good: the
// event's strings are substrings of b itself rather than of a copy, so
// decoding allocates nothing for them (the one copy DecodeInto makes is
// about a tenth of a sequential replay's time). It accepts, rejects and
// fills in exactly what DecodeInto does.
//
// b must never be modified afterwards, by anyone, for as long as any string
// of the event (or of a state it was folded into) is in use: a string
// changes with the bytes under it. A message received from NATS qualifies
// (the client gives every message a buffer of its own); a buffer that is
// refilled, a pooled one, or memory that is unmapped later (a bbolt value,
// valid only in its transaction) does not, and must go to DecodeInto.
// Keeping any string keeps all of b alive.
func DecodeShared(b []byte, e *Event) error { return decodeReset(b, e, true) }

// decodeReset decodes b into a reset *e, and resets it again on error.
func decodeReset(b []byte, e *Event, shared bool) error {
	e.reset()
	if err := decode(b, e, shared); err != nil {
		e.reset()
		return err
	}
	return nil
}

// reset zeroes every field of e but keeps the backing arrays of its
// slices, emptied, for reuse.
//
// The slices are set aside, the event cleared in place and the slices put
// back: a composite literal that reads e's own fields would be built in a
// temporary and copied over e, moving its ~1.4 KB twice per event.
func (e *Event) reset() {
	counters, cancelled, rules, sources, grounds := e.Counters[:0], e.Cancelled[:0], e.Rules[:0], e.Sources[:0], e.Grounds[:0]
	policy, quotas, origins, candidates, routes := e.Policy[:0], e.Quotas[:0], e.Origins[:0], e.Candidates[:0], e.Routes[:0]
	*e = Event{}
	e.Counters, e.Cancelled, e.Rules, e.Sources, e.Grounds = counters, cancelled, rules, sources, grounds
	e.Policy, e.Quotas, e.Origins, e.Candidates, e.Routes = policy, quotas, origins, candidates, routes
}

// decoder is the state of one decode. Its methods set one field of the
// event from the current field f and report success; on failure they have
// recorded the error in r.
//
// String fields share one copy of the input, made at the first string
// field: s is b[base:hi], from that field to the end of the input less a
// trailing hash field (neither the fields before the first string, such as
// Prev, nor the hash are ever needed as strings). With shared set
// (DecodeShared) s is b[base:hi] itself, not a copy.
type decoder struct {
	r      Reader // reads b[1:] (after the version byte)
	f      Field  // the field just read
	b      []byte // the input
	s      string // b[base:hi], once copied (or viewed, when shared)
	base   int
	hi     int
	shared bool
}

// decode does the work of Decode, DecodeInto and DecodeShared. Fields of e not in b must
// already be zero and its slices empty.
func decode(b []byte, e *Event, shared bool) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if b[0] != Version {
		return fmt.Errorf("%w: %d (this build reads %d)", ErrUnsupportedVersion, b[0], Version)
	}
	e.Version = b[0]
	d := decoder{r: Reader{data: b[1:]}, b: b, hi: len(b), shared: shared}
	if n := len(b) - hashFieldLen; n > 0 && [3]byte(b[n:]) == hashFieldHead {
		d.hi = n
	}
	hashAt := -1    // offset in b of the hash field's key
	var prev uint32 // tag of the previous field
	for {
		pos := d.r.off
		if !d.r.Next(&d.f) {
			break
		}
		tag := d.f.Tag
		// Tags ascend (the Reader enforces it), so a field after the hash
		// has a tag at or above the hash's, and a repeat has the previous
		// tag: one comparison each for every other field.
		if tag >= tagHash || tag == prev {
			if hashAt >= 0 {
				d.r.Failf("field %d after hash", tag)
				break
			}
			// The Reader allows length-delimited tags to repeat; only
			// list fields (and unknown tags, which may be lists) may do
			// so here, or one event would have several encodings.
			if tag == prev && !repeatable(tag) {
				d.r.Failf("repeated field %d", tag)
				break
			}
			if tag == tagHash {
				hashAt = 1 + pos
			}
		}
		prev = tag
		if !d.field(e) {
			break
		}
	}
	if err := d.r.Err(); err != nil {
		return err
	}
	if hashAt < 0 {
		return fmt.Errorf("%w: missing hash field", ErrMalformed)
	}
	// The hash is taken over the caller's bytes directly: no copy.
	if got := Sum(b[:hashAt]); got != e.Hash {
		return fmt.Errorf("%w: seq %d stored %s, computed %s", ErrHashMismatch, e.Seq, e.Hash.Short(), got.Short())
	}
	return nil
}

// repeatable reports whether a tag may occur several times in a row: the
// list fields, and tags this version does not know.
func repeatable(tag uint32) bool {
	switch tag {
	case tagCounters, tagCancelled, tagRules, tagSources, tagGrounds, tagQuotas, tagOrigins, tagCandidates, tagRoutes,
		tagScopeTools, tagScopeClasses, tagScopeTargets, tagReviews, tagWorkers:
		return true
	}
	return tag > tagLast && tag != tagHash || gapTag(tag)
}

// gapTag reports whether tag lies in the unassigned range between the
// route fields and the break-glass fields, which this version does not
// know.
func gapTag(tag uint32) bool {
	return tag > tagRouteStale && tag < tagCaseID || tag > tagParentLane && tag < tagUserKey
}

// field stores the current field into e.
func (d *decoder) field(e *Event) bool {
	switch d.f.Tag {
	case tagSeq:
		return d.uint(&e.Seq)
	case tagKind:
		var k uint64
		if !d.uint(&k) {
			return false
		}
		if k > 0xffff {
			d.r.Failf("kind %d out of range", k)
			return false
		}
		e.Kind = Kind(k)
		return true
	case tagRaftIndex:
		return d.uint(&e.RaftIndex)
	case tagTime:
		return d.int(&e.Time)
	case tagPrev:
		return d.hash(&e.Prev)
	case tagNode:
		return d.str(&e.Node)
	case tagGrantID:
		return d.str(&e.GrantID)
	case tagWorker:
		return d.str(&e.Worker)
	case tagLane:
		return d.str(&e.Lane)
	case tagSession:
		return d.str(&e.Session)
	case tagTool:
		return d.str(&e.Tool)
	case tagDigest:
		return d.hash(&e.Digest)
	case tagEpoch:
		return d.uint(&e.Epoch)
	case tagDecision:
		return d.str(&e.Decision)
	case tagReason:
		return d.str(&e.Reason)
	case tagMissing:
		return d.str(&e.Missing)
	case tagRecovery:
		return d.str(&e.Recovery)
	case tagIssuedAt:
		return d.int(&e.IssuedAt)
	case tagExpiresAt:
		return d.int(&e.ExpiresAt)
	case tagIdemKey:
		return d.str(&e.IdemKey)
	case tagOutcome:
		return d.str(&e.Outcome)
	case tagVerifier:
		return d.str(&e.Verifier)
	case tagRefSeq:
		return d.uint(&e.RefSeq)
	case tagCounters:
		return d.counter(&e.Counters)
	case tagCancelled:
		return d.list(&e.Cancelled)
	case tagRules:
		return d.list(&e.Rules)
	case tagTarget:
		return d.str(&e.Target)
	case tagConsequence:
		return d.str(&e.Consequence)
	case tagActor:
		return d.str(&e.Actor)
	case tagPolicy:
		if !d.nonEmpty() {
			return false
		}
		// Bytes cannot share the string copy; Policy gets its own.
		e.Policy = append(e.Policy[:0], d.f.Data...)
		return true
	case tagPolicyDigest:
		return d.hash(&e.PolicyDigest)
	case tagSources:
		return d.list(&e.Sources)
	case tagDetail:
		return d.str(&e.Detail)
	case tagReviewID:
		return d.str(&e.ReviewID)
	case tagTargetLabel:
		return d.str(&e.TargetLabel)
	case tagSurface:
		return d.str(&e.Surface)
	case tagOperation:
		return d.str(&e.Operation)
	case tagInstrument:
		return d.str(&e.Instrument)
	case tagInstLeft:
		return d.str(&e.InstrumentLeft)
	case tagAmount:
		return d.uint(&e.Amount)
	case tagBytes:
		return d.uint(&e.Bytes)
	case tagLedgerKey:
		return d.str(&e.LedgerKey)
	case tagCwd:
		return d.str(&e.Cwd)
	case tagResolved:
		return d.str(&e.Resolved)
	case tagChannel:
		return d.str(&e.Channel)
	case tagAuthority:
		return d.str(&e.Authority)
	case tagContentHash:
		return d.hash(&e.ContentDigest)
	case tagScope:
		return d.str(&e.Scope)
	case tagGrounds:
		return d.list(&e.Grounds)
	case tagCharged:
		return d.flag(&e.Charged)
	case tagLedgerUntil:
		return d.int(&e.LedgerUntil)
	case tagInstUntil:
		return d.int(&e.InstrumentUntil)
	case tagQuotas:
		return d.quota(&e.Quotas)
	case tagSourceID:
		return d.str(&e.SourceID)
	case tagOrigins:
		return d.list(&e.Origins)
	case tagSourcePath:
		return d.str(&e.SourcePath)
	case tagModelMade:
		return d.flag(&e.ModelMade)
	case tagArtPath:
		return d.str(&e.ArtifactPath)
	case tagArtVersion:
		return d.uint(&e.ArtifactVersion)
	case tagArtDigest:
		return d.hash(&e.ArtifactDigest)
	case tagCaption:
		return d.str(&e.Caption)
	case tagTransition:
		return d.str(&e.Transition)
	case tagDestination:
		return d.str(&e.Destination)
	case tagReviewerRole:
		return d.str(&e.ReviewerRole)
	case tagReplyChannel:
		return d.str(&e.ReplyChannel)
	case tagReplySender:
		return d.str(&e.ReplySender)
	case tagReplyAt:
		return d.int(&e.ReplyAt)
	case tagReplyText:
		return d.str(&e.ReplyText)
	case tagCandidates:
		return d.list(&e.Candidates)
	case tagRoute:
		return d.str(&e.Route)
	case tagRouteGen:
		return d.uint(&e.RouteGen)
	case tagPrevOwner:
		return d.str(&e.PrevOwner)
	case tagPrevGen:
		return d.uint(&e.PrevGen)
	case tagRoutes:
		return d.list(&e.Routes)
	case tagRouteStale:
		return d.flag(&e.RouteStale)
	case tagCaseID:
		return d.str(&e.CaseID)
	case tagGlassScope:
		return d.str(&e.GlassScope)
	case tagParent:
		return d.str(&e.Parent)
	case tagIncarnation:
		return d.uint(&e.Incarnation)
	case tagScopeTools:
		return d.list(&e.ScopeTools)
	case tagScopeClasses:
		return d.list(&e.ScopeClasses)
	case tagScopeTargets:
		return d.list(&e.ScopeTargets)
	case tagReviews:
		return d.list(&e.Reviews)
	case tagBlocked:
		return d.flag(&e.Blocked)
	case tagWorkers:
		return d.list(&e.Workers)
	case tagParentLane:
		return d.str(&e.ParentLane)
	case tagUserKey:
		return d.str(&e.UserKey)
	case tagHash:
		return d.hash(&e.Hash)
	default:
		// Unknown tag from a newer writer: skipped, still covered by the hash.
		return true
	}
}

// data returns the current field's value as a string that shares the
// event's one copy of its input (see decoder); the copy keeps the event
// independent of b, which callers reuse.
func (d *decoder) data() string {
	end := 1 + d.r.off // the Reader has just consumed the value
	start := end - len(d.f.Data)
	if start == end {
		return ""
	}
	if d.s == "" && end <= d.hi {
		if d.shared {
			// start < end <= hi: the view is not empty. The caller of
			// DecodeShared has promised never to change b.
			d.s = unsafe.String(&d.b[start], d.hi-start)
		} else {
			d.s = string(d.b[start:d.hi])
		}
		d.base = start
	}
	if start < d.base || end > d.base+len(d.s) {
		// Only in input that will be rejected: a value overlapping what
		// looked like the trailing hash field.
		return string(d.f.Data)
	}
	return d.s[start-d.base : end-d.base]
}

// nonEmpty rejects a present but empty singular field: the writer omits
// empty values, so accepting one would give a second encoding.
//
// nonEmpty and uint are small enough to be inlined (into str and field:
// one call fewer for most fields of an event); the refusals, which format
// an error, are the out-of-line badBytes and badVarint.
func (d *decoder) nonEmpty() bool {
	if d.f.Wire != wireBytes || len(d.f.Data) == 0 {
		return d.badBytes()
	}
	return true
}

// badBytes records why the current field is not a non-empty
// length-delimited value.
//
//go:noinline
func (d *decoder) badBytes() bool {
	if !d.r.Expect(&d.f, wireBytes) {
		return false
	}
	d.r.Failf("empty value written for tag %d", d.f.Tag)
	return false
}

// badVarint records that the current field is not a varint.
//
//go:noinline
func (d *decoder) badVarint() bool { return d.r.Expect(&d.f, wireVarint) }

func (d *decoder) str(dst *string) bool {
	if !d.nonEmpty() {
		return false
	}
	*dst = d.data()
	return true
}

func (d *decoder) uint(dst *uint64) bool {
	if d.f.Wire != wireVarint {
		return d.badVarint()
	}
	*dst = d.f.Uint
	return true
}

func (d *decoder) int(dst *int64) bool {
	if d.f.Wire != wireVarint {
		return d.badVarint()
	}
	*dst = d.f.Int()
	return true
}

func (d *decoder) hash(dst *Hash) bool {
	if !d.r.Expect(&d.f, wireBytes) {
		return false
	}
	if len(d.f.Data) != len(dst) {
		_, err := HashFromBytes(d.f.Data)
		d.r.Failf("tag %d: %v", d.f.Tag, err)
		return false
	}
	v := Hash(d.f.Data)
	if v.IsZero() {
		d.r.Failf("zero hash written for tag %d", d.f.Tag)
		return false
	}
	*dst = v
	return true
}

// list appends one element of a string list. At the first element of a
// list in a slice with no room, it sizes the slice for the whole run of
// elements, so a list costs one allocation. A slice DecodeInto reuses keeps
// the room of the lists before it and is not sized again: counting the
// run costs more than the rare append that outgrows it.
func (d *decoder) list(dst *[]string) bool {
	if !d.r.Expect(&d.f, wireBytes) {
		return false
	}
	if len(*dst) == 0 && cap(*dst) == 0 {
		*dst = slices.Grow(*dst, 1+d.rest())
	}
	*dst = append(*dst, d.data())
	return true
}

// counter appends one revocation counter: a minimal uvarint value followed
// by the key's bytes.
func (d *decoder) counter(dst *[]Counter) bool {
	if !d.r.Expect(&d.f, wireBytes) {
		return false
	}
	v, n := binary.Uvarint(d.f.Data)
	if n <= 0 || (n > 1 && d.f.Data[n-1] == 0) {
		d.r.Failf("counter value is not a minimal varint")
		return false
	}
	if len(*dst) == 0 && cap(*dst) == 0 {
		*dst = slices.Grow(*dst, 1+d.rest())
	}
	*dst = append(*dst, Counter{Key: d.data()[n:], Value: v})
	return true
}

// flag decodes a boolean: the writer writes true as 1 and omits false.
func (d *decoder) flag(dst *bool) bool {
	if !d.r.Expect(&d.f, wireVarint) {
		return false
	}
	if d.f.Uint != 1 {
		d.r.Failf("tag %d: flag value %d", d.f.Tag, d.f.Uint)
		return false
	}
	*dst = true
	return true
}

// quota appends one quota window: minimal zigzag varints for its start
// and end, then the key's bytes.
func (d *decoder) quota(dst *[]QuotaWindow) bool {
	if !d.r.Expect(&d.f, wireBytes) {
		return false
	}
	start, until, n, ok := decodeQuotaHead(d.f.Data)
	if !ok {
		d.r.Failf("quota window times are not minimal varints")
		return false
	}
	if len(*dst) == 0 && cap(*dst) == 0 {
		*dst = slices.Grow(*dst, 1+d.rest())
	}
	*dst = append(*dst, QuotaWindow{Key: d.data()[n:], Start: start, Until: until})
	return true
}

// decodeQuotaHead reads the two minimal zigzag varints that open a quota
// window element and returns them with their length.
func decodeQuotaHead(b []byte) (start, until int64, n int, ok bool) {
	var vs [2]int64
	for i := range vs {
		u, m := binary.Uvarint(b[n:])
		if m <= 0 || (m > 1 && b[n+m-1] == 0) {
			return 0, 0, 0, false
		}
		vs[i] = int64(u>>1) ^ -int64(u&1)
		n += m
	}
	return vs[0], vs[1], n, true
}

// rest counts the fields right after the current one that repeat its tag
// as length-delimited fields, to size a list. It only looks: anything it
// cannot parse ends the count and is left for the Reader to reject.
func (d *decoder) rest() int {
	data, off := d.r.data, d.r.off
	k := uint64(d.f.Tag)<<3 | wireBytes
	n := 0
	for off < len(data) {
		key, m := binary.Uvarint(data[off:])
		if m <= 0 || key != k {
			break
		}
		off += m
		l, m := binary.Uvarint(data[off:])
		if m <= 0 || l > uint64(len(data)-off-m) {
			break
		}
		off += m + int(l)
		n++
	}
	return n
}
