package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The in-order run and the heap together pop items in the order one heap
// would, whatever mix of in-order, out-of-order and tied items is
// scheduled between pops, and give their memory back once drained.
func TestExpiryRunPopsInHeapOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := New()
		var ref expiryHeap
		key := func(it *expiryItem) string {
			a, b := it.key()
			return fmt.Sprintf("%d/%d/%s/%s", it.At, it.Ord, a, b)
		}
		now := int64(0)
		for round := range 400 {
			for range r.IntN(2 * shrinkFloor / 100) {
				at := now + int64(r.IntN(50))
				if r.IntN(4) > 0 {
					at = now + 100 + int64(round) // mostly in order, as grants are
				}
				seq := uint64(r.IntN(3))
				ref2 := &source{ID: fmt.Sprint(r.IntN(5))}
				s.schedule(at, seq, expireSource, ref2)
				ref.push(expiryItem{At: at, Ord: seq<<kindBits | expireSource, Ref: ref2})
			}
			now += int64(r.IntN(60))
			for {
				next, ok := s.nextDue()
				if !ok || next.At > now {
					if len(ref) > 0 && ref[0].At <= now {
						t.Fatalf("seed %d: run+heap stop before %s", seed, key(&ref[0]))
					}
					break
				}
				got, want := s.popDue(next), ref.pop()
				if key(&got) != key(&want) {
					t.Fatalf("seed %d round %d: popped %s, one heap pops %s", seed, round, key(&got), key(&want))
				}
			}
			if s.scheduled() != len(ref) {
				t.Fatalf("seed %d: %d scheduled, want %d", seed, s.scheduled(), len(ref))
			}
		}
		for s.scheduled() > 0 {
			next, _ := s.nextDue()
			got, want := s.popDue(next), ref.pop()
			if key(&got) != key(&want) {
				t.Fatalf("seed %d draining: popped %s, one heap pops %s", seed, key(&got), key(&want))
			}
		}
		if cap(s.expiryRun.items) > shrinkFloor || cap(s.expiry) > 2*shrinkFloor {
			t.Fatalf("seed %d: drained run keeps %d slots, heap %d", seed, cap(s.expiryRun.items), cap(s.expiry))
		}
	}
}

// Every expiry kind is distinct and fits in the kindBits low bits of an
// Ord: two kinds sharing a value would make items of different records
// scheduled by one event tie on Ord, and a kind past the bits would
// change the sequence number part.
func TestExpiryKindsDistinct(t *testing.T) {
	kinds := []struct {
		name string
		v    uint64
	}{
		{"grant", expireGrant}, {"idem", expireIdem}, {"ledger", expireLedger}, {"preauth", expirePreauth},
		{"quota", expireQuota}, {"source", expireSource}, {"review", expireReview}, {"approval", expireApproval},
		{"reply", expireReply}, {"route", expireRoute},
	}
	seen := map[uint64]string{}
	for _, k := range kinds {
		if k.v >= 1<<kindBits {
			t.Errorf("expiry kind %s = %d does not fit in %d bits", k.name, k.v, kindBits)
		}
		if other, dup := seen[k.v]; dup {
			t.Errorf("expiry kinds %s and %s share the value %d", other, k.name, k.v)
		}
		seen[k.v] = k.name
	}
}
