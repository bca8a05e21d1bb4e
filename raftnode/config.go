package raftnode

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Peer is one voting member of the raft group.
type Peer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // host:port of its raft transport
}

// Config configures a node. Start from DefaultConfig.
type Config struct {
	NodeID    string
	DataDir   string // raft.db (stable store), wal/ (the log) and snapshots/
	RaftBind  string // host:port the raft transport listens on
	Advertise string // host:port peers dial; RaftBind when empty
	// Peers is the full initial membership, this node included. It is used
	// to bootstrap a brand-new cluster and ignored once state exists.
	Peers []Peer

	// LogStore is where the raft log lives: LogStoreWAL (default) or
	// LogStoreBoltDB. A node started with the other one than its data
	// dir holds moves its log across once (see LogStoreWAL).
	LogStore string
	// WALSegmentSize is the size of each raft-wal segment file, which is
	// preallocated when it is created (so a full disk does not stop
	// appends until the segment is used up). raft-wal's default, 64 MiB.
	WALSegmentSize int

	// BatchMax bounds the commands coalesced into one log entry; BatchWait
	// is how long the batcher waits for company once it has one command.
	BatchMax  int
	BatchWait time.Duration
	// Pipeline bounds the log entries the leader has handed to raft and
	// not yet seen applied; while that many are in flight the batcher
	// gathers (group commit). 1 measured best with every node's log on
	// one disk (the fsyncs serialize anyway, and fewer, larger entries cost
	// less per command); 2 lets the leader's append of one entry overlap
	// the followers' append of the one before, which can pay off when each
	// node has its own disk.
	Pipeline int
	// ApplyTimeout bounds how long a proposal waits to be enqueued.
	ApplyTimeout time.Duration

	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	SnapshotRetain    int

	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// LeaderLease is how long a leader keeps leading without hearing
	// from a quorum before it steps down (at most HeartbeatTimeout). The
	// default equals HeartbeatTimeout, as etcd's check-quorum uses its
	// election timeout: with one node down the leader's quorum is a single
	// follower, and a shorter lease turns any pause of that follower (a
	// slow fsync, a starved scheduler on a busy host) into a step-down and
	// seconds without a leader. It guards liveness only: no decision rests
	// on it, every grant, spend and revocation is a committed log entry.
	LeaderLease time.Duration
	// LogLevel for raft's own logger: "error", "warn", "info", "debug".
	LogLevel string
	// Logger, when set, receives raft's own lines (see SlogLogger) instead
	// of a text logger on Start's logOut; LogLevel still applies to it.
	Logger hclog.Logger

	// TLS, when set, runs the raft transport over mutual TLS (see
	// TLSFiles); nil is plain TCP, for development and single nodes.
	TLS *TLSFiles
	// DialAddrs redirects dials: a peer whose advertised address is a key
	// is dialled at the value instead. The membership keeps advertised
	// addresses; this only changes the route. Tests use it to put a fault
	// proxy on every link; empty in a normal deployment.
	DialAddrs map[string]string
	// Clock is the wall clock this node stamps batches with when it leads
	// (default time.Now). Tests inject skew here; the state machine never
	// reads a clock.
	Clock func() time.Time
}

// DefaultConfig returns production defaults: the log in raft-wal, fsync
// on every append (neither store is ever opened without it), batches of
// up to 256 commands.
func DefaultConfig() Config {
	return Config{
		LogStore:          LogStoreWAL,
		WALSegmentSize:    DefaultWALSegmentSize,
		BatchMax:          256,
		BatchWait:         200 * time.Microsecond,
		Pipeline:          1,
		ApplyTimeout:      5 * time.Second,
		SnapshotThreshold: 8192,
		SnapshotInterval:  30 * time.Second,
		TrailingLogs:      10240,
		SnapshotRetain:    2,
		HeartbeatTimeout:  1000 * time.Millisecond,
		ElectionTimeout:   1000 * time.Millisecond,
		LeaderLease:       1000 * time.Millisecond,
		LogLevel:          "warn",
	}
}

// Bounds of Config.WALSegmentSize.
const (
	DefaultWALSegmentSize = 64 << 20
	MinWALSegmentSize     = 1 << 20
	MaxWALSegmentSize     = 1 << 30
)

// minTimeout is the smallest raft timeout hashicorp/raft accepts.
const minTimeout = 5 * time.Millisecond

// ErrConfig wraps every validation error; the message names the field.
var ErrConfig = errors.New("raftnode: invalid config")

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.NodeID == "" {
		return fieldErr("NodeID", "required (use --node-id)")
	}
	if c.DataDir == "" {
		return fieldErr("DataDir", "required (use --data-dir)")
	}
	if c.LogStore != LogStoreWAL && c.LogStore != LogStoreBoltDB {
		return fieldErr("LogStore", "%q is not %q or %q (use --raft-log-store)", c.LogStore, LogStoreWAL, LogStoreBoltDB)
	}
	if c.WALSegmentSize < MinWALSegmentSize || c.WALSegmentSize > MaxWALSegmentSize {
		return fieldErr("WALSegmentSize", "%d bytes is outside %d..%d (use --raft-wal-segment-mb)", c.WALSegmentSize, MinWALSegmentSize, MaxWALSegmentSize)
	}
	if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
		return fieldErr("RaftBind", "%q is not host:port (use --raft-addr): %v", c.RaftBind, err)
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return fieldErr("Advertise", "%q is not host:port (use --raft-advertise): %v", c.Advertise, err)
		}
	}
	seen := map[string]bool{}
	self := false
	for i, p := range c.Peers {
		if p.ID == "" {
			return fieldErr(fmt.Sprintf("Peers[%d].ID", i), "empty")
		}
		if seen[p.ID] {
			return fieldErr(fmt.Sprintf("Peers[%d].ID", i), "duplicate id %q", p.ID)
		}
		seen[p.ID] = true
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			return fieldErr(fmt.Sprintf("Peers[%d].Addr", i), "%q is not host:port: %v", p.Addr, err)
		}
		if p.ID == c.NodeID {
			self = true
		}
	}
	if len(c.Peers) > 0 && !self {
		return fieldErr("Peers", "must include this node (%q; see --peers)", c.NodeID)
	}
	if c.BatchMax < 1 || c.BatchMax > 4096 {
		return fieldErr("BatchMax", "%d is outside [1, 4096]", c.BatchMax)
	}
	if c.BatchWait < 0 || c.BatchWait > 50*time.Millisecond {
		return fieldErr("BatchWait", "%s is outside [0, 50ms]", c.BatchWait)
	}
	if c.Pipeline < 1 || c.Pipeline > 8 {
		return fieldErr("Pipeline", "%d is outside [1, 8]", c.Pipeline)
	}
	if c.ApplyTimeout <= 0 {
		return fieldErr("ApplyTimeout", "must be positive")
	}
	// The raft library checks these too, but its errors name its own
	// fields (or none); say which of ours is wrong before starting.
	if c.SnapshotRetain < 1 {
		return fieldErr("SnapshotRetain", "%d: at least one snapshot must be kept", c.SnapshotRetain)
	}
	if c.SnapshotInterval < minTimeout {
		return fieldErr("SnapshotInterval", "%s is below %s", c.SnapshotInterval, minTimeout)
	}
	if c.HeartbeatTimeout < minTimeout {
		return fieldErr("HeartbeatTimeout", "%s is below %s", c.HeartbeatTimeout, minTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return fieldErr("ElectionTimeout", "%s is below HeartbeatTimeout (%s)", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLease < minTimeout || c.LeaderLease > c.HeartbeatTimeout {
		return fieldErr("LeaderLease", "%s is outside [%s, HeartbeatTimeout (%s)]", c.LeaderLease, minTimeout, c.HeartbeatTimeout)
	}
	if c.TLS != nil {
		if err := c.TLS.validate(); err != nil {
			return err
		}
	}
	for from, to := range c.DialAddrs {
		if _, _, err := net.SplitHostPort(from); err != nil {
			return fieldErr("DialAddrs", "%q is not host:port: %v", from, err)
		}
		if _, _, err := net.SplitHostPort(to); err != nil {
			return fieldErr("DialAddrs", "%q (for %s) is not host:port: %v", to, from, err)
		}
	}
	switch c.LogLevel {
	case "error", "warn", "info", "debug", "trace", "off":
	default:
		return fieldErr("LogLevel", "%q is not one of error, warn, info, debug", c.LogLevel)
	}
	return nil
}

func (c Config) advertise() string {
	if c.Advertise != "" {
		return c.Advertise
	}
	return c.RaftBind
}
