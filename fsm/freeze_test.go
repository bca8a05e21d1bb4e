package fsm_test

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// Freeze: at a random cut the frozen view encodes to the bytes the state
// snapshotted to at that moment, however the state moves on afterwards,
// including while the view is being encoded on another goroutine (run
// with -race: a view sharing a map, a grant, a usage record or the outbox
// array with the live state is a data race there, and a wrong snapshot
// here).
func TestPropFreezeIsIsolated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		n := drawSteps(t)
		cut := rapid.IntRange(0, n).Draw(t, "cut")
		for i := 0; i < cut; i++ {
			h.next()
		}
		want := h.live.Snapshot()
		wantDigest := h.live.Digest()
		view := h.live.Freeze()
		got := make(chan []byte, 1)
		gotDigest := make(chan events.Hash, 1)
		go func() { got <- view.Encode(); gotDigest <- view.Digest() }()
		for i := cut; i < n; i++ {
			h.next()
		}
		if b := <-got; !bytes.Equal(b, want) {
			t.Fatalf("view encoded concurrently with %d later batches differs from the snapshot at the cut", n-cut)
		}
		if d := <-gotDigest; d != wantDigest {
			t.Fatalf("view's digest, computed concurrently with %d later batches, is %s; the state's at the cut was %s", n-cut, d, wantDigest)
		}
		if b := view.Encode(); !bytes.Equal(b, want) {
			t.Fatalf("view encoded after %d later batches differs from the snapshot at the cut", n-cut)
		}
	})
}

// The seed scenarios move every kind of entry a snapshot holds after the
// cut (grants spent and closed, usage charged, reviews approved, the
// outbox compacted by a watermark): the view keeps the cut's bytes.
func TestFreezeSeedScenario(t *testing.T) {
	for _, seeds := range [][]fsm.Batch{seedBatches(), seedBatchesV2()} {
		for cut := range seeds {
			s := fsm.New()
			for i, b := range seeds[:cut] {
				fsm.Apply(s, uint64(i+1), b)
			}
			want := s.Snapshot()
			view := s.Freeze()
			for i, b := range seeds[cut:] {
				fsm.Apply(s, uint64(cut+i+1), b)
			}
			fsm.Apply(s, uint64(len(seeds)+1), fsm.Batch{Time: s.Clock(), Commands: []fsm.Command{{Op: fsm.OpPublished, Seq: s.Chain().Seq}}})
			if !bytes.Equal(view.Encode(), want) {
				t.Fatalf("cut %d: the view changed with the state", cut)
			}
			if cut < len(seeds) && bytes.Equal(s.Snapshot(), want) {
				t.Fatalf("cut %d: the state did not move after the cut; the test proves nothing", cut)
			}
		}
	}
}
