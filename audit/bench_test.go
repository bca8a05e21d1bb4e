package audit

import (
	"strconv"
	"sync"
	"testing"

	"github.com/writ-dev/writ/events"
)

// benchStream is a synthetic but realistic receipt stream: grants are
// permitted, spent and confirmed (some never reported, some refused), one
// event every 5ms, each grant valid for 60s and retained for RetainMargin
// more, so about 25k grants are tracked at a time and the 262k events span
// 22 minutes, several retention windows.
var benchStream = sync.OnceValue(func() (out struct {
	raw [][]byte
	evs []events.Event
}) {
	const n = 1 << 18
	var c events.Chain
	add := func(e events.Event) {
		out.raw = append(out.raw, c.Append(&e, nil))
		out.evs = append(out.evs, e)
	}
	add(epochEv(t0, 1))
	const step = 5e6 // 5ms between events
	now := t0
	for i := 0; len(out.evs) < n; i++ {
		id := "g" + strconv.Itoa(i)
		w := "w" + strconv.Itoa(i%64)
		d := events.Sum([]byte(id))
		e := permitEv(now, id, w, d, 60*sec, 1)
		e.Counters = []events.Counter{{Key: "lane/isolated"}, {Key: "worker/" + w}}
		add(e)
		permitSeq := c.Seq
		now += step
		if i%10 == 9 {
			add(events.Event{Kind: events.KindDeny, Time: now, Worker: w, Reason: "denied_by_policy"})
			now += step
			continue
		}
		add(withExpiry(attemptEv(now, id, w, d, permitSeq), e.ExpiresAt))
		attemptSeq := c.Seq
		now += step
		if i%7 != 0 {
			add(effectEv(now, id, w, "confirmed", "v1", attemptSeq))
			now += step
		}
	}
	return out
})

// BenchmarkVerify reports events/s for the invariant checks alone on
// decoded events, with the projection fold, and from raw bytes (decode,
// hash, checks, fold).
func BenchmarkVerify(b *testing.B) {
	s := benchStream()
	run := func(b *testing.B, opts Options, raw bool) {
		v := NewVerifier(opts)
		j := 0
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if j == len(s.evs) {
				v, j = NewVerifier(opts), 0
			}
			var err error
			if raw {
				err = v.Add(s.raw[j], uint64(j+1))
			} else {
				err = v.AddEvent(s.evs[j])
			}
			if err != nil {
				b.Fatal(err)
			}
			j++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("checks", func(b *testing.B) { run(b, Options{NoProjection: true}, false) })
	b.Run("checks+projection", func(b *testing.B) { run(b, Options{}, false) })
	b.Run("decode+checks+projection", func(b *testing.B) { run(b, Options{}, true) })
	// The same through Verifier.Pipeline: decode and hash on GOMAXPROCS
	// goroutines, checks and projection in order on one more.
	b.Run("pipelined", func(b *testing.B) {
		v := NewVerifier(Options{})
		p := v.Pipeline(0)
		j := 0
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if j == len(s.raw) {
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				v, j = NewVerifier(Options{}), 0
				p = v.Pipeline(0)
			}
			if err := p.Add(s.raw[j], uint64(j+1)); err != nil {
				b.Fatal(err)
			}
			j++
		}
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// TestBenchStreamIsValid keeps the benchmark honest: its stream must pass.
func TestBenchStreamIsValid(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 262k-event stream")
	}
	s := benchStream()
	v, got := checkEvents(s.evs, Options{NoProjection: true})
	if got != nil {
		t.Fatal(got)
	}
	if sum := v.Summary(); sum.Tracked < 20000 || sum.Closed["confirmed"] == 0 || sum.Unresolved == 0 {
		t.Fatalf("benchmark stream is not what it claims: %+v", sum)
	}
}
