// Package raftnode runs writ's state machine on a hashicorp/raft group with
// a raft-boltdb log (fsync on every append), batching concurrent proposals
// into single log entries and answering each command once it is committed
// and applied.
package raftnode
