package raftnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
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
