package issuer

import (
	"encoding/json"
	"errors"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/raftnode"
)

// SubjectSnapshot is where an operator asks one node for its state:
// writ.op.snapshot.<node>. The request body is SnapshotRequest; the answer
// is a SnapshotReply on the reply subject followed by Chunks messages
// holding the state bytes in order.
const SubjectSnapshot = api.OperatorPrefix + "snapshot"

// SnapshotChunk bounds one message of a snapshot answer.
const SnapshotChunk = 256 << 10

// SnapshotRequest asks for a node's state.
type SnapshotRequest struct {
	V int `json:"v"`
	// Compact also takes a raft snapshot on the node first (compacting its
	// log), so its data dir holds a snapshot as recent as the answer.
	Compact bool `json:"compact,omitempty"`
}

// SnapshotReply heads a snapshot answer.
type SnapshotReply struct {
	Header raftnode.SnapshotHeader `json:"header"`
	Chunks int                     `json:"chunks"`
	Error  string                  `json:"error,omitempty"`
}

func (s *Service) handleSnapshot(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	var req SnapshotRequest
	_ = json.Unmarshal(m.Data, &req)
	fail := func(err error) {
		b, _ := json.Marshal(SnapshotReply{Error: err.Error()})
		_ = s.nc.Publish(m.Reply, b)
	}
	if req.Compact {
		if err := s.node.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
			fail(err)
			return
		}
	}
	h, data, err := s.node.StateSnapshot()
	if err != nil {
		fail(err)
		return
	}
	chunks := (len(data) + SnapshotChunk - 1) / SnapshotChunk
	b, _ := json.Marshal(SnapshotReply{Header: h, Chunks: chunks})
	if err := s.nc.Publish(m.Reply, b); err != nil {
		s.log.Warn("sending snapshot", "err", err)
		return
	}
	for i := 0; i < chunks; i++ {
		end := min((i+1)*SnapshotChunk, len(data))
		if err := s.nc.Publish(m.Reply, data[i*SnapshotChunk:end]); err != nil {
			s.log.Warn("sending snapshot", "err", err)
			return
		}
	}
	s.log.Info("state snapshot sent", "index", h.Index, "seq", h.Seq, "bytes", h.Size, "compact", req.Compact)
}
