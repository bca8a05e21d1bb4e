package fsm

import (
	"container/heap"
	"math"
	"sort"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// RetainMargin is how long past its expiry a grant (and the idempotency
// record of its request) stays in memory, on the control-plane clock. After
// that a spend is refused as unknown_grant, which is what it would be as
// expired anyway; the grant lives on in the receipt stream.
//
// The boundary is exact: from control-plane time ExpiresAt+RetainMargin on
// (saturated at the end of time), Decide treats the grant and its request's
// idempotency record as gone, whether or not an event has moved the clock
// far enough to drop them from memory yet. A refused request's record is
// kept for RetainMargin after the refusal.
const RetainMargin = int64(5 * time.Minute)

// idemID identifies a grant request's idempotency record.
type idemID struct {
	Worker string
	Key    string
}

// idemRecord is enough to answer a retried request with its original
// envelope: permits are rebuilt from the grant, refusals from the record.
type idemRecord struct {
	Tool    string
	Digest  events.Hash
	Seq     uint64
	GrantID string // set for permits
	Reason  grants.Reason
	Missing string
	Detail  string
	Rules   []string
	Epoch   uint64
	Until   int64 // forgotten when the clock passes this
	// Decision is grants.ApprovalRequired for an approval_required answer
	// (with its ReviewID), "" for a permit or a refusal.
	Decision grants.Decision
	ReviewID string
	// Grounds are the provenance grounds of the answer (see
	// events.Event.Grounds), for permits and refusals alike.
	Grounds []string
}

// State is the replicated state. The zero value is not usable; call New.
type State struct {
	clock     int64
	epoch     uint64
	policy    *policy.Policy // nil until the first policy is applied
	polDigest events.Hash
	counters  revocation.Counters
	barred    map[string]bool
	grants    map[string]*grants.Grant
	byWorker  map[string]map[string]struct{}
	idem      map[idemID]*idemRecord
	ledger    map[string]*ledgerEntry // effect ledger, by key
	preauth   map[string]*preauthUse  // preauthorization consumption, by id
	quota     map[string]*quotaWindow // quota windows, by quota key
	sources   map[string]*source      // the source registry, by id
	// srcByOwner indexes sources by the worker that registered them.
	srcByOwner map[string]map[string]struct{}
	expiry     expiryHeap
	chain      events.Chain

	// Publication bookkeeping, not authority: excluded from Digest.
	outbox    []Pending
	published uint64
}

// Pending is an encoded event waiting to be confirmed in the stream.
type Pending struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// New returns the empty state: no policy (every request is refused until
// one is applied), epoch 0, clock 0.
func New() *State {
	return &State{
		barred:   map[string]bool{},
		grants:   map[string]*grants.Grant{},
		byWorker: map[string]map[string]struct{}{},
		idem:     map[idemID]*idemRecord{},
		ledger:   map[string]*ledgerEntry{},
		preauth:  map[string]*preauthUse{},
		quota:    map[string]*quotaWindow{},
		sources:  map[string]*source{},

		srcByOwner: map[string]map[string]struct{}{},
	}
}

// Clock is the control-plane clock (unix ns).
func (s *State) Clock() int64 { return s.clock }

// Epoch is the current policy epoch.
func (s *State) Epoch() uint64 { return s.epoch }

// Policy returns the policy in force (nil before the first one) and its
// digest. The caller must not modify it.
func (s *State) Policy() (*policy.Policy, events.Hash) { return s.policy, s.polDigest }

// Chain is the receipt chain head.
func (s *State) Chain() events.Chain { return s.chain }

// Published is the highest receipt sequence confirmed in the stream.
func (s *State) Published() uint64 { return s.published }

// Outbox returns up to max pending receipts after seq (all when max <= 0).
// The returned slice is a copy; the Data buffers are shared and immutable.
func (s *State) Outbox(after uint64, max int) []Pending {
	i := sort.Search(len(s.outbox), func(i int) bool { return s.outbox[i].Seq > after })
	end := len(s.outbox)
	if max > 0 && end-i > max {
		end = i + max
	}
	return append([]Pending(nil), s.outbox[i:end]...)
}

// OutboxLen is the number of receipts not yet confirmed published.
func (s *State) OutboxLen() int { return len(s.outbox) }

// Grant returns a copy of a live grant.
func (s *State) Grant(id string) (grants.Grant, bool) {
	g, ok := s.grants[id]
	if !ok {
		return grants.Grant{}, false
	}
	return *g, true
}

// Stats summarises the state for status displays.
type Stats struct {
	Clock     int64  `json:"clock"`
	Epoch     uint64 `json:"epoch"`
	Grants    int    `json:"grants"`
	Permitted int    `json:"permitted"`
	Spent     int    `json:"spent"`
	Closed    int    `json:"closed"`
	Revoked   int    `json:"revoked"`
	Idem      int    `json:"idempotency_records"`
	Counters  int    `json:"counters"`
	Barred    int    `json:"barred_workers"`
	Seq       uint64 `json:"seq"`
	Head      string `json:"head"`
	Published uint64 `json:"published"`
	Outbox    int    `json:"outbox"`
	Ledger    int    `json:"ledger_entries"`
	Preauths  int    `json:"preauthorizations_used"`
	Quotas    int    `json:"quota_windows"`
	Sources   int    `json:"sources"`
}

// Stats counts what the state holds.
func (s *State) Stats() Stats {
	st := Stats{
		Clock: s.clock, Epoch: s.epoch, Grants: len(s.grants), Idem: len(s.idem),
		Counters: s.counters.Len(), Barred: len(s.barred), Seq: s.chain.Seq,
		Head: s.chain.Head.String(), Published: s.published, Outbox: len(s.outbox),
		Ledger: len(s.ledger), Preauths: len(s.preauth), Quotas: len(s.quota),
		Sources: len(s.sources),
	}
	for _, g := range s.grants {
		switch g.Status {
		case grants.StatusPermitted:
			st.Permitted++
		case grants.StatusSpent:
			st.Spent++
		case grants.StatusClosed:
			st.Closed++
		case grants.StatusRevoked:
			st.Revoked++
		}
	}
	return st
}

// What an expiry item removes.
const (
	expireGrantOrIdem uint8 = iota // Grant set: a grant; otherwise Idem
	expireLedger
	expirePreauth
	expireQuota
	expireSource
)

// expiryItem schedules a grant, an idempotency record, an effect-ledger
// entry, a preauthorization's consumption record, a quota window or a
// registered source for removal.
type expiryItem struct {
	At    int64
	Kind  uint8
	Grant string // grant id, or "" for an idempotency record
	Idem  idemID
	Key   string // ledger key, preauthorization id, quota key or source id
}

func (a expiryItem) less(b expiryItem) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Grant != b.Grant {
		return a.Grant < b.Grant
	}
	if a.Idem.Worker != b.Idem.Worker {
		return a.Idem.Worker < b.Idem.Worker
	}
	if a.Idem.Key != b.Idem.Key {
		return a.Idem.Key < b.Idem.Key
	}
	return a.Key < b.Key
}

// expiryHeap pops in a total order (time, then ids), so removals happen in
// the same order on every replica whatever the heap's internal layout.
type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// addSat is a+b saturated to the int64 range, so that a hostile or absurd
// batch time cannot wrap an expiry around into the past (or the far
// future). Both operands are times or durations on the control-plane clock.
func addSat(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// retainUntil is when a grant leaves the state: its expiry plus the margin.
func retainUntil(g *grants.Grant) int64 { return addSat(g.ExpiresAt, RetainMargin) }

// liveGrant returns the grant id names if it is still retained at control-
// plane time now. Pruning happens only when an event moves the clock, so a
// grant whose retention ended between the last event and now may still be in
// the map; Decide must judge it as gone, exactly as it would have been had
// any other event moved the clock first. It never modifies s.
func (s *State) liveGrant(id string, now int64) (*grants.Grant, bool) {
	g, ok := s.grants[id]
	if !ok || now >= retainUntil(g) {
		return nil, false
	}
	return g, true
}

// liveIdem is liveGrant for idempotency records.
func (s *State) liveIdem(id idemID, now int64) (*idemRecord, bool) {
	r, ok := s.idem[id]
	if !ok || now >= r.Until {
		return nil, false
	}
	return r, true
}

// advance moves the clock forward (never back) and forgets grants and
// idempotency records whose retention has passed.
func (s *State) advance(t int64) {
	if t > s.clock {
		s.clock = t
	}
	s.prune()
}

// prune forgets grants, idempotency records, effect-ledger entries,
// preauthorization consumption, quota windows and registered sources whose
// retention time is at or before the clock.
func (s *State) prune() {
	for len(s.expiry) > 0 && s.expiry[0].At <= s.clock {
		it := heap.Pop(&s.expiry).(expiryItem)
		if it.Kind == expireSource {
			if r, ok := s.sources[it.Key]; ok && r.until() == it.At {
				s.dropSource(r)
			}
			continue
		}
		if it.Kind != expireGrantOrIdem {
			s.pruneUsage(it)
			continue
		}
		if it.Grant != "" {
			if g, ok := s.grants[it.Grant]; ok && retainUntil(g) == it.At {
				s.dropGrant(g)
			}
			continue
		}
		if r, ok := s.idem[it.Idem]; ok && r.Until == it.At {
			delete(s.idem, it.Idem)
		}
	}
}

func (s *State) dropGrant(g *grants.Grant) {
	delete(s.grants, g.ID)
	if m := s.byWorker[g.Worker]; m != nil {
		delete(m, g.ID)
		if len(m) == 0 {
			delete(s.byWorker, g.Worker)
		}
	}
}

func (s *State) addGrant(g *grants.Grant) {
	if old, ok := s.grants[g.ID]; ok {
		// Decide never reuses a live id; a replayed stream might. Keep the
		// per-worker index consistent with the grant map either way.
		s.dropGrant(old)
	}
	s.grants[g.ID] = g
	m := s.byWorker[g.Worker]
	if m == nil {
		m = map[string]struct{}{}
		s.byWorker[g.Worker] = m
	}
	m[g.ID] = struct{}{}
	heap.Push(&s.expiry, expiryItem{At: retainUntil(g), Grant: g.ID})
}

func (s *State) addIdem(id idemID, r *idemRecord) {
	s.idem[id] = r
	heap.Push(&s.expiry, expiryItem{At: r.Until, Idem: id})
}

// outstanding returns the ids of a worker's unspent, unexpired grants at
// control-plane time now, sorted. An expired grant is not outstanding: it
// can no longer be spent, so a revocation has nothing to cancel.
func (s *State) outstanding(worker string, now int64) []string {
	var ids []string
	for id := range s.byWorker[worker] {
		if g := s.grants[id]; g != nil && g.Worker == worker && g.Status == grants.StatusPermitted && now < g.ExpiresAt {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}
