package audit

import "github.com/writ-dev/writ/events"

// Summary describes the events a Verifier accepted (those before the first
// violation, if any).
type Summary struct {
	Events    uint64      `json:"events"`
	FirstSeq  uint64      `json:"first_seq"`
	LastSeq   uint64      `json:"last_seq"`
	Head      events.Hash `json:"head"`
	FirstTime int64       `json:"first_time"`
	LastTime  int64       `json:"last_time"`
	// Projection is the projection digest (zero, written "", for a partial
	// check or without a projection).
	Projection events.Hash `json:"projection_digest"`
	// Kinds counts events by kind name.
	Kinds map[string]uint64 `json:"kinds"`
	// Permitted, Spent and Cancelled count grants by what happened to
	// them: minted, attempted, cancelled by a revocation before an attempt.
	Permitted uint64 `json:"permitted"`
	Spent     uint64 `json:"spent"`
	Cancelled uint64 `json:"cancelled"`
	// Closed counts spent grants by their collapsed outcome (confirmed,
	// failed, unknown, contested); Contested repeats the last.
	Closed    map[string]uint64 `json:"closed"`
	Contested uint64            `json:"contested"`
	// Unresolved counts spent grants with no effect yet.
	Unresolved uint64 `json:"unresolved"`
	// Unchecked counts attempts and effects a partial check could only
	// check in part because their permit or attempt came before From.
	Unchecked uint64 `json:"unchecked,omitempty"`
	// StaleEffects counts effects reported after the route generation
	// their grant bound had ended (route_stale): recorded, never clean.
	StaleEffects uint64 `json:"stale_effects,omitempty"`
	// Tracked is the number of grants the Verifier still remembers.
	Tracked int `json:"tracked_grants"`
}

// Summary returns the counts so far. It computes the projection digest, so
// it costs time proportional to the live state; call it once at the end.
func (v *Verifier) Summary() Summary {
	s := Summary{
		Events:       v.nEvents,
		FirstSeq:     v.firstSeq,
		LastSeq:      v.chain.Seq,
		Head:         v.chain.Head,
		FirstTime:    v.firstTime,
		LastTime:     v.lastTime,
		Projection:   v.Digest(),
		Kinds:        make(map[string]uint64),
		Permitted:    v.permitted,
		Spent:        v.spent,
		Cancelled:    v.cancelled,
		Closed:       make(map[string]uint64, nOutcomes),
		Contested:    v.outcomes[oContested],
		Unresolved:   v.unresolved,
		Unchecked:    v.unchecked,
		Tracked:      len(v.live),
		StaleEffects: v.stale,
	}
	for k, n := range v.kinds {
		if n > 0 {
			s.Kinds[events.Kind(k).String()] = n
		}
	}
	for i, n := range v.outcomes {
		s.Closed[outcomeNames[i]] = n
	}
	return s
}
