package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// logEntries reads every entry a log store holds.
func logEntries(t *testing.T, s raft.LogStore) []raft.Log {
	t.Helper()
	first, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last == 0 {
		return nil
	}
	out := make([]raft.Log, 0, last-first+1)
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d of %d..%d: %v", i, first, last, err)
		}
		out = append(out, l)
	}
	return out
}

func sameEntries(t *testing.T, what string, got, want []raft.Log) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) || !bytes.Equal(g.Extensions, w.Extensions) {
			t.Fatalf("%s: entry %d is index %d term %d type %v (%d bytes), want index %d term %d type %v (%d bytes)",
				what, i, g.Index, g.Term, g.Type, len(g.Data), w.Index, w.Term, w.Type, len(w.Data))
		}
	}
}

func openBolt(t *testing.T, dir string) *raftboltdb.BoltStore {
	t.Helper()
	b, err := raftboltdb.New(boltOptions(filepath.Join(dir, "raft.db")))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLogMovesBetweenStores starts a node on a data dir laid out as every
// data dir was before the WAL (the log in raft.db), then with the WAL,
// then with boltdb again. Invariants: the state digest survives each
// move; every entry the log held before a move is in the new store with
// the same index, term, type and bytes; the old store is emptied; the
// stable store records which store holds the log; the node carries on
// writing after each move.
func TestLogMovesBetweenStores(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	cfg := testConfig(dir, addr)
	cfg.LogStore = LogStoreBoltDB

	n := start(t, cfg)
	waitLeader(t, n)
	setPolicy(t, n)
	propose(t, n, 4, 5)
	want := digest(n)
	if got := n.Info().LogStore; got != LogStoreBoltDB {
		t.Fatalf("node started with boltdb reports its log in %q", got)
	}
	before := logEntries(t, n.logs)
	if len(before) < 3 {
		t.Fatalf("the log holds only %d entries", len(before))
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, walDirName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a boltdb node made a WAL directory (%v)", err)
	}

	for round, to := range []string{LogStoreWAL, LogStoreBoltDB, LogStoreWAL} {
		cfg.LogStore = to
		n := start(t, cfg)
		if got := n.Info().LogStore; got != to {
			t.Fatalf("round %d: node started with %s reports its log in %q", round, to, got)
		}
		sameEntries(t, fmt.Sprintf("round %d: the log after moving to %s", round, to), logEntries(t, n.logs)[:len(before)], before)
		waitLeader(t, n)
		if got := digest(n); got != want {
			t.Fatalf("round %d: after moving the log to %s the digest is %s, want %s", round, to, got, want)
		}
		// It carries on: new entries land in the new store.
		setPolicy(t, n)
		want = digest(n)
		before = logEntries(t, n.logs)
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}

		b := openBolt(t, dir)
		rec, err := recordedLogStore(b)
		boltLast, _ := b.LastIndex()
		b.Close()
		if err != nil || rec != to {
			t.Fatalf("round %d: the stable store records the log in %q (%v), want %q", round, rec, err, to)
		}
		_, walErr := os.Stat(filepath.Join(dir, walDirName))
		switch to {
		case LogStoreWAL:
			if boltLast != 0 {
				t.Fatalf("round %d: raft.db still holds entries up to %d after the log moved to the WAL", round, boltLast)
			}
		case LogStoreBoltDB:
			if !errors.Is(walErr, os.ErrNotExist) {
				t.Fatalf("round %d: the WAL directory is still there after the log moved to boltdb (%v)", round, walErr)
			}
		}
	}
}

// TestInterruptedMoveIsRedone: a move that stopped before its commit
// point (the record in the stable store) leaves the old store in charge,
// and the next start empties whatever the half-written destination holds
// and copies again; one that stopped after it leaves stale entries in the
// old store, which a later move back empties before copying.
func TestInterruptedMoveIsRedone(t *testing.T) {
	lg := hclog.NewNullLogger()
	dir := t.TempDir()
	b := openBolt(t, dir)
	defer b.Close()
	var orig []*raft.Log
	for i := uint64(1); i <= 50; i++ {
		orig = append(orig, &raft.Log{Index: i, Term: 1 + i/20, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%d", i))})
	}
	if err := b.StoreLogs(orig); err != nil {
		t.Fatal(err)
	}
	want := logEntries(t, b)

	// A half-finished copy into the WAL, with other bytes than raft.db's.
	w, err := openWAL(filepath.Join(dir, walDirName), MinWALSegmentSize, lg)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 10; i++ {
		if err := w.StoreLog(&raft.Log{Index: i, Term: 9, Data: []byte("torn")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	ls, err := openLogStore(dir, LogStoreWAL, MinWALSegmentSize, b, lg)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "the WAL after the redone move", logEntries(t, ls), want)
	if err := ls.close(); err != nil {
		t.Fatal(err)
	}
	if last, _ := b.LastIndex(); last != 0 {
		t.Fatalf("raft.db still holds entries up to %d", last)
	}

	// Stopped after the commit point: raft.db holds stale entries while
	// the record names the WAL. Moving back must not mix them in.
	if err := b.StoreLogs([]*raft.Log{{Index: 1, Term: 7, Data: []byte("stale")}, {Index: 2, Term: 7, Data: []byte("stale")}}); err != nil {
		t.Fatal(err)
	}
	ls, err = openLogStore(dir, LogStoreBoltDB, MinWALSegmentSize, b, lg)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "raft.db after moving back", logEntries(t, ls), want)
	if err := ls.close(); err != nil {
		t.Fatal(err)
	}

	// A record this build does not know is an error, never a guess.
	if err := b.Set(logStoreKey, []byte("rocksdb")); err != nil {
		t.Fatal(err)
	}
	if _, err := openLogStore(dir, LogStoreWAL, MinWALSegmentSize, b, lg); err == nil || !bytes.Contains([]byte(err.Error()), []byte("rocksdb")) {
		t.Fatalf("an unknown recorded log store opened or was not named: %v", err)
	}
}

// TestWALReopensInProcess: raft-wal v0.4.0's Close left the meta
// database open, and reopening the directory in the same process then
// waits forever on bbolt's file lock. The node closes it itself.
func TestWALReopensInProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), walDirName)
	for i := range 3 {
		done := make(chan error, 1)
		go func() {
			w, err := openWAL(dir, MinWALSegmentSize, hclog.NewNullLogger())
			if err == nil {
				err = w.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("open %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("open %d of the same WAL directory did not return: its meta database is still locked", i)
		}
	}
}

// TestWALIsMonotonicThroughTheWatcher: raft empties a monotonic log
// before installing a snapshot (raft-wal refuses a gap); the store raft
// sees must say so, through the write watcher and the log cache.
func TestWALIsMonotonicThroughTheWatcher(t *testing.T) {
	n := start(t, testConfig(t.TempDir(), freeAddr(t)))
	if !n.wstore.IsMonotonic() {
		t.Fatal("the watched WAL does not report itself monotonic")
	}
	cache, err := raft.NewLogCache(4, n.wstore)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.IsMonotonic() {
		t.Fatal("the log cache over the watched WAL does not report itself monotonic")
	}
}

// TestWALHidesTheCompactedHead: after raft compacts the head of the log
// (DeleteRange from the first index), an entry below the new first index
// is not found, even while raft-wal still has it in the segment it is
// writing; raft sends a lagging follower a snapshot only on that answer.
func TestWALHidesTheCompactedHead(t *testing.T) {
	w, err := openWAL(filepath.Join(t.TempDir(), walDirName), MinWALSegmentSize, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var ls []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		ls = append(ls, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("e%d", i))})
	}
	if err := w.StoreLogs(ls); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}
	if first, _ := w.FirstIndex(); first != 51 {
		t.Fatalf("first index after compacting 1..50 is %d, want 51", first)
	}
	var l raft.Log
	for _, i := range []uint64{1, 10, 50} {
		if err := w.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("entry %d below the first index: got %v (index %d), want ErrLogNotFound", i, err, l.Index)
		}
	}
	for _, i := range []uint64{51, 100} {
		if err := w.GetLog(i, &l); err != nil || l.Index != i || string(l.Data) != fmt.Sprintf("e%d", i) {
			t.Errorf("entry %d: %v (index %d, %q)", i, err, l.Index, l.Data)
		}
	}
}

// TestWALTailTruncationSurvivesReopen: raft truncates the log's tail when
// a new leader's log disagrees with a follower's (DeleteRange up to the
// last index). The WAL must reopen after that with every kept entry
// readable; raft-wal before v0.4.1 recorded the truncated segment as
// sealed without writing its index, and the next start failed ("sealed
// segment has no index block", hashicorp/raft-wal#31), which raft turns
// into a panic.
func TestWALTailTruncationSurvivesReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), walDirName)
	w, err := openWAL(dir, MinWALSegmentSize, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	var ls []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		ls = append(ls, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("e%d", i))})
	}
	if err := w.StoreLogs(ls); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange(31, 40); err != nil {
		t.Fatal(err)
	}
	// The new leader's entries from 31 on, in a later term.
	if err := w.StoreLogs([]*raft.Log{{Index: 31, Term: 2, Type: raft.LogCommand, Data: []byte("n31")}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openWAL(dir, MinWALSegmentSize, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("reopening after a tail truncation: %v", err)
	}
	defer w.Close()
	var l raft.Log
	for _, want := range []raft.Log{{Index: 1, Term: 1, Data: []byte("e1")}, {Index: 30, Term: 1, Data: []byte("e30")}, {Index: 31, Term: 2, Data: []byte("n31")}} {
		if err := w.GetLog(want.Index, &l); err != nil || l.Term != want.Term || string(l.Data) != string(want.Data) {
			t.Errorf("entry %d after reopening: %v (term %d, %q), want term %d %q", want.Index, err, l.Term, l.Data, want.Term, want.Data)
		}
	}
	if last, _ := w.LastIndex(); last != 31 {
		t.Errorf("last index after reopening is %d, want 31", last)
	}
}
