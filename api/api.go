// Package api is writ's request/reply protocol over NATS: subject names,
// the JSON request bodies workers and operators send and their encoders
// and decoders, and the limits and id shapes the issuer checks. It is a
// wire package only: it imports no transport, so the state machine may
// build on it. The NATS client that sends these requests is package
// api/client.
//
// Identity is never read from a body. A worker's NATS user may publish only
// under writ.api.<worker>.>, and the issuer takes the worker id from the
// subject; operators publish under writ.op.>.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Version is the request body version this build speaks. Bodies carry it in
// "v"; an issuer answers unsupported_version to anything else.
const Version = 1

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 512 << 10

// Subject roots.
const (
	WorkerPrefix   = "writ.api."
	OperatorPrefix = "writ.op."
)

// Worker operations (the last subject token).
const (
	OpGrant  = "grant"
	OpSpend  = "spend"
	OpEffect = "effect"
	// OpSource registers a content source (SourceRequest).
	OpSource = "source"
	// OpRoute acquires, renews, releases or reports a route lease
	// (RouteRequest).
	OpRoute = "route"
	// OpGrantSpend asks for a grant and spends it at once, in one log
	// entry, for a call about to run (a GrantRequest body; the spend binds
	// the request's arguments, idempotency key and resolution context).
	// The answer is the spend's (an attempt or a spend refusal) or the
	// request's refusal. Below receipt format 11 the issuer proposes the
	// request and then the spend as two entries, with the same answer; an
	// issuer of an earlier build answers invalid_request naming the
	// subject, and the caller then sends OpGrant and OpSpend.
	OpGrantSpend = "grant_spend"
	// OpEffectSource reports a spent grant's outcome and registers the
	// call's result as a content source in one log entry
	// (EffectSourceRequest). The answer is the effect's, with the
	// source's in its Source field; the fallbacks are those of
	// OpGrantSpend (OpEffect, then OpSource).
	OpEffectSource = "effect_source"
)

// Operator subjects.
const (
	SubjectRevoke    = OperatorPrefix + "revoke"
	SubjectReinstate = OperatorPrefix + "reinstate"
	SubjectPolicy    = OperatorPrefix + "policy"
	SubjectStatus    = OperatorPrefix + "status"
	// SubjectPolicyShow answers with a policy document by epoch.
	SubjectPolicyShow = OperatorPrefix + "policy.show"
	// SubjectApprove approves an open review (ApproveRequest).
	SubjectApprove = OperatorPrefix + "approve"
	// SubjectBreakGlass opens a break-glass case (BreakGlassRequest).
	SubjectBreakGlass = OperatorPrefix + "breakglass"
)

// WorkerSubject is the subject a worker sends op on.
func WorkerSubject(worker, op string) string { return WorkerPrefix + worker + "." + op }

// WorkerWildcard matches every worker request.
const WorkerWildcard = WorkerPrefix + "*.*"

// OperatorWildcard matches every operator subject.
const OperatorWildcard = OperatorPrefix + ">"

// Errors.
var (
	// ErrBadSubject: a subject is not writ.api.<worker>.<op> with a valid
	// worker token and a known op.
	ErrBadSubject = errors.New("api: bad subject")
	// ErrBadToken: an id is not a single safe NATS token.
	ErrBadToken = errors.New("api: bad id")
)

// ParseWorkerSubject splits writ.api.<worker>.<op>.
func ParseWorkerSubject(subj string) (worker, op string, err error) {
	rest, ok := strings.CutPrefix(subj, WorkerPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadSubject, subj)
	}
	worker, op, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(op, ".") {
		return "", "", fmt.Errorf("%w: %q (want writ.api.<worker>.<op>)", ErrBadSubject, subj)
	}
	if err := ValidID(worker); err != nil {
		return "", "", fmt.Errorf("%w: worker: %v", ErrBadSubject, err)
	}
	switch op {
	case OpGrant, OpSpend, OpEffect, OpSource, OpReview, OpRoute, OpSpawn, OpRestore, OpGrantSpend, OpEffectSource:
		return worker, op, nil
	}
	return "", "", fmt.Errorf("%w: unknown operation %q", ErrBadSubject, op)
}

// MaxIDLen bounds a worker, lane, source or session id.
const MaxIDLen = 64

// ValidID checks a worker, lane, source or session id: 1-64 of
// [A-Za-z0-9_-]. This keeps ids usable as NATS subject tokens and as
// revocation counter keys. IsValidID is the same check without the
// message.
func ValidID(s string) error {
	if IsValidID(s) {
		return nil
	}
	if s == "" || len(s) > MaxIDLen {
		return fmt.Errorf("%w: %q must be 1-64 characters", ErrBadToken, s)
	}
	for _, r := range s {
		if !idRune(r) {
			return fmt.Errorf("%w: %q contains %q (use letters, digits, - and _)", ErrBadToken, s, r)
		}
	}
	return fmt.Errorf("%w: %q", ErrBadToken, s) // not reached: IsValidID would have held
}

// IsValidID reports whether s is a valid worker, lane, source or session
// id (see ValidID). It allocates nothing, for the state machine's checks.
func IsValidID(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idRune(rune(s[i])) {
			return false
		}
	}
	return true
}

func idRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
}

// Review ids: an approval_required answer names its review as
// ReviewIDPrefix and ReviewIDHexDigits lowercase hex digits (the state
// machine derives them from the grant id), and an ApproveRequest names
// the review it approves the same way.
const (
	ReviewIDPrefix    = "rv-"
	ReviewIDHexDigits = 20
)

// ValidReviewID reports whether s has the shape of a review id.
func ValidReviewID(s string) bool {
	h, ok := strings.CutPrefix(s, ReviewIDPrefix)
	if !ok || len(h) != ReviewIDHexDigits {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// GrantRequest asks for a grant for one exact tool call.
//
// The fields after IdempotencyKey are optional and feed the policy engine:
// the label a human saw for the call's target (the grant binds it beside
// the canonical target), a declared amount (minor units; a surface with an
// amount field reads the amount from Args instead and the two must agree)
// and byte count, and the resolution context of a path target — the
// call's absolute working directory and the absolute real path the
// worker's resolver found for the target (symlinks followed).
type GrantRequest struct {
	V              int             `json:"v"`
	Lane           string          `json:"lane"`
	Session        string          `json:"session,omitempty"`
	Tool           string          `json:"tool"`
	Args           json.RawMessage `json:"args"`
	TTLMillis      int64           `json:"ttl_ms,omitempty"`
	Sources        []string        `json:"sources,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	TargetLabel    string          `json:"target_label,omitempty"`
	Amount         *uint64         `json:"amount,omitempty"`
	Bytes          uint64          `json:"bytes,omitempty"`
	Cwd            string          `json:"cwd,omitempty"`
	ResolvedTarget string          `json:"resolved_target,omitempty"`
	// Provenance traces argument fields to registered sources (see
	// FieldTrace). Omitted: the worker traced nothing, and every sink
	// field counts as model-made (evidence). At most MaxTraces.
	Provenance []FieldTrace `json:"provenance,omitempty"`
	// Review names the artifact review that approves this call (its id,
	// caption or keep token), with ArtifactSHA256 the SHA-256 of the
	// artifact as it is now (64 hex digits): the issuer permits the call
	// only if that review was approved for exactly this version and still
	// binds (receipt format level 4; docs/reviews.md).
	Review         string `json:"review,omitempty"`
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	// Route names the route this call is work under and RouteGen the
	// fencing generation of the caller's lease (0: its current one): the
	// grant binds them, and is refused unless the caller owns the route
	// at that generation.
	Route    string `json:"route,omitempty"`
	RouteGen uint64 `json:"route_gen,omitempty"`
}

// RouteRequest is a worker's route lease operation (subject
// writ.api.<worker>.route): Action is acquire, renew, release or status;
// TTLMillis the lease asked for (0: the route's max_ttl); RouteGen the
// generation the caller believes it holds (renew and release; 0: any).
type RouteRequest struct {
	V         int    `json:"v"`
	Action    string `json:"action"`
	Route     string `json:"route"`
	Lane      string `json:"lane,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	RouteGen  uint64 `json:"route_gen,omitempty"`
}

// Route actions.
const (
	RouteAcquire = "acquire"
	RouteRenew   = "renew"
	RouteRelease = "release"
	RouteStatus  = "status"
)

// Provenance limits.
const (
	MaxTraces        = 64 // field traces per grant request
	MaxTraceMatches  = 32 // matches per field trace
	MaxSourceOrigins = 64 // origins of one derived source
)

// FieldTrace is the worker's account of where one argument field's value
// came from: the registered sources it matched and how. Field is the JSON
// pointer (RFC 6901) of one scalar leaf of the arguments, as
// policy.FlattenArgs lists it ("/to", "/payment/iban", "/cmd/0"); a sink
// field that is an object or array is judged by all its leaves. Covered is true when raw matches cover the
// whole value and nothing about the match was uncertain (no stop grams, no
// truncation); otherwise part of the value counts as model-made. The
// issuer never trusts a level from the worker: it looks each source up in
// its own replicated registry.
type FieldTrace struct {
	Field   string       `json:"field"`
	Matches []TraceMatch `json:"matches,omitempty"`
	Covered bool         `json:"covered,omitempty"`
}

// TraceMatch is one source a field's value matched, and under which
// decoding (raw, base64, hex, percent, dns_labels, dns_labels+hex; from
// receipt format level 9 also json and chains of nested decodings such as
// hex+base64) or typed match (from level 9: number, number:<CODE> for a
// number written with a currency, ident for an identifier with other
// separators) and URL part ("", "host", "path"), or "token" for an
// identifier (8-15 characters with a digit) found inside a longer value.
// Whole says this one source contains the entire value (raw or typed
// transform, no part): the value is exactly something that source said,
// whatever else it also matched.
type TraceMatch struct {
	Source    string `json:"source"`
	Transform string `json:"transform"`
	Part      string `json:"part,omitempty"`
	Whole     bool   `json:"whole,omitempty"`
	// Field is the field of the source's structured result (a JSON
	// pointer into the tool's result, /messages/3/sender) the value was
	// found in; FieldWhole says the value equals that field whole. The
	// issuer's policy decides what the field is worth (result schemas);
	// it reads them at receipt format 10 and later.
	Field      string `json:"field,omitempty"`
	FieldWhole bool   `json:"field_whole,omitempty"`
}

// SourceRequest registers one content source with the issuer: a
// descriptor, never the content. The issuer assigns its authority from
// the policy (channel, path, tool) and, for derived content, the lowest
// authority of its origins; the level the worker believes is not asked.
// A repeated registration of the same id with the same descriptor gets
// the original answer; a different descriptor under a used id is refused.
//
// Channel is one of user_prompt, instruction_file, file_read, tool_result,
// web_fetch, peer_message, model_output, derived. Scope is "task" or
// "session". ContentDigest is the hex SHA-256 of the raw content. Path is
// the absolute path of a file source; Tool the tool whose result this is.
// Origins are the sources a derived source was computed from; ModelMade
// says part of it traced to nothing registered.
type SourceRequest struct {
	V             int      `json:"v"`
	ID            string   `json:"id"`
	Session       string   `json:"session,omitempty"`
	Channel       string   `json:"channel"`
	Scope         string   `json:"scope,omitempty"`
	ContentDigest string   `json:"content_digest"`
	Path          string   `json:"path,omitempty"`
	Tool          string   `json:"tool,omitempty"`
	Origins       []string `json:"origins,omitempty"`
	ModelMade     bool     `json:"model_made,omitempty"`
}

// SpendRequest spends a grant. Args (or their Digest, hex) must be the
// same request the grant was minted for. With Args, the issuer checks the
// call's target for drift: Cwd and ResolvedTarget (optional) are the
// resolution context at spend time, as in GrantRequest.
type SpendRequest struct {
	V              int             `json:"v"`
	GrantID        string          `json:"grant_id"`
	Args           json.RawMessage `json:"args,omitempty"`
	Digest         string          `json:"digest,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
	Cwd            string          `json:"cwd,omitempty"`
	ResolvedTarget string          `json:"resolved_target,omitempty"`
}

// EffectRequest reports what happened after a spend.
type EffectRequest struct {
	V        int    `json:"v"`
	GrantID  string `json:"grant_id"`
	Outcome  string `json:"outcome"`
	Verifier string `json:"verifier"`
}

// EffectSourceRequest reports a spent grant's outcome (the fields of
// EffectRequest) and registers the call's result (Source, a
// SourceRequest whose v may be left out) in one log entry.
type EffectSourceRequest struct {
	V        int           `json:"v"`
	GrantID  string        `json:"grant_id"`
	Outcome  string        `json:"outcome"`
	Verifier string        `json:"verifier"`
	Source   SourceRequest `json:"source"`
}

// RevokeRequest names exactly one of Worker, Source or Lane.
type RevokeRequest struct {
	V      int    `json:"v"`
	Worker string `json:"worker,omitempty"`
	Source string `json:"source,omitempty"`
	Lane   string `json:"lane,omitempty"`
}

// ApproveRequest approves the open review ReviewID: the exact call it
// held (the same worker, tool and request digest) is permitted once when
// the worker asks again within TTLMillis (0: DefaultApprovalTTL; at most
// MaxApprovalTTL). The policy still runs: an approval turns only an
// approval_required answer into a permit, never a deny. Note is recorded
// in the approval receipt.
type ApproveRequest struct {
	V         int    `json:"v"`
	ReviewID  string `json:"review_id"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Approval lifetimes and the note bound.
const (
	DefaultApprovalTTLMillis = 10 * 60 * 1000
	MaxApprovalTTLMillis     = 24 * 60 * 60 * 1000
	MaxApprovalNote          = 1024
)

// BreakGlassRequest opens a break-glass case: for TTLMillis, auditors
// may show the payloads (targets, idempotency keys, notes) of the
// receipts in Scope, which they otherwise show only as digests. Scope is
// BreakGlassWorkerScope followed by a worker id. The case is recorded as
// a break_glass receipt with Reason; every page an auditor's web view
// shows under it is recorded by that auditor.
type BreakGlassRequest struct {
	V         int    `json:"v"`
	CaseID    string `json:"case_id"`
	Scope     string `json:"scope"`
	TTLMillis int64  `json:"ttl_ms"`
	Reason    string `json:"reason"`
}

// Break-glass bounds and the one scope form.
const (
	// BreakGlassWorkerScope prefixes a worker id in a break-glass scope.
	BreakGlassWorkerScope = "worker:"
	// MaxBreakGlassTTLMillis bounds a case's lifetime (8h).
	MaxBreakGlassTTLMillis = 8 * 60 * 60 * 1000
	// MaxBreakGlassReason bounds the reason's length in bytes.
	MaxBreakGlassReason = 1024
)

// ParseBreakGlassScope returns the worker a break-glass scope names, or
// an error saying the one accepted form.
func ParseBreakGlassScope(scope string) (string, error) {
	w, ok := strings.CutPrefix(scope, BreakGlassWorkerScope)
	if !ok {
		return "", fmt.Errorf("%w: scope %q: want %s<worker id>", ErrBadToken, scope, BreakGlassWorkerScope)
	}
	if err := ValidID(w); err != nil {
		return "", err
	}
	return w, nil
}

// ReinstateRequest lifts a revoked worker's bar.
type ReinstateRequest struct {
	V      int    `json:"v"`
	Worker string `json:"worker"`
}

// PolicyRequest applies a policy document (JSON) and moves the epoch.
type PolicyRequest struct {
	V      int             `json:"v"`
	Policy json.RawMessage `json:"policy"`
}

// PolicyShowRequest asks for the policy document of an epoch (0: the one
// in force).
type PolicyShowRequest struct {
	V     int    `json:"v"`
	Epoch uint64 `json:"epoch,omitempty"`
}

// PolicyShow is the answer to a PolicyShowRequest: the epoch, the
// document's canonical JSON and digest, and the sequence of the epoch
// receipt that applied it (0 when it was read from the state machine
// rather than the receipt stream). Error is set instead when the epoch
// cannot be shown.
type PolicyShow struct {
	Epoch  uint64          `json:"epoch"`
	Digest string          `json:"digest,omitempty"`
	Seq    uint64          `json:"seq,omitempty"`
	Policy json.RawMessage `json:"policy,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// StatusRequest asks the leader for its status.
type StatusRequest struct {
	V int `json:"v"`
}

// Peer is one raft server as the leader sees it.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
}

// Status is the leader's view of the cluster and the state machine.
type Status struct {
	Node          string `json:"node"`
	Leader        string `json:"leader"`
	State         string `json:"state"`
	Term          uint64 `json:"term"`
	CommitIndex   uint64 `json:"commit_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	Peers         []Peer `json:"peers"`
	Clock         int64  `json:"clock"`
	Epoch         uint64 `json:"epoch"`
	PolicyDigest  string `json:"policy_digest"`
	StateDigest   string `json:"state_digest"`
	Grants        int    `json:"grants"`
	Permitted     int    `json:"permitted"`
	Spent         int    `json:"spent"`
	Closed        int    `json:"closed"`
	Revoked       int    `json:"revoked"`
	Idempotency   int    `json:"idempotency_records"`
	Counters      int    `json:"counters"`
	BarredWorkers int    `json:"barred_workers"`
	Sources       int    `json:"sources"`
	OpenReviews   int    `json:"open_reviews"` // approval_required answers an operator may still approve
	Approvals     int    `json:"approvals"`    // approvals waiting for the worker's retry
	Routes        int    `json:"routes"`       // routes ever acquired
	LiveLeases    int    `json:"live_leases"`  // routes with a live lease at the control-plane clock
	Seq           uint64 `json:"seq"`
	Head          string `json:"head"`
	Published     uint64 `json:"published"`
	Outbox        int    `json:"outbox"`
	StreamLastSeq uint64 `json:"stream_last_seq"`
	// PublishRounds counts the publication rounds this node has completed
	// while leading (each carries one or more receipts, each its own
	// stream message).
	PublishRounds uint64 `json:"publish_rounds,omitempty"`
	DevMode       bool   `json:"dev_mode"`
	// Receipt format levels: the highest this node's build writes
	// (ReceiptFormat; a build that predates levels omits it, which means
	// 1) and the one the cluster has raised the state to
	// (ReceiptFormatLevel). The leader raises the level once every voter
	// reports a ReceiptFormat that reaches it.
	ReceiptFormat      uint64 `json:"receipt_format,omitempty"`
	ReceiptFormatLevel uint64 `json:"receipt_format_level,omitempty"`

	// Raft log and storage of this node.
	LastLogIndex  uint64 `json:"last_log_index"`
	FirstLogIndex uint64 `json:"first_log_index"` // first index still in the log store; older ones are in a snapshot
	SnapshotIndex uint64 `json:"snapshot_index"`  // latest raft snapshot (0: none)
	// LastContactMS is how long ago (ms) this follower last heard from its
	// leader: 0 on the leader, -1 if never.
	LastContactMS int64 `json:"last_contact_ms"`
	// Durability as the running stores have it: the raft log's NoSync
	// (must be false) and JetStream's sync-every-write (must be true).
	// The *_known fields are false when the setting could not be read
	// (for example JetStream with an external NATS cluster).
	RaftLogNoSync       bool `json:"raft_log_no_sync"`
	RaftLogSyncKnown    bool `json:"raft_log_sync_known"`
	JetStreamSyncAlways bool `json:"jetstream_sync_always"`
	JetStreamSyncKnown  bool `json:"jetstream_sync_known"`
	// RaftLogStore is the store holding the raft log: "wal" or "boltdb".
	RaftLogStore string `json:"raft_log_store,omitempty"`
	// Transport security of this node.
	RaftTLS bool `json:"raft_tls"`
	NATSTLS bool `json:"nats_tls"`
	Auth    bool `json:"auth"`
	// Publication, on the leader: whether the outbox is draining (empty,
	// or the stream advanced within the last few seconds), when the stream
	// last advanced (unix ns), the last publication error, and the receipts
	// the stream lost (its last seq fell below the confirmed watermark).
	OutboxDraining    bool   `json:"outbox_draining"`
	LastPublishedAt   int64  `json:"last_published_at,omitempty"`
	PublishError      string `json:"publish_error,omitempty"`
	StreamLostFrom    uint64 `json:"stream_lost_from,omitempty"`
	StreamLostThrough uint64 `json:"stream_lost_through,omitempty"`
	// StorageError is the raft store's last write error while writes keep
	// failing (disk full, read-only); StorageFailingMS how long they have.
	StorageError     string `json:"storage_error,omitempty"`
	StorageFailingMS int64  `json:"storage_failing_ms,omitempty"`
	// NATSURL is the client URL of the NATS server embedded in this node,
	// as it advertises it (empty when it advertises none). The status on
	// SubjectStatus is the leader's, so there it names the server where
	// requests enter without a route hop.
	NATSURL string `json:"nats_url,omitempty"`
}

// HeaderLeaderNATS is the NATS header a leader puts on its answers to
// worker requests: its advertised client URL (as Status.NATSURL). A
// client whose server list holds that URL may move its connection there
// (see connect.Affinity); a client that ignores it loses nothing, as
// requests entering at any server of the cluster are routed to the leader.
const HeaderLeaderNATS = "Writ-Leader-Nats"

// SubjectLeader carries the leader's LeaderAnnouncement, published when it
// starts serving and every few seconds while it does, so that idle clients
// also follow a new leader. Every user may subscribe to it; only issuers
// publish on it.
const SubjectLeader = "writ.leader"

// LeaderAnnouncement names the node serving as leader and the client URL
// of its NATS server (as Status.NATSURL).
type LeaderAnnouncement struct {
	V       int    `json:"v"`
	Node    string `json:"node"`
	Term    uint64 `json:"term"`
	NATSURL string `json:"nats_url"`
}
