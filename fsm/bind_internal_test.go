package fsm

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/events"
)

// bindCounters agrees with binding through revocation.Counters.Bind and
// merging the recorded counters in a map (the lowest value per key), for
// keys named twice, recorded counters that a named key also binds (lower,
// equal or higher) and ones it does not.
func TestBindCountersMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := New()
	key := func() string { return "source/s" + strconv.Itoa(rng.IntN(6)) }
	for i := range 6 {
		if i%2 == 0 {
			s.counters.Set("source/s"+strconv.Itoa(i), uint64(1+rng.IntN(3)))
		}
	}
	for range 2000 {
		keys := []string{"worker/w1", "lane/l"}
		for range rng.IntN(4) {
			keys = append(keys, key())
		}
		var recorded map[string]uint64
		if rng.IntN(3) > 0 {
			recorded = map[string]uint64{}
			for range rng.IntN(5) {
				recorded[key()] = uint64(rng.IntN(4))
			}
		}
		want := s.counters.Bind(keys...)
		if len(recorded) > 0 {
			m := map[string]uint64{}
			for _, c := range want {
				m[c.Key] = c.Value
			}
			for k, v := range recorded {
				lowest(m, k, v)
			}
			want = sortedCounters(m)
		}
		got := s.bindCounters(slices.Clone(keys), recorded)
		if !slices.Equal(got, want) {
			t.Fatalf("keys %v recorded %v: bound %v, want %v", keys, recorded, got, want)
		}
		if len(got) == 0 || !slices.IsSortedFunc(got, func(a, b events.Counter) int { return counterKeyCmp(a, b.Key) }) {
			t.Fatalf("not sorted: %v", got)
		}
	}
}

// counterKey is revocation.Key, whether or not the interner holds the key
// and however long the id.
func TestCounterKey(t *testing.T) {
	var in interner
	long := string(slices.Repeat([]byte("x"), 100))
	for _, id := range []string{"w1", "", long, "w1"} {
		if got, want := in.counterKey("worker", id), "worker/"+id; got != want {
			t.Fatalf("counterKey(worker, %q) = %q", id, got)
		}
		in.str("worker/" + id)
	}
	if k := in.counterKey("worker", "w1"); k != in.str("worker/w1") || allocs(func() { in.counterKey("worker", "w1") }) != 0 {
		t.Fatalf("an interned key %q is not shared, or allocates", k)
	}
}

func allocs(f func()) float64 { return testing.AllocsPerRun(100, f) }
