package faults

import (
	"path/filepath"
	"testing"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/raftnode"
)

// TestDurabilitySettingsOfRunningNodes fails if any running node's raft
// log store has NoSync on, or its JetStream does not sync every write: it
// reads both from each node's status, which takes them from the running
// stores (the bbolt handle inside raft-boltdb, the embedded server's
// JetStream config), not from the flags.
func TestDurabilitySettingsOfRunningNodes(t *testing.T) {
	smokeOK(t)
	c := cluster.Start(t, 3)
	for i := range c.Nodes {
		st := c.Status(i)
		if !st.RaftLogSyncKnown || st.RaftLogNoSync {
			t.Errorf("invariant raft log fsynced: %s reports raft_log_no_sync=%v (known %v)", st.Node, st.RaftLogNoSync, st.RaftLogSyncKnown)
		}
		if !st.JetStreamSyncKnown || !st.JetStreamSyncAlways {
			t.Errorf("invariant JetStream syncs every write: %s reports jetstream_sync_always=%v (known %v)", st.Node, st.JetStreamSyncAlways, st.JetStreamSyncKnown)
		}
	}
}

// TestBoltNoSyncProbe checks the probe the status uses: it must see NoSync
// on a store opened with it, and off on one opened without.
func TestBoltNoSyncProbe(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(t.TempDir(), "raft.db"), NoSync: noSync})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := raftnode.BoltNoSync(s)
		s.Close()
		if !ok || got != noSync {
			t.Errorf("store opened with NoSync=%v: probe says %v (ok %v)", noSync, got, ok)
		}
	}
}
