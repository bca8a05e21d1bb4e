package clustertests

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestRestartFromSnapshotKeepsStateAndStatus checks a node restarted from a
// raft snapshot (in-process, one node): the restored state has the same
// seq and state digest, retries with original keys get original answers,
// and status reports an applied index no lower than before the restart
// (applied_index is what WaitConverged and operators use to tell a caught-up
// node from a lagging one).
func TestRestartFromSnapshotKeepsStateAndStatus(t *testing.T) {
	dir := t.TempDir()
	env := testenv.StartSingle(t, dir, nil)
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := client.New(nc, worker)
	g := cluster.Mint(t, ctx, w, 1, "snap-grant")
	a, err := w.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: "snap-spend"})
	if err != nil || !cluster.IsAttempt(a) {
		t.Fatalf("spend: %+v (%v)", a, err)
	}
	testenv.WaitFor(t, 10*time.Second, "receipts published", func() bool {
		st := env.Service.Status()
		return st.Published == st.Seq && st.Outbox == 0
	})
	before := env.Service.Status()
	if err := env.Node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	nc.Close()
	env.Stop()

	env = testenv.StartSingle(t, dir, nil)
	// The restart is bounded by its own wait; the calls after it get a
	// fresh budget.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	after := env.Service.Status()
	if after.Seq != before.Seq || after.StateDigest != before.StateDigest {
		t.Fatalf("invariant snapshot restore keeps state: before seq %d digest %s, after seq %d digest %s", before.Seq, before.StateDigest, after.Seq, after.StateDigest)
	}
	nc2, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	w = client.New(nc2, worker)
	if again, err := w.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(1), IdempotencyKey: "snap-grant"}); err != nil || again.GrantID != g.GrantID {
		t.Errorf("invariant idempotent grant retry after snapshot restore: %+v (%v)", again, err)
	}
	if again, err := w.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: "snap-spend"}); err != nil || again.Seq != a.Seq {
		t.Errorf("invariant idempotent spend retry after snapshot restore: %+v (%v)", again, err)
	}
	t.Run("applied_index", func(t *testing.T) {
		// BUG (raftnode): adapter.Restore replaces the state but leaves
		// adapter.applied at 0, so status reports applied_index 0 until
		// the next command is applied -- for an idle node, forever.
		if after.AppliedIndex < before.AppliedIndex {
			t.Errorf("status after snapshot restore: applied_index %d < %d before the restart, with the same seq %d and digest: "+
				"raftnode's adapter does not set its applied index in Restore", after.AppliedIndex, before.AppliedIndex, after.Seq)
		}
	})
}
