package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Errors returned by Propose. Both mean the outcome is unknown to this
// caller: retry with the same idempotency key.
var (
	// ErrNotLeader: this node is not the leader (or lost leadership before
	// the entry committed).
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrClosed: the node is shutting down.
	ErrClosed = errors.New("raftnode: node closed")
)

// Node is one member of the issuer's raft group.
type Node struct {
	cfg       Config
	raft      *raft.Raft
	fsm       *adapter
	store     *raftboltdb.BoltStore // the stable store (term, vote)
	logs      *logStore             // the raft log (see LogStoreWAL)
	transport *raft.NetworkTransport

	proposals chan proposal
	// sendMu orders enqueuing against Close: proposals are sent under the
	// read lock, and Close sets closing under the write lock before it
	// stops the batcher, so nothing reaches the queue after the batcher's
	// final drain (where it would wait forever for an answer).
	sendMu    sync.RWMutex
	closing   bool
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	// inflight counts batches handed to raft whose futures have not
	// resolved. Close waits for them before shutting raft down: raft
	// never resolves a future still queued in its (buffered, with
	// BatchApplyCh) apply channel at shutdown (hashicorp/raft#498), which
	// would strand the proposers and the goroutine waiting on it.
	inflight sync.WaitGroup

	// timers and dones are reused by proposals: ProposeWithin's deadline
	// timers and the answer channels (see proposeUntil).
	timers sync.Pool // *time.Timer, stopped before it fired
	dones  sync.Pool // chan proposalResult, empty and no longer shared

	applyMu   sync.Mutex
	applyCond chan struct{} // closed and replaced after every apply

	clk    stampClock    // see stamp
	wstore *watchedStore // the log and stable store, watched for write errors
}

// Start opens (or creates) the node's storage, starts raft and, for a
// brand-new data dir with Peers set, bootstraps the cluster.
func Start(cfg Config, logOut io.Writer) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logOut == nil {
		logOut = os.Stderr
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: data dir: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLease
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	if cfg.Logger != nil {
		cfg.Logger.SetLevel(hclog.LevelFromString(cfg.LogLevel))
		rc.Logger = cfg.Logger
	} else {
		rc.Logger = hclog.New(&hclog.LoggerOptions{
			Name: "raft", Level: hclog.LevelFromString(cfg.LogLevel), Output: logOut,
		}).With("node", cfg.NodeID)
	}

	store, err := raftboltdb.New(boltOptions(filepath.Join(cfg.DataDir, "raft.db")))
	if err != nil {
		return nil, fmt.Errorf("raftnode: opening %s: %w (is another issuer using this data dir?)", filepath.Join(cfg.DataDir, "raft.db"), err)
	}
	ls, err := openLogStore(cfg.DataDir, cfg.LogStore, cfg.WALSegmentSize, store, rc.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	closeStores := func() {
		_ = ls.close()
		_ = store.Close()
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, rc.Logger.Named("snapshots"))
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.advertise())
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raftnode: advertise address %q: %w", cfg.advertise(), err)
	}
	trans, err := newTransport(cfg, adv, rc.Logger.Named("transport"))
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raftnode: raft transport on %s: %w", cfg.RaftBind, err)
	}
	ws := &watchedStore{log: ls, stable: store}
	logs, err := raft.NewLogCache(1024, ws)
	if err != nil {
		trans.Close()
		closeStores()
		return nil, err
	}
	ad := newAdapter()
	n := &Node{
		cfg: cfg, fsm: ad, store: store, logs: ls, transport: trans,
		proposals: make(chan proposal, 4*cfg.BatchMax),
		stop:      make(chan struct{}),
		applyCond: make(chan struct{}),
	}
	ad.notify = n.signalApplied
	n.wstore = ws

	has, err := raft.HasExistingState(logs, ws, snaps)
	if err != nil {
		trans.Close()
		closeStores()
		return nil, fmt.Errorf("raftnode: inspecting existing state: %w", err)
	}
	if !has && len(cfg.Peers) == 0 {
		trans.Close()
		closeStores()
		return nil, errNoPeers(cfg)
	}
	if !has && len(cfg.Peers) > 0 {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: raft.Voter})
		}
		if err := raft.BootstrapCluster(rc, logs, ws, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			trans.Close()
			closeStores()
			return nil, fmt.Errorf("raftnode: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, ad, logs, ws, snaps, trans)
	if err != nil {
		trans.Close()
		closeStores()
		return nil, fmt.Errorf("raftnode: starting raft: %w", err)
	}
	n.raft = r
	if has {
		if err := checkMembership(cfg, r, rc.Logger); err != nil {
			_ = r.Shutdown().Error()
			trans.Close()
			closeStores()
			return nil, err
		}
	}
	n.wg.Add(1)
	go n.batchLoop()
	return n, nil
}

// boltOptions are the options the raft log and stable store are opened
// with. NoSync stays false: every append is fsynced before raft counts it,
// which is what makes an answered request durable. A test pins this.
func boltOptions(path string) raftboltdb.Options {
	return raftboltdb.Options{
		Path:        path,
		NoSync:      false, // every append is fsynced; never change this
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true},
	}
}

// ID is the node id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Raft exposes the underlying raft instance for status and membership.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node currently believes it leads.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderCh delivers true on gaining and false on losing leadership.
func (n *Node) LeaderCh() <-chan bool { return n.raft.LeaderCh() }

// Barrier waits until every entry committed before the call is applied
// locally; a new leader calls it before serving reads or publishing.
func (n *Node) Barrier(timeout time.Duration) error { return n.raft.Barrier(timeout).Error() }

// View runs f with read access to the applied state. f must not retain s.
func (n *Node) View(f func(s *fsm.State, applied uint64)) { n.fsm.view(f) }

// ViewVersion is View with the state's version instead of the applied
// index: a number that moves on every change to the state, a restored
// snapshot included (which the applied index does not show).
func (n *Node) ViewVersion(f func(s *fsm.State, version uint64)) { n.fsm.viewVersion(f) }

// Applied returns a channel closed at the next apply.
func (n *Node) Applied() <-chan struct{} {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	return n.applyCond
}

func (n *Node) signalApplied() {
	n.applyMu.Lock()
	close(n.applyCond)
	n.applyCond = make(chan struct{})
	n.applyMu.Unlock()
}

// Snapshot forces a raft snapshot now.
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// Close stops the batcher, shuts raft down and closes the stores. It is
// safe to call more than once.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		n.sendMu.Lock()
		n.closing = true
		n.sendMu.Unlock()
		close(n.stop)
		n.wg.Wait()
		settled := make(chan struct{})
		go func() { n.inflight.Wait(); close(settled) }()
		select {
		case <-settled:
		case <-time.After(n.cfg.ApplyTimeout):
			// Raft resolves a leader's futures by committing them or by
			// stepping down; give up waiting after ApplyTimeout.
		}
		err = n.raft.Shutdown().Error()
		if cerr := n.transport.Close(); err == nil {
			err = cerr
		}
		if cerr := n.logs.close(); err == nil {
			err = cerr
		}
		if cerr := n.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Propose submits one command and waits until the log entry that carries it
// is committed and applied, returning the state machine's answer. Errors
// (ErrNotLeader, ErrClosed, context) mean the outcome is unknown.
func (n *Node) Propose(ctx context.Context, c fsm.Command) (grants.Envelope, error) {
	env, stopped, err := proposeUntil(n, c, ctx.Done())
	if stopped {
		return grants.Envelope{}, ctx.Err()
	}
	return env, err
}

// ProposeWithin is Propose under a deadline timeout from now: it gives
// what Propose gives with context.WithTimeout(context.Background(),
// timeout), context.DeadlineExceeded included, without building a
// context for the call. The deadline is a timer reused from call to call
// (a request path proposes once per request). A timeout that is not
// positive has passed already: the command is not proposed.
func (n *Node) ProposeWithin(timeout time.Duration, c fsm.Command) (grants.Envelope, error) {
	if timeout <= 0 {
		n.sendMu.RLock()
		err := n.proposable()
		n.sendMu.RUnlock()
		if err == nil {
			err = context.DeadlineExceeded
		}
		return grants.Envelope{}, err
	}
	t, _ := n.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(timeout)
	} else {
		t.Reset(timeout)
	}
	env, stopped, err := proposeUntil(n, c, t.C)
	// Only a timer stopped before it fired is reused: it has sent nothing,
	// whatever the timer channel semantics (GODEBUG asynctimerchan). One
	// that fired (a timeout, rare) is left to the garbage collector.
	if t.Stop() {
		n.timers.Put(t)
	}
	if stopped {
		return grants.Envelope{}, context.DeadlineExceeded
	}
	return env, err
}

// proposable reports why a proposal cannot be made now (ErrClosed before
// ErrNotLeader: a closed node's raft reports Shutdown, which is not
// "someone else leads"). The caller holds sendMu's read lock.
func (n *Node) proposable() error {
	if n.closing {
		return ErrClosed
	}
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	return nil
}

// proposeUntil enqueues c and waits for its answer until stop delivers;
// stopped reports that stop came first (the outcome is then unknown).
// The answer channel is reused once its one answer has been received: a
// proposal is answered exactly once (by the entry's waiter in submit or by
// drain), so a channel abandoned by a stopped caller is never reused.
func proposeUntil[T any](n *Node, c fsm.Command, stop <-chan T) (env grants.Envelope, stopped bool, err error) {
	n.sendMu.RLock()
	if err := n.proposable(); err != nil {
		n.sendMu.RUnlock()
		return grants.Envelope{}, false, err
	}
	done, _ := n.dones.Get().(chan proposalResult)
	if done == nil {
		done = make(chan proposalResult, 1)
	}
	select {
	case n.proposals <- proposal{cmd: c, done: done}:
		n.sendMu.RUnlock()
	case <-stop:
		n.sendMu.RUnlock()
		n.dones.Put(done) // never handed out: nothing will send on it
		return grants.Envelope{}, true, nil
	}
	select {
	case r := <-done:
		n.dones.Put(done)
		return r.env, false, r.err
	case <-stop:
		return grants.Envelope{}, true, nil
	}
}
