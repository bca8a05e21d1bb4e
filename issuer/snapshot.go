package issuer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/raftnode"
)

// SubjectSnapshot is where an operator asks one node for its state:
// writ.op.snapshot.<node>. The request body is SnapshotRequest; the answer
// is a SnapshotReply on the reply subject followed by Chunks messages
// holding the state bytes in order.
const SubjectSnapshot = api.OperatorPrefix + "snapshot"

// SnapshotChunk bounds one message of a snapshot answer.
const SnapshotChunk = 256 << 10

// SnapshotRequest asks for a node's state. The body must be exactly this
// object, with V set to api.Version; anything else is refused with
// SnapshotReply.Code invalid_request (or unsupported_version) and nothing is
// done.
type SnapshotRequest struct {
	V int `json:"v"`
	// Compact also takes a raft snapshot on the node first (compacting its
	// log), so its data dir holds a snapshot as recent as the answer.
	Compact bool `json:"compact,omitempty"`
}

// SnapshotReply heads a snapshot answer. A refused request has Error and
// Code set and no chunks follow. Code is a grants.Reason:
// invalid_request and unsupported_version for a body that is not a
// SnapshotRequest, issuer_unavailable when the node is busy (another
// snapshot is being sent, or it is at its in-flight limit; retry later),
// and empty when taking the snapshot itself failed.
type SnapshotReply struct {
	Header raftnode.SnapshotHeader `json:"header"`
	Chunks int                     `json:"chunks"`
	Error  string                  `json:"error,omitempty"`
	Code   grants.Reason           `json:"code,omitempty"`
}

// parseSnapshotRequest decodes a snapshot request body strictly: one JSON
// object with known fields only and the current version.
func parseSnapshotRequest(data []byte) (SnapshotRequest, grants.Reason, error) {
	var req struct {
		V       *int  `json:"v"`
		Compact *bool `json:"compact"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return SnapshotRequest{}, grants.ReasonInvalidRequest, fmt.Errorf("request body is not a snapshot request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return SnapshotRequest{}, grants.ReasonInvalidRequest, errors.New("request body has data after the snapshot request")
	}
	if req.V == nil {
		return SnapshotRequest{}, grants.ReasonInvalidRequest, errors.New(`request body lacks "v"`)
	}
	if *req.V != api.Version {
		return SnapshotRequest{}, grants.ReasonUnknownVersion, fmt.Errorf("request version %d is not supported (want %d)", *req.V, api.Version)
	}
	return SnapshotRequest{V: *req.V, Compact: req.Compact != nil && *req.Compact}, "", nil
}

// handleSnapshot answers a snapshot request. At most one is served at a
// time, and it also takes one of the MaxInFlight request slots: taking and
// sending a state snapshot costs as much as many requests, so a node that
// is busy answers issuer_unavailable at once instead of queueing them.
func (s *Service) handleSnapshot(m *nats.Msg) {
	if m.Reply == "" {
		s.noReply.Add(1)
		return
	}
	refuse := func(code grants.Reason, err error) {
		b, _ := json.Marshal(SnapshotReply{Error: err.Error(), Code: code})
		_ = s.nc.Publish(m.Reply, b)
	}
	req, code, err := parseSnapshotRequest(m.Data)
	if err != nil {
		refuse(code, err)
		return
	}
	select {
	case s.snapSlot <- struct{}{}:
	default:
		refuse(grants.ReasonIssuerUnavail, errors.New("a snapshot is already being sent by this node: none was taken and nothing was decided or changed; retry later"))
		return
	}
	select {
	case s.sem <- struct{}{}:
	default:
		<-s.snapSlot
		refuse(grants.ReasonIssuerUnavail, errors.New("node is at its in-flight limit: no snapshot was taken and nothing was decided or changed; retry later"))
		return
	}
	go func() {
		defer func() { <-s.sem; <-s.snapSlot }()
		s.sendSnapshot(m.Reply, req)
	}()
}

// sendSnapshot takes the node's state snapshot (compacting first if asked)
// and sends it to reply.
func (s *Service) sendSnapshot(reply string, req SnapshotRequest) {
	fail := func(err error) {
		b, _ := json.Marshal(SnapshotReply{Error: err.Error()})
		_ = s.nc.Publish(reply, b)
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
	if err := s.nc.Publish(reply, b); err != nil {
		s.log.Warn("sending snapshot", "err", err)
		return
	}
	for i := 0; i < chunks; i++ {
		end := min((i+1)*SnapshotChunk, len(data))
		if err := s.nc.Publish(reply, data[i*SnapshotChunk:end]); err != nil {
			s.log.Warn("sending snapshot", "err", err)
			return
		}
	}
	s.log.Info("state snapshot sent", "index", h.Index, "seq", h.Seq, "bytes", h.Size, "compact", req.Compact)
}
