package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// TestRollingMoveToTheWAL upgrades a running cluster whose nodes keep
// their raft log in raft.db (the layout of every data dir before the WAL)
// to the WAL one node at a time, while workers keep minting and spending
// through every node, then kills one node with SIGKILL and brings it back
// on the WAL. Invariants: every node reports its log in the WAL at the
// end; every answer given before, during and after the move is kept (an
// idempotent retry of each returns the original grant and seq); all nodes
// reach the same seq and state digest; the receipt stream is whole and
// replays to that digest; no spend is answered twice.
func TestRollingMoveToTheWAL(t *testing.T) {
	needFull(t)
	var mu sync.Mutex
	store := map[string]string{}
	c := cluster.StartWith(t, 3, cluster.Options{NodeArgs: func(nd *cluster.Node) []string {
		mu.Lock()
		defer mu.Unlock()
		return []string{"--raft-log-store", cmpOr(store[nd.ID], "boltdb")}
	}})
	for i := range c.Nodes {
		if st := c.Status(i); st.RaftLogStore != "boltdb" {
			t.Fatalf("%s started with --raft-log-store boltdb reports %q", st.Node, st.RaftLogStore)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type answer struct {
		worker int
		grant  string
		seq    uint64
	}
	var (
		amu     sync.Mutex
		answers = map[int]answer{}
		next    int
	)
	load := func(stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := c.Client(w, fmt.Sprintf("w%d", w+1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					amu.Lock()
					next++
					i := next
					amu.Unlock()
					rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
					g, err := cl.Grant(rctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("m-grant-%d", i)})
					rcancel()
					if err != nil || !cluster.IsPermit(g) {
						continue // unknown outcome while a node restarts; not counted
					}
					amu.Lock()
					answers[i] = answer{w, g.GrantID, g.Seq}
					amu.Unlock()
					if i%2 == 0 {
						sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
						_, _ = cl.Spend(sctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("m-spend-%d", i)})
						scancel()
					}
				}
			}()
		}
		return &wg
	}

	stop := make(chan struct{})
	wg := load(stop)
	for i, nd := range c.Nodes {
		time.Sleep(500 * time.Millisecond) // let the load reach the node's log
		c.Stop(i)
		mu.Lock()
		store[nd.ID] = "wal"
		mu.Unlock()
		c.Restart(i)
		if st := c.Status(i); st.RaftLogStore != "wal" {
			t.Fatalf("%s restarted with --raft-log-store wal reports %q", st.Node, st.RaftLogStore)
		}
		if _, err := os.Stat(filepath.Join(c.RaftDir(i), "wal")); err != nil {
			t.Fatalf("%s: no WAL directory after the move: %v", nd.ID, err)
		}
		// Caught up (the load keeps running, so the nodes are never all
		// at one seq): the restarted node reaches the seq the leader had
		// just after the restart.
		c.Leader() // waits for a serving leader
		ls, err := c.LeaderStatus()
		for deadline := time.Now().Add(cluster.ConvergeTimeout); err != nil; ls, err = c.LeaderStatus() {
			if time.Now().After(deadline) {
				t.Fatalf("leader status after restarting %s: %v", nd.ID, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for deadline := time.Now().Add(cluster.ConvergeTimeout); ; time.Sleep(100 * time.Millisecond) {
			st, err := c.TryStatus(i)
			if err == nil && st.Seq >= ls.Seq {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not catch up to seq %d after its move to the WAL: %+v (%v)", nd.ID, ls.Seq, st, err)
			}
		}
	}
	// A crash on the WAL: SIGKILL mid-load, then back.
	victim := c.Leader()
	c.Kill(victim)
	time.Sleep(time.Second)
	c.Restart(victim)
	close(stop)
	wg.Wait()

	conv := checkDigests(t, c)
	for i := range c.Nodes {
		if st := c.Status(i); st.RaftLogStore != "wal" || st.RaftLogNoSync || !st.RaftLogSyncKnown {
			t.Errorf("invariant log in a synced WAL: %s reports store %q no_sync %v (known %v)", st.Node, st.RaftLogStore, st.RaftLogNoSync, st.RaftLogSyncKnown)
		}
	}
	amu.Lock()
	defer amu.Unlock()
	if len(answers) < 30 {
		t.Fatalf("only %d grants were answered during the move", len(answers))
	}
	clients := make([]*client.Client, 3)
	for w := range clients {
		clients[w] = c.Client(c.Leader(), fmt.Sprintf("w%d", w+1))
	}
	for i, a := range answers {
		g, err := clients[a.worker].Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("m-grant-%d", i)})
		if err != nil || g.GrantID != a.grant || g.Seq != a.seq {
			t.Errorf("invariant answers kept: grant %d retried gives %s seq %d (%v), first answer %s seq %d", i, g.GrantID, g.Seq, err, a.grant, a.seq)
		}
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	t.Logf("%d grants answered across the move, each retried to its original; %d receipts, digest %.12s", len(answers), len(evs), conv.StateDigest)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
