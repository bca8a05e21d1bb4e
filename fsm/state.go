package fsm

import (
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

// ReviewRetention is how long a review stays open for an operator's
// approval after the approval_required answer that opened it: long enough
// for a person to be reached, on the control-plane clock.
const ReviewRetention = int64(time.Hour)

// idemID identifies a grant request's idempotency record.
type idemID struct {
	Worker string
	Key    string
}

// idemRecord is enough to answer a retried request with its original
// envelope: permits are rebuilt from the grant, refusals from the record.
// What only some answers carry is kept apart (Answer), so that the record
// of a plain permit, one per live grant, stays small.
type idemRecord struct {
	Tool    string
	Digest  events.Hash
	Seq     uint64
	GrantID string // set for permits
	Epoch   uint64
	Until   int64 // forgotten when the clock passes this
	Answer  *idemAnswer
}

// idemAnswer is the rest of a recorded answer: the refusal (reason,
// missing fact, detail, rules), an approval_required decision with its
// ReviewID (or, for a permit, the ReviewID of the approval that covered
// it), and the provenance grounds (see events.Event.Grounds) of a
// permit or a refusal. A record whose answer has none of these has a nil
// Answer.
type idemAnswer struct {
	Reason   grants.Reason
	Missing  string
	Detail   string
	Rules    []string
	Decision grants.Decision // grants.ApprovalRequired, or "" for a permit or a refusal
	ReviewID string
	Grounds  []string
}

func (a *idemAnswer) empty() bool {
	return a.Reason == "" && a.Missing == "" && a.Detail == "" && len(a.Rules) == 0 &&
		a.Decision == "" && a.ReviewID == "" && len(a.Grounds) == 0
}

// answer returns the record's answer fields (zero when it has none).
func (r *idemRecord) answer() idemAnswer {
	if r.Answer == nil {
		return idemAnswer{}
	}
	return *r.Answer
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
	// byWorker indexes grants by worker, for the revocations Decide
	// judges (outstanding). Apply builds it (indexWorkers) and it is kept
	// from then on; a state that only Evolve has moved (a replay, an
	// auditor's projection) has none, and does not pay for it. A set
	// holds the grants themselves: a pointer hashes and compares faster
	// than a grant id, and takes half the room.
	byWorker map[string]*idSet[*grants.Grant]
	idem     map[idemID]*idemRecord
	ledger   map[string]*ledgerEntry // effect ledger, by key
	preauth  map[string]*preauthUse  // preauthorization consumption, by id
	quota    map[string]*quotaWindow // quota windows, by quota key
	sources  map[string]*source      // the source registry, by id
	// srcByOwner indexes sources by the worker that registered them.
	srcByOwner map[string]*idSet[string]
	reviews    map[string]*review         // open reviews, by review id
	approvals  map[approvalKey]*approval  // live approvals, by the call they cover
	replies    map[events.Hash]*replySeen // plain-text replies already decoded, by replyKey
	routes     map[string]*route          // route leases, by route name (forgotten from level 7: route.go)
	// routeFloor is the generation high-water mark: the highest generation
	// of any forgotten route record; a route with no record is acquired
	// above it (0 until a record is forgotten).
	routeFloor uint64
	fleet      map[string]*member // spawned and respawned workers, by id: kept for good
	// userKeys maps the NATS user keys spawns recorded to their worker
	// (level 12), so that no key is recorded twice; built from the fleet.
	userKeys  map[string]string
	expiry    expiryHeap // with expiryRun, what prune will forget when
	expiryRun expiryRun
	chain     events.Chain

	// Memory only, never state: shared copies of what grants repeat, and
	// the peak sizes that decide when a map is rebuilt smaller.
	intern interner
	peaks  peaks
	// warmSink keeps warmDue's reads from being optimized away; it means
	// nothing.
	warmSink byte
	// mirror holds FreezeDigest's encodings of the grants and records, and
	// notes what changed since its last call; both nil until FreezeDigest
	// is first called (see mirror.go).
	mirror *digestMirror
	notes  *mirrorNotes

	// Publication bookkeeping, not authority: excluded from Digest. format
	// is the receipt format level (0 until raised: see ReceiptFormat).
	outbox    []Pending
	published uint64
	format    uint64
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
		barred:  map[string]bool{},
		grants:  map[string]*grants.Grant{},
		idem:    map[idemID]*idemRecord{},
		ledger:  map[string]*ledgerEntry{},
		preauth: map[string]*preauthUse{},
		quota:   map[string]*quotaWindow{},
		sources: map[string]*source{},

		srcByOwner: map[string]*idSet[string]{},
		reviews:    map[string]*review{},
		approvals:  map[approvalKey]*approval{},
		replies:    map[events.Hash]*replySeen{},
		routes:     map[string]*route{},
		fleet:      map[string]*member{},
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

// OutboxAfter returns how many pending receipts come after seq.
func (s *State) OutboxAfter(seq uint64) int {
	return len(s.outbox) - sort.Search(len(s.outbox), func(i int) bool { return s.outbox[i].Seq > seq })
}

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
	Reviews   int    `json:"open_reviews"`
	Approvals int    `json:"approvals"`
	Routes    int    `json:"routes"`
	Leases    int    `json:"live_leases"`
}

// Stats counts what the state holds.
func (s *State) Stats() Stats {
	st := Stats{
		Clock: s.clock, Epoch: s.epoch, Grants: len(s.grants), Idem: len(s.idem),
		Counters: s.counters.Len(), Barred: len(s.barred), Seq: s.chain.Seq,
		Head: s.chain.Head.String(), Published: s.published, Outbox: len(s.outbox),
		Ledger: len(s.ledger), Preauths: len(s.preauth), Quotas: len(s.quota),
		Sources: len(s.sources), Approvals: len(s.approvals),
		Routes: len(s.routes),
	}
	for _, r := range s.reviews {
		// Decision records stay after they are decided, as history:
		// only the undecided ones are open.
		if r.Status == rsOpen {
			st.Reviews++
		}
	}
	for _, r := range s.routes {
		if r.live(s.clock) {
			st.Leases++
		}
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

// AddSat is a+b saturated to the int64 range, so that a hostile or absurd
// batch time cannot wrap an expiry around into the past (or the far
// future). Both operands are times or durations on the control-plane clock.
// The auditor computes retention with it too, so that both saturate alike.
func AddSat(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return math.MaxInt64
	case b < 0 && c > a:
		return math.MinInt64
	}
	return c
}

// RetainUntil is when a grant that expires at expiresAt leaves the state:
// its expiry plus RetainMargin, saturated.
func RetainUntil(expiresAt int64) int64 { return AddSat(expiresAt, RetainMargin) }

// liveGrant returns the grant id names if it is still retained at control-
// plane time now. Pruning happens only when an event moves the clock, so a
// grant whose retention ended between the last event and now may still be in
// the map; Decide must judge it as gone, exactly as it would have been had
// any other event moved the clock first. It never modifies s.
func (s *State) liveGrant(id string, now int64) (*grants.Grant, bool) {
	g, ok := s.grants[id]
	if !ok || now >= RetainUntil(g.ExpiresAt) {
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

// indexWorkers builds byWorker if it is not built yet.
func (s *State) indexWorkers() {
	if s.byWorker != nil {
		return
	}
	s.byWorker = make(map[string]*idSet[*grants.Grant])
	for _, g := range s.grants {
		s.indexGrant(g)
	}
}

// addGrant records g and schedules its removal. The item also removes the
// idempotency record (g.Worker, g.IdemKey) if that record's retention ends
// with g's: addIdem need not schedule a record it was told is covered.
func (s *State) addGrant(g *grants.Grant) {
	s.putGrant(g)
	s.schedule(RetainUntil(g.ExpiresAt), g.PermitSeq, expireGrant, g)
}

// addPermit is addGrant for a grant allocated with its request's
// idempotency record (which the caller adds, covered, with addIdem): the
// expiry item refers to both. It is ordered as addGrant's item for the
// grant alone, so the order of expiry is the same.
func (s *State) addPermit(p *permitRecords) {
	s.putGrant(&p.grant)
	s.schedule(RetainUntil(p.grant.ExpiresAt), p.grant.PermitSeq, expireGrant, p)
}

// putGrant records g without scheduling it (Restore schedules in bulk).
func (s *State) putGrant(g *grants.Grant) {
	s.touchGrant(g.ID)
	if s.byWorker == nil {
		// Not indexed (a replay): replacing a grant of the same id is
		// the map assignment alone, so one lookup instead of two.
		s.grants[g.ID] = g
		return
	}
	if old, ok := s.grants[g.ID]; ok {
		// Decide never reuses a live id; a replayed stream might. Keep the
		// per-worker index consistent with the grant map either way. The
		// old grant's item stays scheduled: it still removes the old
		// request's idempotency record on time.
		s.dropGrant(old)
	}
	s.grants[g.ID] = g
	if s.byWorker != nil {
		s.indexGrant(g)
	}
}

func (s *State) dropGrant(g *grants.Grant) {
	delete(s.grants, g.ID)
	s.touchGrant(g.ID)
	if s.byWorker == nil {
		return // not indexed (see State.byWorker)
	}
	if m := s.byWorker[g.Worker]; m != nil {
		m.remove(g)
		if m.len() == 0 {
			delete(s.byWorker, g.Worker)
		}
	}
}

// indexGrant adds g to the per-worker index.
func (s *State) indexGrant(g *grants.Grant) {
	m := s.byWorker[g.Worker]
	if m == nil {
		m = newIDSet[*grants.Grant]()
		s.byWorker[g.Worker] = m
	}
	m.add(g)
}

// addIdem records r under id. covered says the grant just added answered
// this request (same worker and key, same retention), so its expiry item
// removes r too; otherwise r is scheduled on its own.
func (s *State) addIdem(id idemID, r *idemRecord, covered bool) {
	s.idem[id] = r
	s.touchIdem(id)
	if !covered {
		ref := id
		s.schedule(r.Until, r.Seq, expireIdem, &ref)
	}
}

func (s *State) dropIdem(k idemID, at int64) {
	if r, ok := s.idem[k]; ok && r.Until == at {
		delete(s.idem, k)
		s.touchIdem(k)
	}
}

// coveredBy reports whether g's expiry item removes the record r under id.
func coveredBy(g *grants.Grant, id idemID, r *idemRecord) bool {
	return g != nil && g.Worker == id.Worker && g.IdemKey == id.Key && RetainUntil(g.ExpiresAt) == r.Until
}

func (s *State) addSource(r *source) {
	if old, ok := s.sources[r.ID]; ok {
		s.dropSource(old)
	}
	s.sources[r.ID] = r
	m := s.srcByOwner[r.Owner]
	if m == nil {
		m = newIDSet[string]()
		s.srcByOwner[r.Owner] = m
	}
	m.add(r.ID)
	s.schedule(r.until(), r.Seq, expireSource, r)
}

func (s *State) dropSource(r *source) {
	delete(s.sources, r.ID)
	if m := s.srcByOwner[r.Owner]; m != nil {
		m.remove(r.ID)
		if m.len() == 0 {
			delete(s.srcByOwner, r.Owner)
		}
	}
}

func (s *State) addReview(r *review) {
	s.reviews[r.ID] = r
	s.schedule(r.Until, r.Seq, expireReview, r)
}

func (s *State) addApproval(a *approval) {
	s.approvals[a.Key] = a
	s.schedule(a.ExpiresAt, a.Seq, expireApproval, a)
}
