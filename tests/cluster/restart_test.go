package clustertests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// TestWholeClusterRestartKeepsAuthority checks durability across a full
// stop: every node SIGTERMed, then all restarted on the same data dirs.
// Invariants:
//   - every node reports the same receipt seq and state digest after the
//     restart as the cluster did before it (nothing lost, nothing replayed
//     twice, the clock not moved by restarting);
//   - a retried grant request with its original idempotency key returns the
//     original grant id and seq;
//   - a retried spend with its original key returns the original attempt;
//   - spending an already-spent grant with a new key is already_spent;
//   - an unspent grant minted before the restart can still be spent once;
//   - the stream is whole and passes the auditor.
func TestWholeClusterRestartKeepsAuthority(t *testing.T) {
	wholeRestart(t, (*cluster.Cluster).StopAll)
}

// TestWholeClusterCrashKeepsAuthority is TestWholeClusterRestartKeepsAuthority
// with every node SIGKILLed at once instead: with fsync on, everything
// acknowledged was on a majority's disk and must come back.
func TestWholeClusterCrashKeepsAuthority(t *testing.T) {
	wholeRestart(t, (*cluster.Cluster).KillAll)
}

func wholeRestart(t *testing.T, down func(*cluster.Cluster)) {
	const nGrants, nSpent = 20, 10
	c := cluster.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := c.Client(c.Leader(), worker)
	mints := make([]grants.Envelope, nGrants)
	spends := make([]grants.Envelope, nSpent)
	for i := range nGrants {
		mints[i] = cluster.Mint(t, ctx, cl, i, fmt.Sprintf("restart-grant-%d", i))
	}
	for i := range nSpent {
		env, err := cl.Spend(ctx, api.SpendRequest{GrantID: mints[i].GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("restart-spend-%d", i)})
		if err != nil || !cluster.IsAttempt(env) {
			t.Fatalf("spend %d: want attempt, got %+v (%v)", i, env, err)
		}
		spends[i] = env
	}
	c.WaitPublished()
	before := c.WaitConverged()

	down(c)
	for i, nd := range c.Nodes {
		if nd.Running() {
			t.Fatalf("node %d still running", i)
		}
	}
	c.RestartAll()
	after := c.WaitConverged()
	if after.Seq != before.Seq || after.StateDigest != before.StateDigest || after.Epoch != before.Epoch || after.Clock != before.Clock {
		t.Fatalf("invariant state survives a full restart: before seq %d epoch %d clock %d digest %s; after seq %d epoch %d clock %d digest %s",
			before.Seq, before.Epoch, before.Clock, before.StateDigest, after.Seq, after.Epoch, after.Clock, after.StateDigest)
	}
	for i := range c.Nodes {
		if st := c.Status(i); st.Seq != before.Seq || st.StateDigest != before.StateDigest {
			t.Errorf("invariant every node has the pre-restart state: %s at seq %d digest %s, want %d %s", st.Node, st.Seq, st.StateDigest, before.Seq, before.StateDigest)
		}
	}
	// Read the stream (and audit it) before anything new happens, so the
	// digest comparison is at the same seq.
	c.CheckedStream(t, c.WaitPublished())

	cl = c.Client(c.Leader(), worker)
	for i := range nGrants {
		again, err := cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("restart-grant-%d", i)})
		if err != nil || again.GrantID != mints[i].GrantID || again.Seq != mints[i].Seq {
			t.Errorf("invariant idempotent grant retry after restart: grant %d was %s seq %d, retry gave %+v (%v)", i, mints[i].GrantID, mints[i].Seq, again, err)
		}
	}
	for i := range nSpent {
		again, err := cl.Spend(ctx, api.SpendRequest{GrantID: mints[i].GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("restart-spend-%d", i)})
		if err != nil || !cluster.IsAttempt(again) || again.Seq != spends[i].Seq {
			t.Errorf("invariant idempotent spend retry after restart: grant %d attempt seq %d, retry gave %+v (%v)", i, spends[i].Seq, again, err)
		}
		other, err := cl.Spend(ctx, api.SpendRequest{GrantID: mints[i].GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("restart-respend-%d", i)})
		if err != nil || !cluster.IsRefusal(other, grants.ReasonAlreadySpent) {
			t.Errorf("invariant spent stays spent after restart: grant %d: want already_spent, got %+v (%v)", i, other, err)
		}
	}
	for i := nSpent; i < nGrants; i++ {
		env, err := cl.Spend(ctx, api.SpendRequest{GrantID: mints[i].GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("restart-late-spend-%d", i)})
		if err != nil || !cluster.IsAttempt(env) {
			t.Errorf("invariant unspent grant survives restart: grant %d: want attempt, got %+v (%v)", i, env, err)
		}
	}
	c.CheckedStream(t, c.WaitPublished())
	c.WaitConverged()
}
