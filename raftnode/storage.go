package raftnode

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// watchedStore is the raft log and stable store with its write errors
// recorded. hashicorp/raft logs a failed append and carries on (a leader
// steps down, a follower refuses the entries), so a node whose disk is
// full or read-only would otherwise linger quietly; Node.StorageHealth
// lets the process notice, report it in status and stop.
type watchedStore struct {
	*raftboltdb.BoltStore

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

func (w *watchedStore) StoreLog(l *raft.Log) error { return w.note(w.BoltStore.StoreLog(l), true) }

func (w *watchedStore) StoreLogs(ls []*raft.Log) error {
	return w.note(w.BoltStore.StoreLogs(ls), true)
}

func (w *watchedStore) DeleteRange(min, max uint64) error {
	return w.note(w.BoltStore.DeleteRange(min, max), false)
}

func (w *watchedStore) Set(k, v []byte) error { return w.note(w.BoltStore.Set(k, v), false) }

func (w *watchedStore) SetUint64(k []byte, v uint64) error {
	return w.note(w.BoltStore.SetUint64(k, v), false)
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
