package fsm_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
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
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.Default().Canonical()}}}
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
	for i := range batches {
		batches[i].Commands[len(batches[i].Commands)-1].Seq = s.Chain().Seq
		envs := fsm.Apply(s, uint64(i+2), batches[i])
		if envs[1].Kind != events.KindAttempt {
			b.Fatalf("spend answered %+v", envs[1])
		}
	}
	b.StopTimer()
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
		for i := 0; i < b.N; i++ {
			s := fsm.New()
			for _, e := range evs {
				if err := fsm.Evolve(s, e); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
	})
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
		at := int64(i+2) * int64(time.Second)
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
		batches[i] = bt
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range batches {
		batches[i].Commands[len(batches[i].Commands)-1].Seq = s.Chain().Seq
		envs := fsm.Apply(s, uint64(i+2), batches[i])
		if envs[1].Kind != events.KindAttempt {
			b.Fatalf("spend answered %+v (request %+v)", envs[1], envs[0])
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchPairs)/b.Elapsed().Seconds(), "pairs/s")
}
