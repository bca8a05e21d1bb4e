package fsm

import (
	"maps"
	"slices"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Frozen is a point-in-time view of everything a snapshot encodes, taken
// cheaply so that the raft adapter can hold its lock only for the copy and
// encode later, while Apply moves the live state on (hashicorp/raft's FSM
// contract: Snapshot captures, FSMSnapshot.Persist does the slow work).
//
// Freeze copies what Apply mutates and shares only what nothing ever
// mutates, which is what makes encoding a Frozen concurrently with Apply
// on the live state race-free:
//
//   - copied: every map (grants, idempotency records, bars, counters,
//     usage, sources, reviews, approvals, routes, fleet members), the outbox slice (whose array
//     confirmPublished rewrites in place), the grants themselves (Evolve
//     sets Status and the attempt, effect and revocation fields of a live
//     grant) and the usage records (charge adds to them in place);
//   - shared: the policy (parsed once, never modified), idempotency
//     records, sources, reviews and approvals (each replaced by a new
//     record, never modified once in a map), the strings and lists a grant
//     holds (see interner: never modified) and the outbox's encoded
//     receipts.
//
// The copy is proportional to the number of entries but does no sorting
// and no encoding; Encode does both.
type Frozen struct {
	s *State
}

// Freeze captures the state's snapshot contents. The caller must hold
// whatever serialises access to s (as for any State method); the Frozen
// it returns may be encoded afterwards from any goroutine, concurrently
// with further changes to s.
func (s *State) Freeze() Frozen {
	f := s.freezeShared()
	f.idem = maps.Clone(s.idem)      // the records themselves never change
	f.routes = copyRecords(s.routes) // evolveRoute changes a record in place
	f.grants = make(map[string]*grants.Grant, len(s.grants))
	gs := make([]grants.Grant, 0, len(s.grants)) // one allocation for every copy
	for id, g := range s.grants {
		gs = append(gs, *g)
		f.grants[id] = &gs[len(gs)-1]
	}
	return Frozen{s: f}
}

// freezeShared is Freeze without the grants, the idempotency records and
// the routes: everything else Apply mutates is copied, what it never
// mutates is shared.
func (s *State) freezeShared() *State {
	f := &State{
		clock: s.clock, epoch: s.epoch, policy: s.policy, polDigest: s.polDigest,
		counters: s.counters.Clone(), barred: maps.Clone(s.barred),
		sources: maps.Clone(s.sources),
		reviews: maps.Clone(s.reviews), approvals: maps.Clone(s.approvals), replies: maps.Clone(s.replies),
		chain: s.chain, outbox: slices.Clone(s.outbox), published: s.published,
		format: s.format, routeFloor: s.routeFloor,
	}
	f.ledger = copyRecords(s.ledger)
	f.preauth = copyRecords(s.preauth)
	f.quota = copyRecords(s.quota)
	f.fleet = copyRecords(s.fleet) // a respawn and a lift change a member in place
	return f
}

// copyRecords copies a map of records and the records it points to.
func copyRecords[V any](m map[string]*V) map[string]*V {
	out := make(map[string]*V, len(m))
	vs := make([]V, 0, len(m))
	for k, v := range m {
		vs = append(vs, *v)
		out[k] = &vs[len(vs)-1]
	}
	return out
}

// Digest returns the state digest as it was when the state was frozen:
// what State.Digest returned at that moment. Computing it from the frozen
// copy keeps the encoding and hashing out of whatever lock the caller
// froze under.
func (f Frozen) Digest() events.Hash { return f.s.Digest() }

// Encode returns the snapshot encoding of the state as it was when it was
// frozen: the bytes State.Snapshot returned at that moment.
func (f Frozen) Encode() []byte { return f.s.Snapshot() }
