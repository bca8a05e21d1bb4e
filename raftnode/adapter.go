package raftnode

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// applyResult is what the adapter returns from Apply for one log entry.
type applyResult struct {
	envs []grants.Envelope
	err  error
}

// adapter connects fsm.State to raft.FSM. It serialises access: raft calls
// Apply, Snapshot and Restore from its own goroutines while the publisher
// and status readers look at the state.
type adapter struct {
	mu      sync.RWMutex
	state   *fsm.State
	applied uint64
	// version counts the changes to state: every applied entry and every
	// restored snapshot (which leaves applied as it was).
	version uint64
	notify  func() // called after every apply, outside the lock
}

func newAdapter() *adapter { return &adapter{state: fsm.New()} }

// Apply implements raft.FSM.
func (a *adapter) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	b, err := fsm.DecodeBatch(l.Data)
	if err != nil {
		// Never reachable from our own leader; refuse without touching state.
		a.mu.Lock()
		a.applied = l.Index
		a.version++
		a.mu.Unlock()
		return applyResult{err: err}
	}
	a.mu.Lock()
	envs := fsm.Apply(a.state, l.Index, b)
	a.applied = l.Index
	a.version++
	a.mu.Unlock()
	if a.notify != nil {
		a.notify()
	}
	return applyResult{envs: envs}
}

// Snapshot implements raft.FSM. As hashicorp/raft advises, it only
// captures a consistent view, under the read lock: fsm.State.Freeze copies
// what Apply mutates (see fsm.Frozen), so the view shares no mutable map,
// record or array with the live state. Encoding and writing happen in
// Persist, outside the lock, while Apply goes on.
func (a *adapter) Snapshot() (raft.FSMSnapshot, error) {
	a.mu.RLock()
	view := a.state.Freeze()
	a.mu.RUnlock()
	return snapshot{view: view}, nil
}

// Restore implements raft.FSM. A snapshot that does not decode leaves the
// current state in place and fails loudly.
func (a *adapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("raftnode: reading snapshot: %w", err)
	}
	s, err := fsm.Restore(data)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.state = s
	a.version++
	a.mu.Unlock()
	if a.notify != nil {
		a.notify()
	}
	return nil
}

// view runs f with read access to the state.
func (a *adapter) view(f func(s *fsm.State, applied uint64)) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	f(a.state, a.applied)
}

// viewVersion runs f with read access to the state and its version.
func (a *adapter) viewVersion(f func(s *fsm.State, version uint64)) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	f(a.state, a.version)
}

// snapshot is the view Snapshot captured; Persist encodes it.
type snapshot struct {
	view fsm.Frozen
}

// Persist implements raft.FSMSnapshot: it encodes the captured view and
// writes it to the sink. It runs concurrently with Apply.
func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.view.Encode()); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftnode: writing snapshot: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
