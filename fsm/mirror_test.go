package fsm_test

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/fsm"
)

// FreezeMirror: at every one of several random cuts the view it returns
// encodes to the bytes the state snapshots to at that cut, and keeps them
// while the state moves on and the view is encoded on another goroutine
// (run with -race); the mirror it keeps between cuts never leaks the
// grants' later changes into an earlier view or misses one in a later
// view.
func TestPropFreezeMirrorMatchesSnapshot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		cuts := rapid.IntRange(1, 6).Draw(t, "cuts")
		for c := 0; c < cuts; c++ {
			for i, n := 0, rapid.IntRange(0, 8).Draw(t, "steps"); i < n; i++ {
				h.next()
			}
			want, wantDigest := h.live.Snapshot(), h.live.Digest()
			view := h.live.FreezeMirror()
			got := make(chan []byte, 1)
			go func() { got <- view.Encode() }()
			for i, n := 0, rapid.IntRange(0, 4).Draw(t, "steps after"); i < n; i++ {
				h.next()
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Fatalf("cut %d: the mirror's view, encoded while the state moved on, differs from the snapshot at the cut", c)
			}
			if d := view.Digest(); d != wantDigest {
				t.Fatalf("cut %d: the mirror's digest %s, the state's at the cut %s", c, d, wantDigest)
			}
		}
	})
}

// When more grants change between two calls than the mirror holds (here:
// thousands of permits into a state of a few, then their expiry), the
// state drops the mirror and the next call copies everything: the views
// still match the state's snapshot at each call.
func TestFreezeMirrorAcrossManyChanges(t *testing.T) {
	t0 := int64(1_700_000_000) * int64(time.Second)
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:test",
			Policy: []byte(`{"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"],"ttl":"2m0s"}},"version":1}`)}}})
	idx := uint64(2)
	check := func(what string) {
		t.Helper()
		want := s.Snapshot()
		if got := s.FreezeMirror().Encode(); !bytes.Equal(got, want) {
			t.Fatalf("%s: the mirror's view differs from the snapshot", what)
		}
	}
	apply := func(at int64, from, to int) {
		b := fsm.Batch{Time: at, Node: "n1"}
		for j := from; j < to; j++ {
			b.Commands = append(b.Commands, liveRequest(j))
		}
		fsm.Apply(s, idx, b)
		idx++
	}
	apply(t0+int64(time.Second), 0, 10)
	check("10 grants")
	apply(t0+int64(2*time.Second), 10, 3000)
	check("2,990 permits since the last call, past the mirror's bound")
	apply(t0+int64(3*time.Second), 3000, 3100)
	check("100 more")
	if s.Stats().Grants != 3100 {
		t.Fatalf("%d grants live, want 3100", s.Stats().Grants)
	}
	// One more permit past every earlier grant's expiry and retention:
	// the rest are removed.
	apply(t0+int64(time.Hour), 3100, 3101)
	if s.Stats().Grants != 1 {
		t.Fatalf("%d grants live after expiry, want 1", s.Stats().Grants)
	}
	check("after every grant expired")
}
