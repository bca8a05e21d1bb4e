package grants

import "github.com/writ-dev/writ/events"

// Envelope is every answer the issuer gives: a program acts on Decision,
// Reason and Recovery without parsing prose. Times are unix nanoseconds on
// the control-plane clock.
//
// Fields after Detail are the grounds the policy engine (version 2 policy
// documents) adds: the surface and consequence class the call was judged
// as, the canonical target the grant binds and the label the caller gave,
// the instrument consumed and what is left of it, the amount and bytes
// charged and the effect-ledger key. They are empty for other answers.
// Append only.
type Envelope struct {
	Decision       Decision         `json:"decision"`
	GrantID        string           `json:"grant_id,omitempty"`
	ReviewID       string           `json:"review_id,omitempty"`
	Reason         Reason           `json:"reason,omitempty"`
	Missing        string           `json:"missing,omitempty"`
	Recovery       Recovery         `json:"recovery,omitempty"`
	Epoch          uint64           `json:"epoch,omitempty"`
	IssuedAt       int64            `json:"issued_at,omitempty"`
	ExpiresAt      int64            `json:"expires_at,omitempty"`
	Seq            uint64           `json:"seq,omitempty"` // receipt sequence of this answer
	Kind           events.Kind      `json:"kind,omitempty"`
	Digest         events.Hash      `json:"digest,omitzero"`
	Counters       []events.Counter `json:"counters,omitempty"` // grounds: counters seen
	Rules          []string         `json:"rules,omitempty"`    // grounds: rule ids
	Outcome        string           `json:"outcome,omitempty"`
	Detail         string           `json:"detail,omitempty"`
	Surface        string           `json:"surface,omitempty"`
	Operation      string           `json:"operation,omitempty"`
	Consequence    string           `json:"consequence,omitempty"`
	Target         string           `json:"target,omitempty"`
	TargetLabel    string           `json:"target_label,omitempty"`
	Instrument     string           `json:"instrument,omitempty"`
	InstrumentLeft string           `json:"instrument_left,omitempty"`
	Amount         uint64           `json:"amount,omitempty"`
	Bytes          uint64           `json:"bytes,omitempty"`
	LedgerKey      string           `json:"ledger_key,omitempty"`
	// Provenance: the authority the issuer assigned a registered source
	// (source answers), and the per-field provenance grounds of a grant
	// decision (see events.Event.Grounds).
	Authority string   `json:"authority,omitempty"`
	Grounds   []string `json:"grounds,omitempty"`
	// Caption is the human caption of the review an answer names
	// (<slug>_v<N>_review), from receipt format level 4: what a person
	// decides, by caption or keep token.
	Caption string `json:"caption,omitempty"`
	// Route ownership: the route and fencing generation an answer is
	// about (a lease, or work bound to one), the owner of the lease, and
	// for a take-over the lease it replaced.
	Route     string `json:"route,omitempty"`
	RouteGen  uint64 `json:"route_gen,omitempty"`
	Owner     string `json:"owner,omitempty"`
	PrevOwner string `json:"prev_owner,omitempty"`
	PrevGen   uint64 `json:"prev_gen,omitempty"`
	// Fleets (from receipt format level 8): the worker a spawn, restore
	// or respawn answer is about, its parent, lane and incarnation (what
	// a credential for a spawned child is minted from, with ExpiresAt);
	// on a worker revocation, every worker it revoked and every handle it
	// cancelled: grants (Cancelled), reviews and approvals (Reviews) and
	// route leases (Routes).
	Worker      string   `json:"worker,omitempty"`
	Parent      string   `json:"parent,omitempty"`
	Lane        string   `json:"lane,omitempty"`
	Incarnation uint64   `json:"incarnation,omitempty"`
	Workers     []string `json:"workers,omitempty"`
	Cancelled   []string `json:"cancelled,omitempty"`
	Reviews     []string `json:"reviews,omitempty"`
	Routes      []string `json:"routes,omitempty"`
	// Source is the answer to the source registration an effect report
	// carried in the same log entry (an effect_source request, from
	// receipt format level 11); the envelope itself answers the effect.
	Source *Envelope `json:"source,omitempty"`
	// Worker NATS credentials (operator mode, receipt format level 12): on
	// a spawn that named its child's user key, the user JWT the issuer
	// signed for that key (the parent pairs it with the seed it kept),
	// and a note saying what was, or why nothing was, signed.
	UserJWT        string `json:"user_jwt,omitempty"`
	CredentialNote string `json:"credential_note,omitempty"`
}

// Refuse builds a deny envelope with the reason's recovery class.
func Refuse(r Reason, missing, detail string) Envelope {
	return Envelope{Decision: Deny, Reason: r, Missing: missing, Recovery: RecoveryFor(r), Detail: detail}
}

// FromEvent builds the envelope a caller receives for the receipt e.
func FromEvent(e events.Event) Envelope {
	env := Envelope{
		Decision:       Decision(e.Decision),
		GrantID:        e.GrantID,
		ReviewID:       e.ReviewID,
		Reason:         Reason(e.Reason),
		Missing:        e.Missing,
		Recovery:       Recovery(e.Recovery),
		Epoch:          e.Epoch,
		IssuedAt:       e.IssuedAt,
		ExpiresAt:      e.ExpiresAt,
		Seq:            e.Seq,
		Kind:           e.Kind,
		Digest:         e.Digest,
		Counters:       e.Counters,
		Rules:          e.Rules,
		Outcome:        e.Outcome,
		Detail:         e.Detail,
		Surface:        e.Surface,
		Operation:      e.Operation,
		Consequence:    e.Consequence,
		Target:         e.Target,
		TargetLabel:    e.TargetLabel,
		Instrument:     e.Instrument,
		InstrumentLeft: e.InstrumentLeft,
		Amount:         e.Amount,
		Bytes:          e.Bytes,
		LedgerKey:      e.LedgerKey,
		Authority:      e.Authority,
		Grounds:        e.Grounds,
		Route:          e.Route,
		RouteGen:       e.RouteGen,
		PrevOwner:      e.PrevOwner,
		PrevGen:        e.PrevGen,
	}
	if e.Kind >= events.KindRouteAcquired && e.Kind <= events.KindRouteTaken {
		env.Owner = e.Worker
	}
	switch e.Kind {
	case events.KindSpawn, events.KindIncarnation, events.KindLift:
		env.Worker, env.Parent, env.Lane, env.Incarnation = e.Worker, e.Parent, e.Lane, e.Incarnation
	case events.KindRevoke:
		// Only a fleet-level revocation lists its workers; the handles
		// it cancelled are listed with them.
		if len(e.Workers) > 0 {
			env.Workers, env.Cancelled, env.Reviews, env.Routes = e.Workers, e.Cancelled, e.Reviews, e.Routes
		}
	}
	if e.SourceID != "" {
		// A source registration answers as it always has: the path as a
		// "path:" target and a model-made source as a "model_made" ground
		// (the event keeps them in fields of their own).
		if e.SourcePath != "" {
			env.Target = events.SourcePathPrefix + e.SourcePath
		}
		if e.ModelMade {
			env.Grounds = []string{events.GroundModelMade}
		}
	}
	return env
}
