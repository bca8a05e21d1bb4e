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
	failFrom time.Time // first failure since the last successful write
	lastOK   time.Time
}

func (w *watchedStore) note(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.lastErr == nil {
			w.failFrom = time.Now()
		}
		w.lastErr = err
		return err
	}
	w.lastErr, w.failFrom, w.lastOK = nil, time.Time{}, time.Now()
	return nil
}

func (w *watchedStore) StoreLog(l *raft.Log) error { return w.note(w.BoltStore.StoreLog(l)) }

func (w *watchedStore) StoreLogs(ls []*raft.Log) error { return w.note(w.BoltStore.StoreLogs(ls)) }

func (w *watchedStore) DeleteRange(min, max uint64) error {
	return w.note(w.BoltStore.DeleteRange(min, max))
}

func (w *watchedStore) Set(k, v []byte) error { return w.note(w.BoltStore.Set(k, v)) }

func (w *watchedStore) SetUint64(k []byte, v uint64) error {
	return w.note(w.BoltStore.SetUint64(k, v))
}

// StorageHealth reports the raft store's write errors: the last one and
// since when writes have been failing without a success in between (nil
// and zero when the last write succeeded).
func (n *Node) StorageHealth() (err error, failingSince time.Time) {
	if n.wstore == nil {
		return nil, time.Time{}
	}
	n.wstore.mu.Lock()
	defer n.wstore.mu.Unlock()
	return n.wstore.lastErr, n.wstore.failFrom
}
