package raftnode

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := DefaultConfig()
	c.NodeID, c.DataDir, c.RaftBind = "n1", "/tmp/writ-raft", "127.0.0.1:7000"
	c.Peers = []Peer{{ID: "n1", Addr: "127.0.0.1:7000"}, {ID: "n2", Addr: "127.0.0.1:7001"}}
	return c
}

func TestDefaultConfigValidates(t *testing.T) {
	if err := validConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig with node id, data dir and bind address: %v", err)
	}
	c := DefaultConfig()
	c.NodeID, c.DataDir, c.RaftBind = "n1", "d", "127.0.0.1:0"
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig without peers: %v", err)
	}
	// DefaultConfig alone lacks only what no default can supply.
	err := DefaultConfig().Validate()
	if err == nil || !strings.Contains(err.Error(), "NodeID") {
		t.Fatalf("bare DefaultConfig: want a NodeID error, got %v", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*Config)
	}{
		{"NodeID", func(c *Config) { c.NodeID = "" }},
		{"DataDir", func(c *Config) { c.DataDir = "" }},
		{"RaftBind", func(c *Config) { c.RaftBind = "" }},
		{"RaftBind", func(c *Config) { c.RaftBind = "127.0.0.1" }},
		{"Advertise", func(c *Config) { c.Advertise = "nohostport" }},
		{"Peers[1].ID", func(c *Config) { c.Peers[1].ID = "" }},
		{"Peers[1].ID", func(c *Config) { c.Peers[1].ID = "n1" }},
		{"Peers[0].Addr", func(c *Config) { c.Peers[0].Addr = "127.0.0.1" }},
		{"Peers", func(c *Config) { c.Peers = []Peer{{ID: "n2", Addr: "127.0.0.1:7001"}} }},
		{"LogStore", func(c *Config) { c.LogStore = "" }},
		{"LogStore", func(c *Config) { c.LogStore = "rocksdb" }},
		{"WALSegmentSize", func(c *Config) { c.WALSegmentSize = 0 }},
		{"WALSegmentSize", func(c *Config) { c.WALSegmentSize = MaxWALSegmentSize + 1 }},
		{"BatchMax", func(c *Config) { c.BatchMax = 0 }},
		{"BatchMax", func(c *Config) { c.BatchMax = 4097 }},
		{"BatchWait", func(c *Config) { c.BatchWait = -time.Nanosecond }},
		{"BatchWait", func(c *Config) { c.BatchWait = 51 * time.Millisecond }},
		{"Pipeline", func(c *Config) { c.Pipeline = 0 }},
		{"Pipeline", func(c *Config) { c.Pipeline = 9 }},
		{"ApplyTimeout", func(c *Config) { c.ApplyTimeout = 0 }},
		{"SnapshotRetain", func(c *Config) { c.SnapshotRetain = 0 }},
		{"SnapshotInterval", func(c *Config) { c.SnapshotInterval = time.Millisecond }},
		{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout = time.Millisecond }},
		{"ElectionTimeout", func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 }},
		{"LeaderLease", func(c *Config) { c.LeaderLease = time.Millisecond }},
		{"LeaderLease", func(c *Config) { c.LeaderLease = 2 * c.HeartbeatTimeout }},
		{"LogLevel", func(c *Config) { c.LogLevel = "loud" }},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			c := validConfig()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("%+v: want an error naming %s", c, tc.field)
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not wrap ErrConfig", err)
			}
			if !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Fatalf("error %q does not name the field %s", err, tc.field)
			}
		})
	}
}

func TestBoltStoreIsFsynced(t *testing.T) {
	o := boltOptions("/x/raft.db")
	if o.NoSync {
		t.Fatal("the raft log must be opened with NoSync == false")
	}
	if o.Path != "/x/raft.db" {
		t.Fatalf("path %q", o.Path)
	}
	if o.BoltOptions == nil || o.BoltOptions.NoSync {
		t.Fatal("bbolt options must not disable fsync")
	}
	if o.BoltOptions.Timeout <= 0 {
		t.Fatal("opening a locked data dir must time out rather than hang")
	}
}
