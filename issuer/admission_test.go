package issuer

import (
	"testing"
	"time"
)

// The refusal bucket: a worker with no refusals, or refusals within its
// burst, is always admitted; once its refusals outrun the burst its
// requests are counted instead of admitted, per request kind, until the
// rate has earned a token back; drain hands the counts over once and
// forgets full buckets; and nothing is throttled while summaries are off.
func TestAdmissionBucket(t *testing.T) {
	a := newAdmission(2, 3) // 2 refusals/s after a burst of 3
	t0 := time.Unix(1000, 0)
	if !a.admit("w1", "grant", t0) {
		t.Fatal("admission is off (receipt format below 3) but a request was throttled")
	}
	a.on.Store(true)

	for i := range 3 {
		if !a.admit("w1", "spend", t0) {
			t.Fatalf("refusal %d of a burst of 3 was throttled", i+1)
		}
		a.refused("w1", t0)
	}
	if a.admit("w1", "spend", t0) || a.admit("w1", "spend", t0) || a.admit("w1", "grant", t0.Add(100*time.Millisecond)) {
		t.Fatal("a worker past its burst was admitted")
	}
	// Another worker, and permits, are untouched.
	for range 1000 {
		if !a.admit("w2", "grant", t0) {
			t.Fatal("a worker with no refusals was throttled")
		}
	}
	// Half a second earns one token (2/s).
	if !a.admit("w1", "spend", t0.Add(500*time.Millisecond)) {
		t.Fatal("the rate did not earn a token back")
	}
	a.refused("w1", t0.Add(500*time.Millisecond))
	if a.admit("w1", "spend", t0.Add(600*time.Millisecond)) {
		t.Fatal("admitted with the earned token spent")
	}

	got := a.drain(t0.Add(600 * time.Millisecond))
	want := []summary{
		{tallyKey{"w1", "grant"}, tally{n: 1, since: t0.Add(100 * time.Millisecond).UnixNano(), until: t0.Add(100 * time.Millisecond).UnixNano()}},
		{tallyKey{"w1", "spend"}, tally{n: 3, since: t0.UnixNano(), until: t0.Add(600 * time.Millisecond).UnixNano()}},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("drain = %+v, want %+v", got, want)
	}
	if again := a.drain(t0.Add(600 * time.Millisecond)); len(again) != 0 {
		t.Fatalf("counts drained twice: %+v", again)
	}

	// In-flight refusals can run the bucket into debt, never below -burst,
	// and a full bucket is forgotten.
	for range 100 {
		a.refused("w3", t0)
	}
	if b := a.buckets["w3"]; b.tokens != -3 {
		t.Fatalf("debt %v, want -3", b.tokens)
	}
	if a.admit("w3", "grant", t0.Add(1999*time.Millisecond)) {
		t.Fatal("a worker in debt was admitted before the rate paid it back")
	}
	if !a.admit("w3", "grant", t0.Add(2*time.Second)) {
		t.Fatal("a worker whose debt was paid back was throttled")
	}
	a.drain(t0.Add(time.Hour))
	if len(a.buckets) != 0 {
		t.Fatalf("full buckets kept: %d", len(a.buckets))
	}
}
