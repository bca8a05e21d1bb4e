package api

// Read-only operator queries: they are answered by the leader from the
// state it has applied, and never reach the log.
const (
	// SubjectReviews lists the open reviews, or shows one
	// (ReviewsRequest, answered with Reviews).
	SubjectReviews = OperatorPrefix + "reviews"
	// SubjectPolicyTest judges one grant request without recording it
	// (PolicyTestRequest, answered with PolicyTestAnswer).
	SubjectPolicyTest = OperatorPrefix + "policy.test"
)

// ReviewsRequest asks for the open reviews, or with ID for one review
// (open, or approved and waiting for the worker's retry).
type ReviewsRequest struct {
	V  int    `json:"v"`
	ID string `json:"id,omitempty"`
}

// Review is one review as the leader holds it. A review stays open until
// it is approved, its worker is revoked, or Until passes; an approved one
// is listed until its approval is used or expires.
type Review struct {
	ID      string `json:"id"`
	State   string `json:"state"` // "open" or "approved"
	Worker  string `json:"worker"`
	Lane    string `json:"lane"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// Digest is the request digest, H(tool, canonical args): the exact
	// call an approval binds.
	Digest string `json:"digest"`
	Reason string `json:"reason,omitempty"`
	// Seq is the approval_required receipt that opened the review.
	Seq uint64 `json:"seq"`
	// OpenedAt and Until are control-plane times (Unix ns): when the
	// review was opened and when it closes unapproved.
	OpenedAt int64 `json:"opened_at"`
	Until    int64 `json:"until"`
	// ApprovalExpires is when an approved review's approval lapses unused.
	ApprovalExpires int64 `json:"approval_expires,omitempty"`
	// From the receipt, for a single review: the rules that fired, what
	// was missing, the detail, the target and the provenance grounds.
	Rules   []string `json:"rules,omitempty"`
	Missing string   `json:"missing,omitempty"`
	Detail  string   `json:"detail,omitempty"`
	Surface string   `json:"surface,omitempty"`
	Target  string   `json:"target,omitempty"`
	Grounds []string `json:"grounds,omitempty"`
	// Decision records (receipt format level 4): the caption a person
	// decides (<slug>_v<N>_review) and its keep token, and for an
	// artifact review the artifact, the transition, the destination and
	// the reviewer role; who decided it. State is then also rejected,
	// consumed, superseded or expired (kept until Until, as history).
	Caption        string `json:"caption,omitempty"`
	Keep           string `json:"keep,omitempty"`
	ArtifactPath   string `json:"artifact_path,omitempty"`
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
	Transition     string `json:"transition,omitempty"`
	Destination    string `json:"destination,omitempty"`
	ReviewerRole   string `json:"reviewer_role,omitempty"`
	DecidedBy      string `json:"decided_by,omitempty"`
}

// Reviews answers ReviewsRequest: Clock is the leader's control-plane
// time, Error a refusal (an unknown id, a malformed request).
type Reviews struct {
	Clock   int64    `json:"clock"`
	Reviews []Review `json:"reviews"`
	Error   string   `json:"error,omitempty"`
}

// PolicyTestRequest is one grant request to judge, as Worker would send it.
type PolicyTestRequest struct {
	V       int          `json:"v"`
	Worker  string       `json:"worker"`
	Request GrantRequest `json:"request"`
}

// PolicyTestAnswer is the decision the policy in force would give the
// request now, with the state's usage, and what it rests on. Nothing is
// recorded: no grant, review, receipt or ledger entry.
type PolicyTestAnswer struct {
	Epoch        uint64   `json:"epoch"`
	PolicyDigest string   `json:"policy_digest"`
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason,omitempty"`
	Missing      string   `json:"missing,omitempty"`
	Detail       string   `json:"detail,omitempty"`
	Rules        []string `json:"rules,omitempty"`
	Grounds      []string `json:"grounds,omitempty"`
	Surface      string   `json:"surface,omitempty"`
	Operation    string   `json:"operation,omitempty"`
	Consequence  string   `json:"consequence,omitempty"`
	Target       string   `json:"target,omitempty"`
	ExpiresInMS  int64    `json:"expires_in_ms,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// SubjectRoutes lists the route leases (RoutesRequest, answered with
// Routes).
const SubjectRoutes = OperatorPrefix + "routes"

// RoutesRequest asks for every route the leader knows.
type RoutesRequest struct {
	V int `json:"v"`
}

// RouteLease is one route as the leader holds it: its fencing generation
// (the highest issued), its owner (the live one, or the last), whether
// the lease is live and for how long, or how it ended.
type RouteLease struct {
	Route      string `json:"route"`
	Generation uint64 `json:"generation"`
	Owner      string `json:"owner"`
	Lane       string `json:"lane,omitempty"`
	Live       bool   `json:"live"`
	AcquiredAt int64  `json:"acquired_at"`
	ExpiresAt  int64  `json:"expires_at"`
	LeftMillis int64  `json:"left_ms,omitempty"`
	Ended      string `json:"ended,omitempty"` // released, lapsed or revoked
	EndedAt    int64  `json:"ended_at,omitempty"`
}

// Routes answers RoutesRequest: Clock is the time the leases were judged
// at (the leader's wall clock, at least its control-plane clock). Records
// free for a day are forgotten from receipt format level 7 and no longer
// listed.
type Routes struct {
	Clock  int64        `json:"clock"`
	Routes []RouteLease `json:"routes"`
	Error  string       `json:"error,omitempty"`
	// GenerationFloor is the generation high-water mark: the highest
	// generation of a route record forgotten after its retention
	// (receipt format level 7); a route with no record is acquired above
	// it. 0 while no record was forgotten.
	GenerationFloor uint64 `json:"generation_floor,omitempty"`
}
