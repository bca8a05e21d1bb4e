package raftnode

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Peer is one voting member of the raft group.
type Peer struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // host:port of its raft transport
}

// Config configures a node. Start from DefaultConfig.
type Config struct {
	NodeID    string
	DataDir   string // raft.db (boltdb log + stable store) and snapshots/
	RaftBind  string // host:port the raft transport listens on
	Advertise string // host:port peers dial; RaftBind when empty
	// Peers is the full initial membership, this node included. It is used
	// to bootstrap a brand-new cluster and ignored once state exists.
	Peers []Peer

	// BatchMax bounds the commands coalesced into one log entry; BatchWait
	// is how long the batcher waits for company once it has one command.
	BatchMax  int
	BatchWait time.Duration
	// ApplyTimeout bounds how long a proposal waits to be enqueued.
	ApplyTimeout time.Duration

	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	SnapshotRetain    int

	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	LeaderLease      time.Duration
	// LogLevel for raft's own logger: "error", "warn", "info", "debug".
	LogLevel string
}

// DefaultConfig returns production defaults: fsync on every append (the
// boltdb store is never opened with NoSync), batches of up to 256 commands.
func DefaultConfig() Config {
	return Config{
		BatchMax:          256,
		BatchWait:         200 * time.Microsecond,
		ApplyTimeout:      5 * time.Second,
		SnapshotThreshold: 8192,
		SnapshotInterval:  30 * time.Second,
		TrailingLogs:      10240,
		SnapshotRetain:    2,
		HeartbeatTimeout:  1000 * time.Millisecond,
		ElectionTimeout:   1000 * time.Millisecond,
		LeaderLease:       500 * time.Millisecond,
		LogLevel:          "warn",
	}
}

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
	if _, _, err := net.SplitHostPort(c.RaftBind); err != nil {
		return fieldErr("RaftBind", "%q is not host:port: %v", c.RaftBind, err)
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			return fieldErr("Advertise", "%q is not host:port: %v", c.Advertise, err)
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
		return fieldErr("Peers", "must include this node (%q)", c.NodeID)
	}
	if c.BatchMax < 1 || c.BatchMax > 4096 {
		return fieldErr("BatchMax", "%d is outside [1, 4096]", c.BatchMax)
	}
	if c.BatchWait < 0 || c.BatchWait > 50*time.Millisecond {
		return fieldErr("BatchWait", "%s is outside [0, 50ms]", c.BatchWait)
	}
	if c.ApplyTimeout <= 0 {
		return fieldErr("ApplyTimeout", "must be positive")
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
