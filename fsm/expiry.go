package fsm

import (
	"strings"

	"github.com/writ-dev/writ/grants"
)

// Expiry: every entry the state forgets on the clock (grants, idempotency
// records, effect-ledger entries, preauthorization consumption, quota
// windows, registered sources, open reviews, approvals) is scheduled as an
// item naming the entry and the time it is due, in one min-heap of items
// or, when it comes in order, in a FIFO run beside it (see expiryRun):
// together they are one priority queue.
//
// Correctness does not depend on the order in which due items are popped.
// An item due at At removes the entry it names only if that entry's
// retention ends exactly at At (a later event may have replaced or
// extended it, and then scheduled it again), and prune pops every item due
// at or before the clock before any decision or encoding looks at the
// state. So the entries a prune removes are exactly those whose retention
// has passed, whatever the order. The order is still total and derived
// from the entries alone, so every replica, and every state restored from
// a snapshot of it, pops the live items in the same sequence:
//
//	time, then the sequence number of the event that recorded the entry
//	(a grant's permit, an idempotency record's answer, a source's
//	registration; 0 for usage records, which several events extend), then
//	the kind, then the entry's key (only usage records can tie that far).
//
// A grant and the idempotency record of the request it answered share one
// item: the record's retention is the grant's (both end at ExpiresAt +
// RetainMargin), so the grant's item removes both. Records without such a
// grant (refusals, approval_required answers, and restored records whose
// grant no longer matches) have items of their own.

// What an expiry item removes. Stored only in memory (the low bits of
// expiryItem.Ord), never in snapshots.
const (
	expireGrant    uint64 = iota // a grant, and the idempotency record it shares its item with
	expireIdem                   // an idempotency record without a grant sharing its retention
	expireLedger                 // an effect-ledger entry
	expirePreauth                // a preauthorization's consumption record
	expireQuota                  // a quota window
	expireSource                 // a registered source
	expireReview                 // an open review
	expireApproval               // an approval instrument
	expireReply                  // a plain-text reply already decoded
	expireRoute                  // a route lease (it ends: the record stays until OpRouteForget)
)

// kindBits is how many low bits of expiryItem.Ord hold the kind (the
// kinds above run to 9). Ords are never stored, so widening it reorders
// nothing: the sequence number still decides before the kind.
const kindBits = 4

// expiryItem schedules one entry for removal at At. Ord is the entry's
// event sequence number shifted left by kindBits, or-ed with its kind (a
// sequence number beyond 2^60, which no chain reaches, would wrap: only
// the order would change, never what is removed). Ref points at what the
// item removes: the *grants.Grant (or the *permitRecords of a grant and
// its request's record), the *idemID, the *ledgerEntry, *preauthUse or
// *quotaWindow, or the *source, as it was when the item was scheduled; prune looks the entry up again by its key
// and removes what the map holds only if its retention ends at At.
type expiryItem struct {
	At  int64
	Ord uint64
	Ref any
}

// key is the item's entry key, the last tie-break of the order.
func (it *expiryItem) key() (string, string) {
	switch r := it.Ref.(type) {
	case *grants.Grant:
		return r.ID, ""
	case *permitRecords:
		return r.grant.ID, ""
	case *idemID:
		return r.Worker, r.Key
	case *ledgerEntry:
		return r.Key, ""
	case *preauthUse:
		return r.ID, ""
	case *quotaWindow:
		return r.Key, ""
	case *source:
		return r.ID, ""
	case *review:
		return r.ID, ""
	case *approval:
		return r.Key.Worker, r.Key.Tool + "\x00" + string(r.Key.Digest[:])
	case *replySeen:
		return string(r.Key[:]), ""
	case *routeItem:
		return r.Name, ""
	}
	return "", ""
}

func (it *expiryItem) less(o *expiryItem) bool {
	if it.At != o.At {
		return it.At < o.At
	}
	if it.Ord != o.Ord {
		return it.Ord < o.Ord
	}
	a1, a2 := it.key()
	b1, b2 := o.key()
	if c := strings.Compare(a1, b1); c != 0 {
		return c < 0
	}
	return a2 < b2
}

// expiryHeap is a binary min-heap of expiry items under less. It is
// written out rather than built on container/heap, which boxes every
// pushed item in an interface and compares through one.
type expiryHeap []expiryItem

// shrinkFloor is the capacity (items, or map entries) below which the
// state never reallocates a heap or map to release memory.
const shrinkFloor = 1024

func (h *expiryHeap) push(it expiryItem) {
	*h = append(*h, it)
	h.up(len(*h) - 1)
}

// pop removes the least item. The vacated slot is cleared so the backing
// array does not keep the removed entry reachable, and once fewer than a
// quarter of its slots are used the array is reallocated at twice the
// length (Go never returns the unused part of a slice).
func (h *expiryHeap) pop() expiryItem {
	old := *h
	n := len(old) - 1
	it := old[0]
	old[0] = old[n]
	old[n] = expiryItem{}
	*h = old[:n]
	if n > 0 {
		h.down(0)
	}
	if c := cap(old); c > shrinkFloor && n < c/4 {
		*h = append(make(expiryHeap, 0, 2*n), (*h)...)
	}
	return it
}

// init restores the heap order after items were appended without it.
func (h expiryHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h expiryHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(&h[p]) {
			return
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (h expiryHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].less(&h[l]) {
			m = r
		}
		if !h[m].less(&h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// expiryRun is a FIFO of expiry items scheduled in order: each not less
// than the one scheduled into the run before it. Most items are (a lane's
// grants all live for the same TTL and are scheduled in sequence order),
// and the run pushes and pops them in constant time, where the heap pays
// a sift through log n levels of cold memory per pop. Items that would
// break the order go to the heap; prune pops the lesser of the two heads,
// so items leave in the same order as from one heap.
type expiryRun struct {
	items []expiryItem
	head  int // items[head:] are scheduled
}

func (q *expiryRun) len() int { return len(q.items) - q.head }

// accepts reports whether it can join the run without breaking its order.
func (q *expiryRun) accepts(it *expiryItem) bool {
	return q.len() == 0 || !it.less(&q.items[len(q.items)-1])
}

func (q *expiryRun) push(it expiryItem) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		// Half the array is popped: move the rest down rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
}

// pop removes the first item. As for the heap, the vacated slot is
// cleared, and the array is reallocated smaller once it is mostly unused
// (or dropped when the run is empty).
func (q *expiryRun) pop() expiryItem {
	it := q.items[q.head]
	q.items[q.head] = expiryItem{}
	q.head++
	switch n, c := q.len(), cap(q.items); {
	case n == 0 && c > shrinkFloor:
		q.items, q.head = nil, 0
	case n == 0:
		q.items, q.head = q.items[:0], 0
	case c > shrinkFloor && n < c/4:
		q.items, q.head = append(make([]expiryItem, 0, 2*n), q.items[q.head:]...), 0
	}
	return it
}

func (s *State) schedule(at int64, seq, kind uint64, ref any) {
	it := expiryItem{At: at, Ord: seq<<kindBits | kind, Ref: ref}
	if s.expiryRun.accepts(&it) {
		s.expiryRun.push(it)
		return
	}
	s.expiry.push(it)
}

// nextDue returns the least scheduled item, from the run or the heap, if
// there is one.
func (s *State) nextDue() (*expiryItem, bool) {
	q := &s.expiryRun
	switch {
	case q.len() == 0 && len(s.expiry) == 0:
		return nil, false
	case q.len() == 0:
		return &s.expiry[0], true
	case len(s.expiry) == 0:
		return &q.items[q.head], true
	}
	if s.expiry[0].less(&q.items[q.head]) {
		return &s.expiry[0], true
	}
	return &q.items[q.head], true
}

// popDue removes the item nextDue returned.
func (s *State) popDue(it *expiryItem) expiryItem {
	if len(s.expiry) > 0 && it == &s.expiry[0] {
		return s.expiry.pop()
	}
	return s.expiryRun.pop()
}

// scheduled is the number of items in the run and the heap.
func (s *State) scheduled() int { return s.expiryRun.len() + len(s.expiry) }

// advance moves the clock forward (never back) and forgets what the clock
// has passed.
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
	if next, ok := s.nextDue(); !ok || next.At > s.clock {
		return
	}
	s.notePeaks()
	defer s.shrinkMaps()
	s.warmDue()
	for {
		next, ok := s.nextDue()
		if !ok || next.At > s.clock {
			break
		}
		it := s.popDue(next)
		switch r := it.Ref.(type) {
		case *grants.Grant:
			if g, ok := s.grants[r.ID]; ok && RetainUntil(g.ExpiresAt) == it.At {
				s.dropGrant(g)
			}
			// The request's record shares this item (see addGrant).
			if r.IdemKey != "" {
				s.dropIdem(idemID{r.Worker, r.IdemKey}, it.At)
			}
		case *permitRecords:
			g := &r.grant
			if cur, ok := s.grants[g.ID]; ok && RetainUntil(cur.ExpiresAt) == it.At {
				s.dropGrant(cur)
			}
			// The record is immutable once added and its retention is
			// the grant's (it.At): when the map still holds this very
			// record, there is no need to read it.
			k := idemID{g.Worker, g.IdemKey}
			if cur, ok := s.idem[k]; ok && (cur == &r.idem || cur.Until == it.At) {
				delete(s.idem, k)
				s.touchIdem(k)
			}
		case *idemID:
			s.dropIdem(*r, it.At)
		case *source:
			if cur, ok := s.sources[r.ID]; ok && cur.until() == it.At {
				s.dropSource(cur)
			}
		case *review:
			// Only the entry this item was scheduled for: a review opened
			// again under the same id (the same call asking again) has an
			// item of its own, possibly due at the same time, and a
			// restored state holds only that one. Removing on the stale
			// item would remove the same entry in a different order.
			if cur, ok := s.reviews[r.ID]; ok && cur == r && cur.Until == it.At {
				delete(s.reviews, r.ID)
			}
		case *approval:
			if cur, ok := s.approvals[r.Key]; ok && cur == r && cur.ExpiresAt == it.At {
				delete(s.approvals, r.Key)
			}
		case *replySeen:
			if cur, ok := s.replies[r.Key]; ok && cur == r && cur.Until == it.At {
				delete(s.replies, r.Key)
			}
		case *routeItem:
			s.pruneRoute(r, it.At)
		default:
			s.pruneUsage(it)
		}
	}
}

// warmDueMax bounds how many due items warmDue reads ahead.
const warmDueMax = 128

// warmDue reads ahead, before prune removes anything, the memory that
// removing the run's due grants will read: each permit's record, the bytes
// of its grant id and idempotency key, and the map slots that hold them.
// All of it was last touched long ago (a grant expires minutes of stream
// after its permit) and is likely out of the caches. In prune's loop each
// of those misses waits for the one before it (the record, then the key's
// bytes, then the slot). Here the loads of different items do not depend
// on one another, so the processor overlaps their misses; prune then
// finds the lines cached. Replaying a receipt stream, where an entry's
// grants expire together, this measured 5-8% faster (bench/README).
//
// It changes nothing: it only reads, and what it computes is kept in
// warmSink only so that the reads are not optimized away.
func (s *State) warmDue() {
	q := &s.expiryRun
	end := min(len(q.items), q.head+warmDueMax)
	var x byte
	due := q.head
	for ; due < end && q.items[due].At <= s.clock; due++ {
		switch r := q.items[due].Ref.(type) {
		case *permitRecords:
			x ^= first(r.grant.ID) ^ first(r.grant.IdemKey)
		case *grants.Grant:
			x ^= first(r.ID)
		}
	}
	if due-q.head < 2 {
		// One item: nothing to overlap, and prune's own probes are as
		// fast as these would be.
		s.warmSink ^= x
		return
	}
	for i := q.head; i < due; i++ {
		switch r := q.items[i].Ref.(type) {
		case *permitRecords:
			if _, ok := s.grants[r.grant.ID]; ok {
				x++
			}
			if _, ok := s.idem[idemID{r.grant.Worker, r.grant.IdemKey}]; ok {
				x++
			}
		case *grants.Grant:
			if _, ok := s.grants[r.ID]; ok {
				x++
			}
		}
	}
	s.warmSink ^= x
}

// first is s's first byte, or 0.
func first(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}
