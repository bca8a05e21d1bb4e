package raftnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
)

// The raft log can live in one of two stores; term and vote always live
// in raft.db (raft-boltdb), the stable store.
//
//   - LogStoreWAL: hashicorp/raft-wal, segment files under wal/ with one
//     append write and one fsync per batch of entries. The default.
//   - LogStoreBoltDB: the raft-boltdb file raft.db itself, whose commit
//     costs two fdatasyncs and several page writes per batch. The layout
//     of every data dir written before the WAL existed.
//
// Which store holds a node's log is recorded in the stable store under
// logStoreKey (absent: boltdb, as every older data dir). Starting a node
// with the other store configured moves the log across once: the
// destination is emptied, every entry is copied and synced, the record is
// switched (one fsynced bbolt write, the commit point), and only then is
// the source emptied. A crash before the switch leaves the old store in
// charge and the copy is redone on the next start; a crash after it
// leaves stale entries in the old store, which the next move empties
// before it copies into it.
const (
	LogStoreWAL    = "wal"
	LogStoreBoltDB = "boltdb"
)

// logStoreKey names the stable-store key recording which store holds the
// log.
var logStoreKey = []byte("writ.raft_log_store")

// walDirName is the WAL's directory inside the raft data dir.
const walDirName = "wal"

// migrateBatchBytes bounds the log bytes copied per append when the log
// moves between stores.
const migrateBatchBytes = 1 << 20

// walStore is raft-wal with the meta database it was given. raft-wal
// v0.4.0 closed no meta store, and bbolt's file lock then blocked the
// next open of the same directory in this process; v0.4.1 and later
// close it in WAL.Close. walStore closes it too (a second close is a
// no-op), so the lock is released whichever raft-wal is linked.
type walStore struct {
	*raftwal.WAL
	meta *metadb.BoltMetaDB
}

func openWAL(dir string, segSize int, lg hclog.Logger) (*walStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	meta := &metadb.BoltMetaDB{}
	w, err := raftwal.Open(dir, raftwal.WithMetaStore(meta), raftwal.WithLogger(lg), raftwal.WithSegmentSize(segSize))
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("raftnode: opening the raft log in %s: %w", dir, err)
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// GetLog reads one entry. raft-wal drops a compacted head by moving its
// first index and deleting whole segments later, and until then it still
// answers for entries below the first index from the segment it is
// writing. Those entries are committed and intact, but the log no longer
// holds them: raft relies on ErrLogNotFound there to send a lagging
// follower a snapshot, so they are not found, as in raft-boltdb.
func (w *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return w.WAL.GetLog(index, l)
}

// Close closes the WAL, then its meta database.
func (w *walStore) Close() error {
	err := w.WAL.Close()
	if cerr := w.meta.Close(); err == nil {
		err = cerr
	}
	return err
}

// logStore is an opened raft log with what closes it.
type logStore struct {
	raft.LogStore
	kind  string
	close func() error
}

// IsMonotonic passes on the store's own answer (raft-wal: true).
func (l *logStore) IsMonotonic() bool {
	m, ok := l.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// openLogStore opens the log in the configured store, first moving it
// there from the store the stable store names if they differ.
func openLogStore(raftDir, want string, segSize int, stable *raftboltdb.BoltStore, lg hclog.Logger) (*logStore, error) {
	have, err := recordedLogStore(stable)
	if err != nil {
		return nil, err
	}
	walDir := filepath.Join(raftDir, walDirName)
	if have != want {
		if err := moveLog(walDir, have, want, segSize, stable, lg); err != nil {
			return nil, fmt.Errorf("raftnode: moving the raft log from %s to %s: %w", have, want, err)
		}
	}
	if want == LogStoreBoltDB {
		return &logStore{LogStore: stable, kind: LogStoreBoltDB, close: func() error { return nil }}, nil
	}
	w, err := openWAL(walDir, segSize, lg.Named("wal"))
	if err != nil {
		return nil, err
	}
	return &logStore{LogStore: w, kind: LogStoreWAL, close: w.Close}, nil
}

// recordedLogStore reads which store holds the log.
func recordedLogStore(stable *raftboltdb.BoltStore) (string, error) {
	v, err := stable.Get(logStoreKey)
	switch {
	case errors.Is(err, raftboltdb.ErrKeyNotFound):
		return LogStoreBoltDB, nil
	case err != nil:
		return "", fmt.Errorf("raftnode: reading %s from the stable store: %w", logStoreKey, err)
	}
	switch s := string(v); s {
	case LogStoreWAL, LogStoreBoltDB:
		return s, nil
	default:
		return "", fmt.Errorf("raftnode: the stable store names the raft log store %q, which this build does not know", s)
	}
}

// moveLog moves the log from store from to store to (see LogStoreWAL).
func moveLog(walDir, from, to string, segSize int, stable *raftboltdb.BoltStore, lg hclog.Logger) error {
	// Empty the destination: what it holds is left from an interrupted
	// move or from before an earlier one.
	if to == LogStoreWAL {
		if err := os.RemoveAll(walDir); err != nil {
			return err
		}
	} else if err := clearBolt(stable); err != nil {
		return err
	}
	wal, err := openWAL(walDir, segSize, lg.Named("wal"))
	if err != nil {
		return err
	}
	var src, dst raft.LogStore = stable, wal
	if from == LogStoreWAL {
		src, dst = wal, stable
	}
	n, err := copyLog(dst, src, lg, from, to)
	if cerr := wal.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The commit point: from here on the destination holds the log.
	if err := stable.Set(logStoreKey, []byte(to)); err != nil {
		return err
	}
	lg.Info("raft log moved", "from", from, "to", to, "entries", n)
	if from == LogStoreWAL {
		return os.RemoveAll(walDir)
	}
	return clearBolt(stable)
}

// copyLog copies every entry of src into the empty dst, logging progress.
func copyLog(dst, src raft.LogStore, lg hclog.Logger, from, to string) (uint64, error) {
	first, err := src.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := src.LastIndex()
	if err != nil {
		return 0, err
	}
	if last == 0 || first == 0 {
		return 0, nil
	}
	lg.Info("moving the raft log", "from", from, "to", to, "first", first, "last", last)
	progress := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range progress {
			lg.Info("moving the raft log: " + m)
		}
	}()
	err = migrate.CopyLogs(context.Background(), dst, src, migrateBatchBytes, progress)
	<-done
	if err != nil {
		return 0, err
	}
	return last - first + 1, nil
}

// clearBolt deletes every log entry raft.db holds.
func clearBolt(b *raftboltdb.BoltStore) error {
	first, err := b.FirstIndex()
	if err != nil {
		return err
	}
	last, err := b.LastIndex()
	if err != nil {
		return err
	}
	if last == 0 {
		return nil
	}
	return b.DeleteRange(first, last)
}
