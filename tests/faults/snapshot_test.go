package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// TestFollowerBackAfterCompaction is scenario 3: a follower is down while
// the leader's log is compacted by snapshots past everything the follower
// has; when it comes back it can only catch up by installing a snapshot.
// Invariants: the leader's first log index moves past the follower's last
// index (the entries it lacks are gone); the follower installs a snapshot
// (its own snapshot index and first log index move past its old last
// index); its state digest and receipt seq equal every other node's; the
// stream is whole and the auditor's replay equals the digest; and
// idempotent retries of answers given while it was down still return the
// originals through it.
func TestFollowerBackAfterCompaction(t *testing.T) {
	smokeOK(t)
	n := 120
	if full() {
		n = 400
	}
	c := cluster.StartWith(t, 3, cluster.Options{ExtraArgs: []string{
		"--snapshot-threshold", "40", "--trailing-logs", "20", "--snapshot-interval", "300ms",
	}})
	leader := c.Leader()
	follower := (leader + 1) % 3
	c.WaitConverged()
	before := c.Status(follower)
	c.Kill(follower)
	t.Logf("follower %s down at last log index %d", c.Nodes[follower].ID, before.LastLogIndex)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := c.Client(leader, "w1")
	mints := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			g := cluster.Mint(t, ctx, cl, i, fmt.Sprintf("s-grant-%d", i))
			mints[i] = g.GrantID
			if i%2 == 0 {
				if a, err := cl.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("s-spend-%d", i)}); err != nil || !cluster.IsAttempt(a) {
					t.Errorf("spend %d: %+v %v", i, a, err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Wait until the majority compacted past the follower.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := c.TryStatus(leader)
		if err == nil && st.FirstLogIndex > before.LastLogIndex+1 && st.SnapshotIndex > before.LastLogIndex {
			t.Logf("leader %s: snapshot at %d, log now starts at %d (follower stopped at %d)", st.Node, st.SnapshotIndex, st.FirstLogIndex, before.LastLogIndex)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader never compacted past index %d: %+v (%v)", before.LastLogIndex, st, err)
		}
		// Keep the log moving so the snapshot threshold is crossed.
		cluster.Mint(t, ctx, cl, 100_000+int(time.Now().UnixNano()%1_000_000), fmt.Sprintf("s-tick-%d", time.Now().UnixNano()))
		time.Sleep(100 * time.Millisecond)
	}

	c.Restart(follower)
	conv := checkDigests(t, c)
	back := c.Status(follower)
	if back.SnapshotIndex <= before.LastLogIndex {
		t.Errorf("invariant caught up by snapshot: %s snapshot index %d, it stopped at %d", back.Node, back.SnapshotIndex, before.LastLogIndex)
	}
	if back.FirstLogIndex != 0 && back.FirstLogIndex <= before.LastLogIndex {
		t.Logf("note: %s still has log entries from index %d", back.Node, back.FirstLogIndex)
	}
	t.Logf("%s back: snapshot index %d, applied %d, seq %d, digest %.12s (cluster %.12s)", back.Node, back.SnapshotIndex, back.AppliedIndex, back.Seq, back.StateDigest, conv.StateDigest)

	// Answers given while it was down are still the answers through it.
	fc := c.PinnedClient(follower, "w1")
	for i := 0; i < n; i += 17 {
		again, err := fc.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("s-grant-%d", i)})
		if err != nil || again.GrantID != mints[i] {
			t.Errorf("invariant idempotent retry after catch-up: grant %d was %s, retry %+v (%v)", i, mints[i], again, err)
		}
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	checkOnePerKey(t, evs)
	checkDigests(t, c)
}
