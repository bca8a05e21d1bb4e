package raftnode

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// watchedStore is the raft log store and the stable store with their
// write errors recorded. hashicorp/raft logs a failed append and carries on (a leader
// steps down, a follower refuses the entries), so a node whose disk is
// full or read-only would otherwise linger quietly; Node.StorageHealth
// lets the process notice, report it in status and stop.
type watchedStore struct {
	log    raft.LogStore
	stable *raftboltdb.BoltStore

	mu       sync.Mutex
	lastErr  error
	failFrom time.Time // first failure of the current failing streak
	lastOK   time.Time
	// appendFailing is set when a log append failed in the current streak.
	appendFailing bool
}

// note records the outcome of a write. A failure starts (or continues) a
// failing streak. Once a log append has failed in the streak, only a
// successful append ends it: on a full disk small writes (the term, a
// vote, a range deletion that frees pages) can still succeed now and then
// while every append fails, and a node that can store no entry can
// neither follow nor lead, so such successes must not hide the failure.
func (w *watchedStore) note(err error, isAppend bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.lastErr == nil {
			w.failFrom = time.Now()
		}
		w.lastErr = err
		w.appendFailing = w.appendFailing || isAppend
		return err
	}
	if isAppend || !w.appendFailing {
		w.lastErr, w.failFrom, w.lastOK, w.appendFailing = nil, time.Time{}, time.Now(), false
	}
	return nil
}

func (w *watchedStore) FirstIndex() (uint64, error)        { return w.log.FirstIndex() }
func (w *watchedStore) LastIndex() (uint64, error)         { return w.log.LastIndex() }
func (w *watchedStore) GetLog(i uint64, l *raft.Log) error { return w.log.GetLog(i, l) }

func (w *watchedStore) StoreLog(l *raft.Log) error { return w.note(w.log.StoreLog(l), true) }

func (w *watchedStore) StoreLogs(ls []*raft.Log) error {
	return w.note(w.log.StoreLogs(ls), true)
}

func (w *watchedStore) DeleteRange(min, max uint64) error {
	return w.note(w.log.DeleteRange(min, max), false)
}

// IsMonotonic passes on whether the log store refuses gaps (raft-wal
// does): raft then empties the log before it installs a snapshot instead
// of leaving a gap behind it.
func (w *watchedStore) IsMonotonic() bool {
	m, ok := w.log.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (w *watchedStore) Get(k []byte) ([]byte, error) { return w.stable.Get(k) }
func (w *watchedStore) Set(k, v []byte) error        { return w.note(w.stable.Set(k, v), false) }

func (w *watchedStore) GetUint64(k []byte) (uint64, error) { return w.stable.GetUint64(k) }
func (w *watchedStore) SetUint64(k []byte, v uint64) error {
	return w.note(w.stable.SetUint64(k, v), false)
}

// StorageHealth reports the raft store's write errors: the last one and
// since when writes have been failing without a successful log append in
// between (nil and zero when the store is healthy).
func (n *Node) StorageHealth() (err error, failingSince time.Time) {
	if n.wstore == nil {
		return nil, time.Time{}
	}
	n.wstore.mu.Lock()
	defer n.wstore.mu.Unlock()
	return n.wstore.lastErr, n.wstore.failFrom
}
