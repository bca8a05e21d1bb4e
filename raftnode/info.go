package raftnode

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrMembership: the node's flags and the membership recorded in its data
// dir disagree, or there is nothing to start from.
var ErrMembership = fmt.Errorf("%w: membership", ErrConfig)

func errNoPeers(cfg Config) error {
	return fmt.Errorf("%w: %s holds no raft state and no peers were given, so there is no cluster to bootstrap or join: "+
		"pass every member as --peers id=host:port,... (this node %q included)", ErrMembership, cfg.DataDir, cfg.NodeID)
}

// checkMembership compares the configured peers with the membership the
// log (or latest snapshot) records. Membership changes go through raft,
// never through flags, so a node whose --peers names other members, or
// whose id is not a member at all, is refused: it is almost certainly the
// wrong --data-dir or the wrong --node-id. Differing addresses only warn
// (the log's addresses are used).
func checkMembership(cfg Config, r *raft.Raft, lg hclog.Logger) error {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("raftnode: reading the recorded membership: %w", err)
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		lg.Warn("the data dir holds raft state but no membership; this node cannot elect or join until a leader contacts it", "data_dir", cfg.DataDir)
		return nil
	}
	var logIDs, flagIDs []string
	logAddr := map[string]string{}
	for _, s := range servers {
		logIDs = append(logIDs, string(s.ID))
		logAddr[string(s.ID)] = string(s.Address)
	}
	slices.Sort(logIDs)
	if _, ok := logAddr[cfg.NodeID]; !ok {
		return fmt.Errorf("%w: node id %q is not a member of the cluster recorded in %s (members: %s): wrong --node-id or --data-dir?",
			ErrMembership, cfg.NodeID, cfg.DataDir, strings.Join(logIDs, ","))
	}
	if len(cfg.Peers) == 0 {
		return nil
	}
	for _, p := range cfg.Peers {
		flagIDs = append(flagIDs, p.ID)
	}
	slices.Sort(flagIDs)
	if !slices.Equal(logIDs, flagIDs) {
		return fmt.Errorf("%w: --peers names %s but the membership recorded in %s is %s; membership changes go through raft, not flags: "+
			"fix --peers, or point --data-dir at this cluster's data", ErrMembership, strings.Join(flagIDs, ","), cfg.DataDir, strings.Join(logIDs, ","))
	}
	for _, p := range cfg.Peers {
		if a := logAddr[p.ID]; a != p.Addr {
			lg.Warn("peer address differs from the recorded membership; the recorded address is used", "peer", p.ID, "flag", p.Addr, "recorded", a)
		}
	}
	return nil
}

// Info is what a node reports about its own raft and storage.
type Info struct {
	Term          uint64
	LastIndex     uint64 // last log index (in the log or the latest snapshot)
	FirstIndex    uint64 // first index still in the log store (0: empty)
	SnapshotIndex uint64 // index of the latest snapshot (0: none)
	SnapshotTerm  uint64
	// LastContact is when a follower last heard from its leader (zero on
	// the leader itself, or never).
	LastContact time.Time
	// LogNoSync reports the raft log store's NoSync flag as the running
	// store has it: it must be false (every append fsynced).
	LogNoSync bool
	// LogSyncKnown is false when the store's flag could not be read.
	LogSyncKnown bool
	// LogStore is the store holding the raft log: LogStoreWAL or
	// LogStoreBoltDB.
	LogStore string
}

// Info reads the node's raft statistics and storage settings.
func (n *Node) Info() Info {
	st := n.raft.Stats()
	u := func(k string) uint64 {
		v, _ := strconv.ParseUint(st[k], 10, 64)
		return v
	}
	in := Info{
		Term: u("term"), LastIndex: u("last_log_index"),
		SnapshotIndex: u("last_snapshot_index"), SnapshotTerm: u("last_snapshot_term"),
	}
	if li := u("last_snapshot_index"); li > in.LastIndex {
		in.LastIndex = li
	}
	if fi, err := n.logs.FirstIndex(); err == nil {
		in.FirstIndex = fi
	}
	if n.raft.State() != raft.Leader {
		in.LastContact = n.raft.LastContact()
	}
	in.LogStore = n.logs.kind
	if n.logs.kind == LogStoreWAL {
		// raft-wal has no way to turn its fsync off: every append is
		// synced before it returns.
		in.LogNoSync, in.LogSyncKnown = false, true
	} else {
		in.LogNoSync, in.LogSyncKnown = BoltNoSync(n.store)
	}
	return in
}

// BoltNoSync reads NoSync from the bbolt handle inside a raft-boltdb
// store (ok is false when it cannot). raft-boltdb does not export it, so
// this looks at the running store's own field rather than trusting the
// options it was opened with.
func BoltNoSync(store any) (noSync, ok bool) {
	defer func() {
		if recover() != nil {
			noSync, ok = false, false
		}
	}()
	v := reflect.ValueOf(store)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false, false
		}
		v = v.Elem()
	}
	conn := v.FieldByName("conn")
	if !conn.IsValid() || conn.IsNil() {
		return false, false
	}
	f := conn.Elem().FieldByName("NoSync")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return false, false
	}
	return f.Bool(), true
}
