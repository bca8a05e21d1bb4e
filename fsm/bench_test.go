package fsm_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/benchcpu"
	"github.com/writ-dev/writ/policy"
)

const benchPairs = 64

// requestSpendBatch is one log entry of benchPairs requests, each followed
// by the spend of its grant, then a publication watermark confirming
// everything before the entry (as a leader that keeps up would).
func requestSpendBatch(i int, at int64, published uint64) fsm.Batch {
	b := fsm.Batch{Time: at, Node: "n1", Commands: make([]fsm.Command, 0, 2*benchPairs+1)}
	for j := 0; j < benchPairs; j++ {
		n := strconv.Itoa(i*benchPairs + j)
		w := "w" + strconv.Itoa(j%16)
		d := grants.RequestDigest("Bash", []byte(`{"n":`+n+`}`))
		b.Commands = append(b.Commands,
			fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "Bash", Digest: d, IdemKey: "k" + n, GrantID: "g" + n, Sources: []string{"s1"}},
			fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: "g" + n, Digest: d, IdemKey: "a" + n})
	}
	b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "publisher", Seq: published})
	return b
}

func policyBatch() fsm.Batch {
	return fsm.Batch{Time: int64(time.Second), Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}}
}

// BenchmarkApplyRequestSpend applies entries of 64 request+spend pairs.
// One op is one entry; the clock moves one second per entry, so grants
// (2 minute lifetime + 5 minute retention) reach a steady state.
func BenchmarkApplyRequestSpend(b *testing.B) {
	s := fsm.New()
	fsm.Apply(s, 1, policyBatch())
	batches := make([]fsm.Batch, b.N)
	for i := range batches {
		batches[i] = requestSpendBatch(i, int64(i+2)*int64(time.Second), 0)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	for i := range batches {
		batches[i].Commands[len(batches[i].Commands)-1].Seq = s.Chain().Seq
		envs := fsm.Apply(s, uint64(i+2), batches[i])
		if envs[1].Kind != events.KindAttempt {
			b.Fatalf("spend answered %+v", envs[1])
		}
	}
	b.StopTimer()
	cpu.Report(b)
	b.ReportMetric(float64(b.N*benchPairs)/b.Elapsed().Seconds(), "pairs/s")
}

// replayEvents returns the encoded receipts of a run of request+spend
// entries.
func replayEvents(b *testing.B, entries int) [][]byte {
	s := fsm.New()
	fsm.Apply(s, 1, policyBatch())
	for i := 0; i < entries; i++ {
		fsm.Apply(s, uint64(i+2), requestSpendBatch(i, int64(i+2)*int64(time.Second), 0))
	}
	var out [][]byte
	for _, p := range s.Outbox(0, 0) {
		out = append(out, p.Data)
	}
	if len(out) != 1+2*benchPairs*entries {
		b.Fatalf("%d events", len(out))
	}
	return out
}

// BenchmarkReplay folds pre-encoded receipts into a fresh state, as the
// auditor does: decode (which verifies each event's hash) then Evolve.
// One op is the whole stream; events/s is the replay throughput.
func BenchmarkReplay(b *testing.B) {
	raw := replayEvents(b, 256) // 32769 events
	b.Run("decode+evolve", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		for i := 0; i < b.N; i++ {
			s := fsm.New()
			for _, data := range raw {
				e, err := events.Decode(data)
				if err != nil {
					b.Fatal(err)
				}
				if err := fsm.Evolve(s, e); err != nil {
					b.Fatal(err)
				}
			}
		}
		cpu.Report(b)
		b.ReportMetric(float64(b.N*len(raw))/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("decodeinto+evolveref", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		var e events.Event
		for i := 0; i < b.N; i++ {
			s := fsm.New()
			for _, data := range raw {
				if err := events.DecodeInto(data, &e); err != nil {
					b.Fatal(err)
				}
				if err := fsm.EvolveRef(s, &e); err != nil {
					b.Fatal(err)
				}
			}
		}
		cpu.Report(b)
		b.ReportMetric(float64(b.N*len(raw))/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("evolve", func(b *testing.B) {
		evs := make([]events.Event, len(raw))
		for i, data := range raw {
			e, err := events.Decode(data)
			if err != nil {
				b.Fatal(err)
			}
			evs[i] = e
		}
		b.ReportAllocs()
		b.ResetTimer()
		cpu := benchcpu.Start()
		for i := 0; i < b.N; i++ {
			s := fsm.New()
			for _, e := range evs {
				if err := fsm.Evolve(s, e); err != nil {
					b.Fatal(err)
				}
			}
		}
		cpu.Report(b)
		b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
	})
}

// requestSpendBatchV2 is requestSpendBatch for a version 2 policy: each
// request and spend carries its call's flattened arguments (a shell
// command), in the specialist lane, and the entry ends with a publication
// watermark of 0 (the benchmark sets it before applying).
func requestSpendBatchV2(i int, at int64) fsm.Batch {
	bt := fsm.Batch{Time: at, Node: "n1", Commands: make([]fsm.Command, 0, 2*benchPairs+1)}
	for j := 0; j < benchPairs; j++ {
		n := strconv.Itoa(i*benchPairs + j)
		w := "w" + strconv.Itoa(j%16)
		raw := []byte(`{"command":"go test -run Test` + n + ` ./..."}`)
		d, _ := grants.DigestArgs("Bash", raw)
		args, _ := policy.FlattenArgs(raw)
		bt.Commands = append(bt.Commands,
			fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "specialist", Tool: "Bash", Digest: d, Args: args, IdemKey: "k" + n, GrantID: "g" + n},
			fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: "g" + n, Digest: d, Args: args, IdemKey: "a" + n})
	}
	bt.Commands = append(bt.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "publisher"})
	return bt
}

// BenchmarkDecodeBatch decodes one log entry as every replica does before
// applying it: benchPairs request+spend pairs and a publication watermark,
// with grant ids and idempotency keys shaped like the issuer's (36-byte
// uuids). "v1" is requestSpendBatch's entry; "v2" carries each call's
// flattened arguments, as under a version 2 policy. One op is one entry.
func BenchmarkDecodeBatch(b *testing.B) {
	uuids := func(bt fsm.Batch) fsm.Batch {
		for i := range bt.Commands {
			c := &bt.Commands[i]
			if c.GrantID != "" {
				n, _ := strconv.Atoi(c.GrantID[1:])
				c.GrantID = uuidish('g', n)
			}
			if c.IdemKey != "" {
				n, _ := strconv.Atoi(c.IdemKey[1:])
				c.IdemKey = uuidish(c.IdemKey[0], n)
			}
		}
		return bt
	}
	for _, tc := range []struct {
		name  string
		batch fsm.Batch
	}{
		{"v1", uuids(requestSpendBatch(0, int64(time.Second), 1))},
		{"v2", uuids(requestSpendBatchV2(0, int64(time.Second)))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			data := tc.batch.Encode()
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu := benchcpu.Start()
			for b.Loop() {
				bt, err := fsm.DecodeBatch(data)
				if err != nil || len(bt.Commands) != len(tc.batch.Commands) {
					b.Fatalf("decoded %d commands: %v", len(bt.Commands), err)
				}
			}
			cpu.Report(b)
		})
	}
}

// BenchmarkEncodeBatch encodes the entries BenchmarkDecodeBatch decodes, as
// the leader does before proposing them. One op is one entry.
func BenchmarkEncodeBatch(b *testing.B) {
	for _, tc := range []struct {
		name  string
		batch fsm.Batch
	}{
		{"v1", requestSpendBatch(0, int64(time.Second), 1)},
		{"v2", requestSpendBatchV2(0, int64(time.Second))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := benchcpu.Start()
			var n int
			for b.Loop() {
				n = len(tc.batch.Encode())
			}
			b.SetBytes(int64(n))
			cpu.Report(b)
		})
	}
}

// BenchmarkApplyRequestSpendV2 is BenchmarkApplyRequestSpend under the
// recommended version 2 policy: every request is judged by the engine
// (surface lookup, target canonicalization, boundary classification, the
// shape rulebook, quotas) and every spend re-derives its target for the
// drift check. One op is one entry of 64 request+spend pairs.
func BenchmarkApplyRequestSpendV2(b *testing.B) {
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: int64(time.Second), Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.Recommended().Canonical()}}})
	batches := make([]fsm.Batch, b.N)
	for i := range batches {
		batches[i] = requestSpendBatchV2(i, int64(i+2)*int64(time.Second))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	for i := range batches {
		batches[i].Commands[len(batches[i].Commands)-1].Seq = s.Chain().Seq
		envs := fsm.Apply(s, uint64(i+2), batches[i])
		if envs[1].Kind != events.KindAttempt {
			b.Fatalf("spend answered %+v (request %+v)", envs[1], envs[0])
		}
	}
	b.StopTimer()
	cpu.Report(b)
	b.ReportMetric(float64(b.N*benchPairs)/b.Elapsed().Seconds(), "pairs/s")
}

// liveGrantsN is how many permits BenchmarkLiveGrantHeap holds live:
// WRIT_LIVE_GRANTS, or 200,000 (the bench harness's -scale quick figure;
// `make bench` uses 1,000,000).
func liveGrantsN(b *testing.B) int {
	if v := os.Getenv("WRIT_LIVE_GRANTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("WRIT_LIVE_GRANTS=%q", v)
		}
		return n
	}
	return 200_000
}

// heapAfterGC collects garbage twice and returns the live heap.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// uuidish is a 36-byte id shaped like the issuer's grant ids and the
// client's idempotency keys, unique per (tag, i).
func uuidish(tag byte, i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, int(tag), 0, 0, i)
}

// liveRequest is the bench harness's memory workload: a permit for grant i
// by worker w%16 in the coordinator lane, naming one source, with its own
// idempotency record.
func liveRequest(i int) fsm.Command {
	return fsm.Command{Op: fsm.OpRequest, Caller: "w" + strconv.Itoa(i%16), Lane: "coordinator", Tool: "Bash",
		Digest: events.Sum([]byte("args-" + strconv.Itoa(i))), IdemKey: uuidish('k', i),
		GrantID: uuidish('g', i), Sources: []string{"web"}}
}

// BenchmarkLiveGrantHeap measures what a live grant costs on the heap: N
// permits (entries of 256 at one instant, publication confirmed each entry,
// as the bench harness's memory phase does), then one entry past their
// expiry and retention. It reports the heap per live grant and the heap
// left once they are gone, both after GC and relative to the state before
// the permits, and what the same state costs restored from its snapshot. The commands are built while it measures, as the bench
// harness builds them, so a grant's id and key strings count. One op is the
// whole run.
func BenchmarkLiveGrantHeap(b *testing.B) {
	n := liveGrantsN(b)
	const per = 256
	t0 := int64(1_700_000_000) * int64(time.Second)
	pol := []byte(`{"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"],"ttl":"2m0s"}},"version":1}`)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		s := fsm.New()
		fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSetPolicy, Caller: "operator:bench", Policy: pol}}})
		idle := heapAfterGC()
		b.StartTimer()
		cpu := benchcpu.Process()
		idx := uint64(2)
		for i := 0; i < n; i += per {
			bt := fsm.Batch{Time: t0 + int64(time.Second), Node: "n1", Commands: make([]fsm.Command, 0, per+1)}
			for j := i; j < min(i+per, n); j++ {
				// Built here, as the issuer decodes them from the log:
				// the grant keeps the command's id and key strings.
				bt.Commands = append(bt.Commands, liveRequest(j))
			}
			bt.Commands = append(bt.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "issuer:n1", Seq: ^uint64(0)})
			fsm.Apply(s, idx, bt)
			idx++
		}
		b.StopTimer()
		cpu = benchcpu.Process() - cpu
		if st := s.Stats(); st.Grants != n || st.Idem != n || st.Outbox != 0 {
			b.Fatalf("state holds %d grants, %d records, outbox %d (want %d)", st.Grants, st.Idem, st.Outbox, n)
		}
		live := heapAfterGC()
		// The same state restored from its snapshot, held beside it.
		restored, err := fsm.Restore(s.Snapshot())
		if err != nil {
			b.Fatal(err)
		}
		both := heapAfterGC()
		runtime.KeepAlive(restored)
		late := t0 + int64(time.Second) + int64(2*time.Minute) + fsm.RetainMargin + int64(time.Second)
		fsm.Apply(s, idx, fsm.Batch{Time: late, Node: "n1", Commands: []fsm.Command{
			liveRequest(n), {Op: fsm.OpPublished, Caller: "issuer:n1", Seq: ^uint64(0)}}})
		if st := s.Stats(); st.Grants != 1 || st.Idem != 1 {
			b.Fatalf("after expiry the state holds %d grants and %d records (want 1 and 1)", st.Grants, st.Idem)
		}
		expired := heapAfterGC()
		runtime.KeepAlive(s)
		b.ReportMetric(float64(int64(live)-int64(idle))/float64(n), "heap-B/grant")
		b.ReportMetric(float64(int64(expired)-int64(idle))/(1<<20), "heap-MB-after-expiry")
		b.ReportMetric(float64(int64(live)-int64(idle))/(1<<20), "heap-MB-live")
		b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/permit")
		b.ReportMetric(float64(int64(both)-int64(live))/float64(n), "restored-heap-B/grant")
		b.StartTimer()
	}
}

// BenchmarkEvolveSteady folds pre-decoded receipts of 1024 entries one
// control-plane second apart, so that grants (2 minute lifetime + 5 minute
// retention) expire in the second half of the stream and pruning runs at
// a steady state, as in a long audit. One op is the whole stream.
func BenchmarkEvolveSteady(b *testing.B) {
	raw := replayEvents(b, 1024)
	evs := make([]events.Event, len(raw))
	for i, data := range raw {
		e, err := events.Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = e
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	for i := 0; i < b.N; i++ {
		s := fsm.New()
		for _, e := range evs {
			if err := fsm.Evolve(s, e); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu.Report(b)
	b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSnapshotRestore encodes and restores a state holding
// WRIT_SNAPSHOT_GRANTS (default 100,000) live permits of the memory
// workload, each with its idempotency record. One op is one snapshot or
// one restore.
func BenchmarkSnapshotRestore(b *testing.B) {
	n := 100_000
	if v := os.Getenv("WRIT_SNAPSHOT_GRANTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("WRIT_SNAPSHOT_GRANTS=%q", v)
		}
	}
	t0 := int64(1_700_000_000) * int64(time.Second)
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:bench", Policy: policy.LegacyDefault().Canonical()}}})
	idx := uint64(2)
	for i := 0; i < n; i += 256 {
		bt := fsm.Batch{Time: t0 + int64(time.Second), Node: "n1"}
		for j := i; j < min(i+256, n); j++ {
			bt.Commands = append(bt.Commands, liveRequest(j))
		}
		bt.Commands = append(bt.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "issuer:n1", Seq: ^uint64(0)})
		fsm.Apply(s, idx, bt)
		idx++
	}
	snap := s.Snapshot()
	b.Run("snapshot", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		for b.Loop() {
			snap = s.Snapshot()
		}
		cpu.Report(b)
		b.ReportMetric(float64(len(snap))/float64(n), "B/grant")
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		cpu := benchcpu.Start()
		for b.Loop() {
			r, err := fsm.Restore(snap)
			if err != nil {
				b.Fatal(err)
			}
			if r.Stats().Grants != n {
				b.Fatal("restored state differs")
			}
		}
		cpu.Report(b)
	})
}

// BenchmarkStatusDigestLockHold measures what a status request holds the
// state machine's read lock for, at 20,000 live grants: computing the
// state digest in place (digest-in-lock) against freezing a copy whose
// digest is computed after the lock is released (freeze-in-lock; the
// digest itself is then freeze-then-digest minus the freeze), and
// FreezeDigest and its Digest after a poller's worth of changes.
func BenchmarkStatusDigestLockHold(b *testing.B) {
	const n = 20_000
	t0 := int64(1_700_000_000) * int64(time.Second)
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:bench", Policy: policy.LegacyDefault().Canonical()}}})
	idx := uint64(2)
	for i := 0; i < n; i += 256 {
		bt := fsm.Batch{Time: t0 + int64(time.Second), Node: "n1"}
		for j := i; j < min(i+256, n); j++ {
			bt.Commands = append(bt.Commands, liveRequest(j))
		}
		fsm.Apply(s, idx, bt)
		idx++
	}
	b.Run("digest-in-lock", func(b *testing.B) {
		for b.Loop() {
			_ = s.Digest()
		}
	})
	b.Run("freeze-in-lock", func(b *testing.B) {
		for b.Loop() {
			_ = s.Freeze()
		}
	})
	b.Run("freeze-then-digest", func(b *testing.B) {
		for b.Loop() {
			_ = s.Freeze().Digest()
		}
	})
	// What a status poller holds the lock for with FreezeDigest, and the
	// digest it then computes: 256 permits applied and published
	// (untimed) between two calls, as a poller at 10 Hz sees at ~2,500
	// grant changes a second.
	next := n
	permits := func() {
		bt := fsm.Batch{Time: t0 + int64(time.Second), Node: "n1"}
		for k := 0; k < 256; k++ {
			bt.Commands = append(bt.Commands, liveRequest(next))
			next++
		}
		fsm.Apply(s, idx, bt)
		idx++
		// Published, as the issuer confirms every round.
		fsm.Apply(s, idx, fsm.Batch{Time: bt.Time, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpPublished, Seq: s.Chain().Seq}}})
		idx++
	}
	b.Run("mirror-in-lock-256-changes", func(b *testing.B) {
		_ = s.FreezeDigest().Digest()
		for b.Loop() {
			b.StopTimer()
			permits()
			b.StartTimer()
			v := s.FreezeDigest()
			b.StopTimer()
			_ = v.Digest()
			b.StartTimer()
		}
	})
	b.Run("mirror-digest-256-changes", func(b *testing.B) {
		_ = s.FreezeDigest().Digest()
		for b.Loop() {
			b.StopTimer()
			permits()
			v := s.FreezeDigest()
			b.StartTimer()
			_ = v.Digest()
		}
	})
}
