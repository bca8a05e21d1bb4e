package issuer

import (
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
)

// drainWindow: an outbox with receipts in it counts as draining while the
// stream advanced within this long.
const drainWindow = 5 * time.Second

// pubState is the publication health status reports. Guarded by
// Service.mu.
type pubState struct {
	lastAdvance time.Time // when the stream's last seq last moved up
	pubErr      string    // the last publication error since then
	lostFrom    uint64    // receipts the stream lost: lostFrom..lostThrough
	lostThrough uint64
}

func (s *Service) notePublishErr(err error) {
	s.mu.Lock()
	s.pubErr = err.Error()
	s.mu.Unlock()
}

// checkStreamLoss compares the stream's last seq with the watermark this
// cluster confirmed published. A stream that ends below it lost receipts
// it had acknowledged (a JetStream store wiped or rolled back): those
// receipts left the outbox when they were confirmed, so the publisher
// cannot put them back, and new receipts cannot follow the gap. That is
// reported loudly, in the log and in status, never papered over.
func (s *Service) checkStreamLoss(last uint64) {
	var confirmed uint64
	s.node.View(func(st *fsm.State, _ uint64) { confirmed = st.Published() })
	s.mu.Lock()
	defer s.mu.Unlock()
	if last >= confirmed {
		s.lostFrom, s.lostThrough = 0, 0
		return
	}
	if s.lostFrom != last+1 || s.lostThrough != confirmed {
		s.log.Error("receipt stream lost receipts it had acknowledged: restore the stream from a replica or backup",
			"stream_last_seq", last, "confirmed_published", confirmed, "lost_from", last+1, "lost_through", confirmed)
	}
	s.lostFrom, s.lostThrough = last+1, confirmed
}

// extendStatus adds raft, storage, security and publication fields.
func (s *Service) extendStatus(st *api.Status) {
	in := s.node.Info()
	st.LastLogIndex, st.FirstLogIndex, st.SnapshotIndex = in.LastIndex, in.FirstIndex, in.SnapshotIndex
	switch {
	case st.State == "Leader":
		st.LastContactMS = 0
	case in.LastContact.IsZero():
		st.LastContactMS = -1
	default:
		st.LastContactMS = time.Since(in.LastContact).Milliseconds()
	}
	st.RaftLogNoSync, st.RaftLogSyncKnown = in.LogNoSync, in.LogSyncKnown
	if ns := s.cfg.NATSServer; ns != nil {
		if jc := ns.JetStreamConfig(); jc != nil {
			st.JetStreamSyncAlways, st.JetStreamSyncKnown = jc.SyncAlways, true
		}
	}
	st.RaftTLS, st.NATSTLS, st.Auth = s.cfg.RaftTLS, s.cfg.NATSTLS, s.cfg.Auth
	if err, since := s.node.StorageHealth(); err != nil {
		st.StorageError, st.StorageFailingMS = err.Error(), time.Since(since).Milliseconds()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastAdvance.IsZero() {
		st.LastPublishedAt = s.lastAdvance.UnixNano()
	}
	st.PublishError = s.pubErr
	st.StreamLostFrom, st.StreamLostThrough = s.lostFrom, s.lostThrough
	st.OutboxDraining = st.StreamLostFrom == 0 && (st.Outbox == 0 || st.StreamLastSeq >= st.Seq ||
		(!s.lastAdvance.IsZero() && time.Since(s.lastAdvance) < drainWindow))
}
