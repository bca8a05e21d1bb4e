package events

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// benchMix is a receipt stream shaped like the issuer's output under the
// bench workload (bench/gen.Stream): per grant a permit, an attempt and an
// effect report, with a deny every tenth request. Ids, workers and digests
// vary per grant; kind names, decisions and lanes repeat as they do in
// production. The encodings average a little under 300 bytes.
var benchMix = sync.OnceValue(func() (out struct {
	evs []Event
	raw [][]byte
	n   int64 // total encoded bytes
}) {
	const grants = 1024
	var c Chain
	add := func(e Event) {
		b := c.Append(&e, nil)
		out.evs = append(out.evs, e)
		out.raw = append(out.raw, b)
		out.n += int64(len(b))
	}
	now := t0
	for i := range grants {
		now += 1_000_000
		id := fmt.Sprintf("%08x-0067-4000-8000-%012x", i, i)
		w := "w" + strconv.Itoa(i%64)
		d := Sum([]byte(id))
		if i%10 == 9 {
			add(Event{
				Kind: KindDeny, RaftIndex: uint64(i), Time: now, Node: "n1",
				Worker: w, Lane: "isolated", Tool: "mcp__github__create_issue", Digest: d,
				Epoch: 1, Decision: "deny", Reason: "denied_by_policy",
				Missing: "tool mcp__github__create_issue allowed in lane isolated", Recovery: "none",
				IdemKey: id, Rules: []string{"lanes.isolated.tools"}, Actor: w,
			})
			continue
		}
		counters := []Counter{{Key: "lane/coordinator"}, {Key: "source/web"}, {Key: "worker/" + w, Value: uint64(i % 3)}}
		add(Event{
			Kind: KindPermit, RaftIndex: uint64(i), Time: now, Node: "n1",
			GrantID: id, Worker: w, Lane: "coordinator", Tool: "Bash", Digest: d,
			Epoch: 1, Decision: "permit", IssuedAt: now, ExpiresAt: now + 120e9,
			IdemKey: "req-" + id, Counters: counters, Rules: []string{"lanes.coordinator.tools:*"},
			Actor: w, Sources: []string{"web"},
		})
		permit := c.Seq
		add(Event{
			Kind: KindAttempt, RaftIndex: uint64(i), Time: now, Node: "n1",
			GrantID: id, Worker: w, Lane: "coordinator", Tool: "Bash", Digest: d,
			Epoch: 1, Decision: "permit", IssuedAt: now, ExpiresAt: now + 120e9,
			IdemKey: "spend-" + id, RefSeq: permit, Counters: counters, Actor: w,
		})
		add(Event{
			Kind: KindEffect, RaftIndex: uint64(i), Time: now, Node: "n1",
			GrantID: id, Worker: w, Digest: d, Decision: "permit",
			Outcome: "confirmed", Verifier: "exit-code", RefSeq: c.Seq, Actor: w,
		})
	}
	return out
})

// reportEvents adds an events/s metric for a benchmark that handled one
// event per iteration.
func reportEvents(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "events/s")
	}
}

// BenchmarkDecode decodes (and hash-checks) the bench mix and, separately,
// the golden events, one event per iteration.
func BenchmarkDecode(b *testing.B) {
	run := func(b *testing.B, raw [][]byte) {
		var size int64
		for _, r := range raw {
			size += int64(len(r))
		}
		b.SetBytes(size / int64(len(raw)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := Decode(raw[i%len(raw)]); err != nil {
				b.Fatal(err)
			}
		}
		reportEvents(b)
	}
	b.Run("mix", func(b *testing.B) { run(b, benchMix().raw) })
	b.Run("golden", func(b *testing.B) {
		_, encs := goldenChain()
		run(b, encs)
	})
}

// BenchmarkDecodeInto decodes the bench mix into one reused Event, as a
// replay loop would.
func BenchmarkDecodeInto(b *testing.B) {
	mix := benchMix()
	b.SetBytes(mix.n / int64(len(mix.raw)))
	b.ReportAllocs()
	var e Event
	for i := 0; b.Loop(); i++ {
		if err := DecodeInto(mix.raw[i%len(mix.raw)], &e); err != nil {
			b.Fatal(err)
		}
	}
	reportEvents(b)
}

// BenchmarkDecodeShared is BenchmarkDecodeInto without the strings' copy
// (the mix's buffers are never changed).
func BenchmarkDecodeShared(b *testing.B) {
	mix := benchMix()
	b.SetBytes(mix.n / int64(len(mix.raw)))
	b.ReportAllocs()
	var e Event
	for i := 0; b.Loop(); i++ {
		if err := DecodeShared(mix.raw[i%len(mix.raw)], &e); err != nil {
			b.Fatal(err)
		}
	}
	reportEvents(b)
}

// BenchmarkSeal seals the bench mix into a reused buffer, as a caller that
// copies the bytes out (or publishes them) before the next event would.
func BenchmarkSeal(b *testing.B) {
	evs := benchMix().evs
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := evs[i%len(evs)]
		buf = e.Seal(buf[:0])
	}
	reportEvents(b)
}

// BenchmarkSealNil seals into a nil buffer, as fsm.Apply does (each
// receipt keeps its own encoding).
func BenchmarkSealNil(b *testing.B) {
	evs := benchMix().evs
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := evs[i%len(evs)]
		_ = e.Seal(nil)
	}
	reportEvents(b)
}

// BenchmarkChainAppend links and seals the bench mix, as the issuer does.
func BenchmarkChainAppend(b *testing.B) {
	evs := benchMix().evs
	var c Chain
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e := evs[i%len(evs)]
		_ = c.Append(&e, nil)
	}
	reportEvents(b)
}

// BenchmarkStaticValidate checks the bench mix's events as a replay does
// before folding each, one event per iteration.
func BenchmarkStaticValidate(b *testing.B) {
	evs := benchMix().evs
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := evs[i%len(evs)].StaticValidate(); err != nil {
			b.Fatal(err)
		}
	}
	reportEvents(b)
}
