package cluster_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

// TestHarnessStopRestartConverges checks the harness itself: a 3-node
// cluster elects one serving leader; SIGTERMing it yields another leader;
// the restarted node (same data dir and ports) catches up to the same seq
// and state digest as the others.
func TestHarnessStopRestartConverges(t *testing.T) {
	c := cluster.Start(t, 3)
	before := c.WaitConverged()
	l := c.Leader()
	c.Stop(l)
	l2 := c.Leader()
	if l2 == l {
		t.Fatalf("invariant new leader after stop: leader is still %s", c.Nodes[l].ID)
	}
	c.Restart(l)
	after := c.WaitConverged()
	if after.Seq < before.Seq {
		t.Fatalf("invariant no receipts lost across restart: seq went from %d to %d", before.Seq, after.Seq)
	}
	st := c.Status(l)
	if st.Seq != after.Seq || st.StateDigest != after.StateDigest {
		t.Fatalf("restarted %s at seq %d digest %s, leader at %d %s", st.Node, st.Seq, st.StateDigest, after.Seq, after.StateDigest)
	}
	evs := c.CheckStream()
	if uint64(len(evs)) != c.WaitPublished().Seq {
		t.Fatalf("stream holds %d receipts, leader seq %d", len(evs), after.Seq)
	}
}
