package fsm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/fsm"
)

// FreezeDigest: at every one of several random cuts the view it returns
// gives the digest the state has at that cut, computed while the state
// moves on (run with -race: a view sharing a grant or a map with the live
// state is a data race there); the mirror kept between cuts never leaks a
// later change into an earlier digest or misses one in a later digest.
// Some views are left without their Digest: the next capture must notice
// and start again.
func TestPropFreezeDigestMatchesDigest(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		cuts := rapid.IntRange(1, 8).Draw(t, "cuts")
		for c := 0; c < cuts; c++ {
			for i, n := 0, rapid.IntRange(0, 8).Draw(t, "steps"); i < n; i++ {
				h.next()
			}
			want := h.live.Digest()
			view := h.live.FreezeDigest()
			if rapid.IntRange(0, 5).Draw(t, "skip") == 0 {
				continue // never digested
			}
			got := make(chan string, 1)
			go func() { got <- view.Digest().String() }()
			for i, n := 0, rapid.IntRange(0, 4).Draw(t, "steps after"); i < n; i++ {
				h.next()
			}
			if d := <-got; d != want.String() {
				t.Fatalf("cut %d: the view's digest %s, the state's at the cut %s", c, d, want)
			}
		}
	})
}

// When more grants change between two calls than the state holds (here:
// thousands of permits into a state of a few, then their expiry), the
// state drops the mirror and the next call captures everything: the
// digests still match the state's at each call.
func TestFreezeDigestAcrossManyChanges(t *testing.T) {
	t0 := int64(1_700_000_000) * int64(time.Second)
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:test",
			Policy: []byte(`{"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"],"ttl":"2m0s"}},"version":1}`)}}})
	idx := uint64(2)
	check := func(what string) {
		t.Helper()
		want := s.Digest()
		if got := s.FreezeDigest().Digest(); got != want {
			t.Fatalf("%s: the view's digest %s, the state's %s", what, got, want)
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
	check("nothing changed")
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
