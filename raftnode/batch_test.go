package raftnode

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/benchcpu"
)

// BenchmarkSequentialPropose measures one caller's commit latency on a
// single node with the largest BatchWait Validate allows. An idle leader
// submits a lone proposal at once (BatchWait only applies while another
// entry is in flight), so ns/op stays near one fsync'd append, far below
// BatchWait; compare against a build of the old batcher to see the change.
func BenchmarkSequentialPropose(b *testing.B) {
	cfg := testConfig(b.TempDir(), freeAddr(b))
	cfg.BatchWait = 50 * time.Millisecond
	n := start(b, cfg)
	waitLeader(b, n)
	setPolicy(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		env, err := n.Propose(ctx, requestCmd(b, "w1", i))
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if env.Kind != events.KindPermit {
			b.Fatalf("proposal %d: want a permit, got %+v", i, env)
		}
	}
}

// BenchmarkThreeNodeCommit is the floor under an issuer's latency at
// concurrency 1: one caller proposing to the leader of three nodes on
// loopback TCP, each with its own fsync'd boltdb log. hashicorp/raft
// stores the leader's entry before it replicates, so a commit is the
// leader's append, a round trip, and a follower's append, in sequence.
// It reports p50 and p99 commit-and-apply latency.
func BenchmarkThreeNodeCommit(b *testing.B) {
	addrs := []string{freeAddr(b), freeAddr(b), freeAddr(b)}
	peers := make([]Peer, 3)
	for i, a := range addrs {
		peers[i] = Peer{ID: fmt.Sprintf("n%d", i+1), Addr: a}
	}
	nodes := make([]*Node, 3)
	for i := range nodes {
		cfg := testConfig(b.TempDir(), addrs[i])
		cfg.NodeID, cfg.Peers = peers[i].ID, peers
		nodes[i] = start(b, cfg)
	}
	var leader *Node
	deadline := time.Now().Add(20 * time.Second)
	for leader == nil {
		for _, n := range nodes {
			if n.IsLeader() {
				leader = n
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no leader among three nodes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitLeader(b, leader)
	setPolicy(b, leader)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		env, err := leader.Propose(ctx, requestCmd(b, "w1", i))
		lat = append(lat, time.Since(t0))
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if env.Kind != events.KindPermit {
			b.Fatalf("proposal %d: want a permit, got %+v", i, env)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkConcurrentPropose is the issuer's request path through
// raftnode under load: 64 callers, each proposing under a 5s commit
// deadline, share one fsync'd single-node log through the batcher. "ctx"
// gives each proposal a context.WithTimeout, as the issuer did; "within"
// is ProposeWithin, as the issuer does. ns/op is wall time per command
// (all callers together); allocs/op counts the whole process, raft's
// share included. Commands are built before the timer starts.
func BenchmarkConcurrentPropose(b *testing.B) {
	for _, name := range []string{"ctx", "within"} {
		b.Run(name, func(b *testing.B) {
			n := start(b, testConfig(b.TempDir(), freeAddr(b)))
			waitLeader(b, n)
			setPolicy(b, n)
			benchPropose(b, n, name)
		})
	}
}

// startInmem starts a single-voter node on hashicorp/raft's in-memory log,
// stable and snapshot stores and transport: the batcher, raft's leader
// loop and the state machine as Start wires them, without the fsync'd
// boltdb log and the TCP transport, so a benchmark on it measures the
// proposal path's own cost rather than the disk's. Only the batcher and
// the proposal path are live (Close, Info and snapshots need Start's
// stores); the cleanup stops it as Close does.
func startInmem(tb testing.TB, cfg Config) *Node {
	tb.Helper()
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLease
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.Logger = hclog.NewNullLogger()
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	addr, trans := raft.NewInmemTransport("")
	if err := raft.BootstrapCluster(rc, store, store, snaps, trans, raft.Configuration{
		Servers: []raft.Server{{ID: rc.LocalID, Address: addr, Suffrage: raft.Voter}},
	}); err != nil {
		tb.Fatal(err)
	}
	ad := newAdapter()
	n := &Node{
		cfg: cfg, fsm: ad,
		proposals: make(chan proposal, 4*cfg.BatchMax),
		stop:      make(chan struct{}),
		applyCond: make(chan struct{}),
	}
	ad.notify = n.signalApplied
	r, err := raft.NewRaft(rc, ad, store, store, snaps, trans)
	if err != nil {
		tb.Fatal(err)
	}
	n.raft = r
	n.wg.Add(1)
	go n.batchLoop()
	tb.Cleanup(func() {
		n.sendMu.Lock()
		n.closing = true
		n.sendMu.Unlock()
		close(n.stop)
		n.wg.Wait()
		n.inflight.Wait()
		_ = r.Shutdown().Error()
		_ = trans.Close()
	})
	return n
}

// BenchmarkInmemPropose is BenchmarkConcurrentPropose on an in-memory
// raft log (startInmem): the per-proposal CPU of the proposal path itself
// (deadline, queue, batcher, answer) together with raft's in-memory
// leader loop and the state machine, without the disk and network.
func BenchmarkInmemPropose(b *testing.B) {
	for _, name := range []string{"ctx", "within"} {
		b.Run(name, func(b *testing.B) {
			cfg := testConfig(b.TempDir(), "inmem")
			n := startInmem(b, cfg)
			waitLeader(b, n)
			setPolicy(b, n)
			benchPropose(b, n, name)
		})
	}
}

// benchPropose proposes b.N fresh grant requests to n from 64 callers,
// each under a 5s commit deadline: with context.WithTimeout and Propose
// ("ctx") or with ProposeWithin ("within"). It reports cpu-ns/op.
func benchPropose(b *testing.B, n *Node, how string) {
	cmds := make([]fsm.Command, b.N)
	for i := range cmds {
		cmds[i] = requestCmd(b, "w1", i)
	}
	propose := func(c fsm.Command) (grants.Envelope, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return n.Propose(ctx, c)
	}
	if how == "within" {
		propose = func(c fsm.Command) (grants.Envelope, error) { return n.ProposeWithin(5*time.Second, c) }
	}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := cmds[next.Add(1)-1]
			env, err := propose(c)
			if err != nil {
				b.Error(err)
				return
			}
			if env.GrantID != c.GrantID {
				b.Errorf("want grant %s, got %+v", c.GrantID, env)
				return
			}
		}
	})
	cpu.Report(b)
}
