package raftnode

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// memSink is a raft.SnapshotSink that keeps what is written to it.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// commandLog encodes one batch as the raft log entry at index.
func commandLog(index uint64, b fsm.Batch) *raft.Log {
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b.Encode()}
}

// The adapter's snapshot is the state when Snapshot was called, although
// Persist runs later and concurrently with Apply: entries applied after
// Snapshot (spending and closing grants the snapshot holds, revoking a
// worker, confirming publication, which compacts the outbox in place) do
// not reach the persisted bytes. Run with -race: a captured view sharing
// mutable state with the live one is a data race here.
func TestSnapshotPersistsStateAtSnapshotTime(t *testing.T) {
	a := newAdapter()
	t0 := int64(1000 * time.Second)
	d := func(n string) events.Hash { return grants.RequestDigest("Bash", []byte(`{"n":`+n+`}`)) }
	idx := uint64(0)
	apply := func(b fsm.Batch) {
		t.Helper()
		idx++
		if r, ok := a.Apply(commandLog(idx, b)).(applyResult); !ok || r.err != nil {
			t.Fatalf("apply %d: %+v", idx, r)
		}
	}
	apply(fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}})
	var reqs []fsm.Command
	for i, n := range []string{"1", "2", "3", "4", "5", "6"} {
		w := []string{"w1", "w2"}[i%2]
		reqs = append(reqs, fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "Bash",
			Digest: d(n), IdemKey: "k" + n, GrantID: "g" + n})
	}
	apply(fsm.Batch{Time: t0 + 1, Node: "n1", Commands: reqs})

	var want []byte
	a.view(func(s *fsm.State, _ uint64) { want = s.Snapshot() })
	snap, err := a.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()

	var wg sync.WaitGroup
	sink := &memSink{}
	var perr error
	wg.Go(func() { perr = snap.Persist(sink) })
	for i, n := range []string{"1", "2", "3", "4", "5"} {
		w := []string{"w1", "w2"}[i%2]
		apply(fsm.Batch{Time: t0 + 2 + int64(i), Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSpend, Caller: w, GrantID: "g" + n, Digest: d(n), IdemKey: "a" + n},
			{Op: fsm.OpEffect, Caller: w, GrantID: "g" + n, Outcome: "confirmed", Verifier: "v1"},
		}})
	}
	apply(fsm.Batch{Time: t0 + 10, Node: "n2", Commands: []fsm.Command{
		{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w2"},
		{Op: fsm.OpPublished, Caller: "publisher", Seq: 5},
	}})
	wg.Wait()
	if perr != nil || !sink.closed || sink.cancelled {
		t.Fatalf("persist: %v (closed %v, cancelled %v)", perr, sink.closed, sink.cancelled)
	}
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatalf("persisted %d bytes differ from the %d-byte state at Snapshot time", sink.Len(), len(want))
	}
	var now []byte
	a.view(func(s *fsm.State, _ uint64) { now = s.Snapshot() })
	if bytes.Equal(now, want) {
		t.Fatal("the state did not move after Snapshot; the test proves nothing")
	}
	// And it restores to that state.
	b := newAdapter()
	if err := b.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	b.view(func(s *fsm.State, _ uint64) {
		if !bytes.Equal(s.Snapshot(), want) {
			t.Fatal("restored state differs")
		}
	})
}

// TestVersionMovesOnApplyAndRestore: the state's version moves with every
// applied entry and with a restored snapshot, which replaces the state
// without an entry (the applied index stays where it was). Anything
// cached against the version (the status digest) is then recomputed.
func TestVersionMovesOnApplyAndRestore(t *testing.T) {
	src := newAdapter()
	src.Apply(commandLog(1, fsm.Batch{Time: 1, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:test", Policy: policy.LegacyDefault().Canonical()}}}))
	snap, _ := src.Snapshot()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}

	a := newAdapter()
	version := func() (v uint64, applied uint64, d events.Hash) {
		a.viewVersion(func(s *fsm.State, ver uint64) { v, d = ver, s.Digest() })
		a.view(func(_ *fsm.State, ap uint64) { applied = ap })
		return
	}
	v0, ap0, d0 := version()
	if err := a.Restore(io.NopCloser(&sink)); err != nil {
		t.Fatal(err)
	}
	v1, ap1, d1 := version()
	if d1 == d0 {
		t.Fatal("the restored snapshot did not change the state")
	}
	if ap1 != ap0 || v1 == v0 {
		t.Fatalf("restore: applied %d→%d, version %d→%d; want the applied index unchanged and the version moved", ap0, ap1, v0, v1)
	}
	a.Apply(commandLog(2, fsm.Batch{Time: 2, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:test", Policy: policy.LegacyDefault().Canonical()}}}))
	if v2, _, _ := version(); v2 == v1 {
		t.Fatalf("apply: version stayed %d", v2)
	}
}
