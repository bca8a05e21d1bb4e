package issuer

import (
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
)

// drainWindow: an outbox with receipts in it counts as draining while the
// stream advanced within this long.
const drainWindow = 5 * time.Second

// A stream that reads short of the watermark this cluster confirmed
// published is declared to have lost receipts only when every reading for
// lossConfirm, at least lossReadings of them, agreed; while a short reading
// is unconfirmed, or loss is declared, the stream is read again every
// lossRecheck. One reading is never enough: even a stream leader's answer
// can be stale for a moment (a leader that has not yet learned it was
// deposed answers from its own, possibly shorter, copy), and a false alarm
// sends an operator to restore a stream that is whole.
const (
	lossConfirm  = 3 * time.Second
	lossReadings = 3
	lossRecheck  = 500 * time.Millisecond
)

// pubState is the publication health status reports. Guarded by
// Service.mu.
type pubState struct {
	lastAdvance time.Time // when the stream's last seq last moved up
	pubErr      string    // the last publication error since then
	lostFrom    uint64    // receipts the stream lost: lostFrom..lostThrough
	lostThrough uint64
	short       lossWatch // readings of the stream short of the watermark
	rounds      uint64    // publication rounds completed
}

// lossWatch follows consecutive stream readings that end below the
// confirmed watermark.
type lossWatch struct {
	since time.Time // the first of the current run of short readings; zero if none
	reads int       // how many readings the run holds
}

// observe records one reading at now, short or not, and reports whether
// the run of short readings is now long enough to declare loss.
func (w *lossWatch) observe(short bool, now time.Time) bool {
	if !short {
		*w = lossWatch{}
		return false
	}
	if w.reads == 0 {
		w.since = now
	}
	w.reads++
	return w.reads >= lossReadings && now.Sub(w.since) >= lossConfirm
}

// pending reports a short reading not yet confirmed or cleared.
func (w *lossWatch) pending() bool { return w.reads > 0 }

func (s *Service) notePublishErr(err error) {
	s.mu.Lock()
	s.pubErr = err.Error()
	s.mu.Unlock()
}

// checkStreamLoss compares the stream's last seq, as its leader reported
// it, with the watermark this cluster confirmed published. A stream that
// stays below it (see lossConfirm) lost receipts it had acknowledged (a
// JetStream store wiped or rolled back): those receipts left the outbox
// when they were confirmed, so the publisher cannot put them back, and new
// receipts cannot follow the gap. That is reported loudly, in the log and
// in status, never papered over.
func (s *Service) checkStreamLoss(last uint64) {
	var confirmed uint64
	s.node.View(func(st *fsm.State, _ uint64) { confirmed = st.Published() })
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteStreamReading(last, confirmed, time.Now())
}

// noteStreamReading is checkStreamLoss with the watermark and time given.
// Called with s.mu held.
func (s *Service) noteStreamReading(last, confirmed uint64, now time.Time) {
	if !s.short.observe(last < confirmed, now) {
		if last >= confirmed {
			s.lostFrom, s.lostThrough = 0, 0
		} else if s.short.reads == 1 {
			s.log.Warn("receipt stream reads shorter than the receipts confirmed published; reading it again before calling it lost",
				"stream_last_seq", last, "confirmed_published", confirmed, "short_readings", s.short.reads)
		}
		return
	}
	if s.lostFrom != last+1 || s.lostThrough != confirmed {
		s.log.Error("receipt stream lost receipts it had acknowledged: restore the stream from a replica or backup",
			"stream_last_seq", last, "confirmed_published", confirmed, "lost_from", last+1, "lost_through", confirmed,
			"short_since", s.short.since, "short_readings", s.short.reads)
	}
	s.lostFrom, s.lostThrough = last+1, confirmed
}

// lossSuspected reports that the stream should be read again soon: a
// short reading awaits confirmation, or loss is declared and a restored
// stream should clear it.
func (s *Service) lossSuspected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.short.pending() || s.lostFrom != 0
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
	st.RaftLogStore = in.LogStore
	if ns := s.cfg.NATSServer; ns != nil {
		if jc := ns.JetStreamConfig(); jc != nil {
			st.JetStreamSyncAlways, st.JetStreamSyncKnown = jc.SyncAlways, true
		}
	}
	st.RaftTLS, st.NATSTLS, st.Auth = s.cfg.RaftTLS, s.cfg.NATSTLS, s.cfg.Auth
	st.NATSURL = s.cfg.AdvertiseNATS
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
