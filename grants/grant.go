package grants

import (
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/revocation"
)

// Status is where a grant is in its lifecycle:
//
//	permitted -> spent -> closed (confirmed | failed | unknown | contested)
//	permitted -> revoked
//
// Expiry is not a stored status: it is decided against the control-plane
// clock at the moment of a spend.
type Status uint8

// Statuses. Stored in snapshots: append only.
const (
	StatusPermitted Status = 1
	StatusSpent     Status = 2
	StatusClosed    Status = 3
	StatusRevoked   Status = 4
)

var statusNames = [...]string{"", "permitted", "spent", "closed", "revoked"}

func (s Status) String() string {
	if int(s) < len(statusNames) && s != 0 {
		return statusNames[s]
	}
	return "unknown"
}

// Effect outcomes as reported by a named verifier.
const (
	OutcomeConfirmed = "confirmed"
	OutcomeFailed    = "failed"
	OutcomeUnknown   = "unknown"
	OutcomeContested = "contested"
)

// ValidOutcome reports whether o may be reported by a verifier.
// "contested" is only ever derived by the issuer.
func ValidOutcome(o string) bool {
	return o == OutcomeConfirmed || o == OutcomeFailed || o == OutcomeUnknown
}

// Grant is one capability ticket. Times are unix nanoseconds on the
// control-plane clock.
type Grant struct {
	ID        string
	Node      string // issuer node that proposed the permit
	Worker    string
	Lane      string
	Session   string
	Tool      string
	Digest    events.Hash
	Epoch     uint64
	Counters  []events.Counter // bound revocation counters, sorted by key
	Sources   []string
	IssuedAt  int64
	ExpiresAt int64
	IdemKey   string // the request's idempotency key
	PermitSeq uint64

	// Bindings of the policy engine (version 2 policy documents): the
	// surface, operation and consequence class the call was judged as,
	// the canonical target with the label the caller gave and the context
	// it was resolved in, the effect-ledger key, the instrument consumed
	// and what was left of it, the amount and bytes charged, and the rule
	// ids that grounded the permit. Empty for grants of version 1
	// policies.
	Surface        string
	Operation      string
	Consequence    string
	Target         string
	TargetLabel    string
	Cwd            string
	Resolved       string
	LedgerKey      string
	Instrument     string
	InstrumentLeft string
	Amount         uint64
	Bytes          uint64
	Rules          []string

	// Route ownership: the route the request was made under and the
	// fencing generation of its owner's lease when the grant was minted
	// (empty and 0 for work under no route). A spend is refused
	// owner_stale once that generation has ended.
	Route    string
	RouteGen uint64

	Status     Status
	AttemptKey string // idempotency key of the spend, once spent
	AttemptSeq uint64
	Outcome    string
	Verifier   string
	EffectSeq  uint64
	RevokedSeq uint64
}

// SpendInput is what a spender presents, plus the state it is judged
// against. Everything here comes from the committed log.
type SpendInput struct {
	Now      int64  // control-plane clock
	Spender  string // worker id taken from the transport, never the payload
	Digest   events.Hash
	IdemKey  string
	Epoch    uint64 // current policy epoch
	Counters *revocation.Counters
	// Drift is the canonical target the presented call resolves to under
	// the canonicalization rules in force, when the caller re-derived it
	// (the spend carried the call's arguments and matched the bound
	// digest) and it differs from the bound target; "" otherwise.
	Drift string
}

// CheckSpend applies the spend rules in a fixed order and returns the first
// refusal (ReasonNone when the spend may proceed) and the binding fact that
// was missing. A retry with the attempt's own idempotency key is not a
// refusal; callers detect it before calling CheckSpend (see IsRetry).
func CheckSpend(g *Grant, in SpendInput) (Reason, string) {
	switch {
	case g.Worker != in.Spender:
		return ReasonNotGrantee, "grantee"
	case g.Status == StatusRevoked:
		return ReasonGrantRevoked, "grant_status"
	case g.Status != StatusPermitted:
		return ReasonAlreadySpent, "unspent"
	case in.Now >= g.ExpiresAt:
		return ReasonExpired, "clock<expires_at"
	case in.Drift != "" && in.Drift != g.Target:
		// Before the epoch check: a policy change that moved the target is
		// reported as the more specific fact.
		return ReasonTargetDrift, "target"
	case in.Epoch != g.Epoch:
		return ReasonEpochStale, "epoch"
	}
	if c, stale := in.Counters.Stale(g.Counters); stale {
		scope, _, _ := revocation.ParseKey(c.Key)
		switch scope {
		case revocation.ScopeSource:
			return ReasonSourceRevoked, c.Key
		case revocation.ScopeWorker:
			return ReasonWorkerRevoked, c.Key
		case revocation.ScopeLane:
			return ReasonLaneRevoked, c.Key
		case revocation.ScopeIncarnation:
			// The worker was restored or respawned since: the grant
			// belongs to an incarnation that no longer exists.
			return ReasonGrantRevoked, c.Key
		default:
			return ReasonDestRevoked, c.Key
		}
	}
	if in.Digest != g.Digest {
		return ReasonDigestMismatch, "request_digest"
	}
	return ReasonNone, ""
}

// IsRetry reports whether a spend is a retry of the attempt that already
// spent g: same spender, same idempotency key, same request digest.
func IsRetry(g *Grant, spender string, digest events.Hash, idemKey string) bool {
	return g.Status != StatusPermitted && g.Status != StatusRevoked && g.AttemptSeq != 0 &&
		idemKey != "" && g.AttemptKey == idemKey && g.Worker == spender && g.Digest == digest
}
