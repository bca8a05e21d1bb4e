package cluster_test

import (
	"testing"

	"github.com/writ-dev/writ/internal/testing/cluster"
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

// TestHarnessPartitionHeal checks the fault proxies: isolating the leader
// makes the other two elect a leader of their own and keep committing,
// while the isolated node, deposed, commits nothing; healing brings it
// back to the same state. The proxies' counters show the traffic they cut.
func TestHarnessPartitionHeal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	c := cluster.StartWith(t, 3, cluster.Options{Proxy: true, Seed: 7})
	old := c.Leader()
	before := c.WaitConverged()
	c.Isolate(old)
	if m := c.Majority(); len(m) != 2 {
		t.Fatalf("majority after isolating %s: %v", c.Nodes[old].ID, m)
	}
	l := c.Leader()
	if l == old {
		t.Fatalf("the isolated node %s still leads the majority", c.Nodes[old].ID)
	}
	// The majority commits (its leader applies the publication watermark
	// and the new term's entries); the isolated node does not follow.
	maj := c.WaitConverged()
	if maj.AppliedIndex <= before.AppliedIndex {
		t.Fatalf("majority applied %d, before %d", maj.AppliedIndex, before.AppliedIndex)
	}
	iso := c.Status(old)
	if iso.State == "Leader" || iso.AppliedIndex >= maj.AppliedIndex {
		t.Fatalf("isolated %s: state %s applied %d, majority applied %d", iso.Node, iso.State, iso.AppliedIndex, maj.AppliedIndex)
	}
	swallowed := int64(0)
	for _, lk := range c.Links() {
		swallowed += lk.Raft.Stats().Swallowed
	}
	if swallowed == 0 {
		t.Errorf("the partition swallowed no raft bytes")
	}
	c.Heal()
	after := c.WaitConverged()
	if st := c.Status(old); st.StateDigest != after.StateDigest || st.AppliedIndex < after.AppliedIndex {
		t.Fatalf("healed %s: applied %d digest %.12s, leader %d %.12s", st.Node, st.AppliedIndex, st.StateDigest, after.AppliedIndex, after.StateDigest)
	}
}
