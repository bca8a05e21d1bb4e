package issuer

import (
	"context"
	"time"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/natsbus"
)

// publishLoop copies receipts from the replicated outbox into the stream,
// in sequence order, and commits the published watermark back through the
// log so that followers can trim their outboxes too. It starts from the
// stream's own last sequence, so a new leader neither loses nor repeats a
// receipt the old one published: the stream's expected-last-sequence check
// and Nats-Msg-Id de-duplication refuse both.
//
// lead() has created the stream before serving; checking again here costs
// one round trip and repairs a stream whose settings were changed.
func (s *Service) publishLoop(ctx context.Context) error {
	for {
		_, err := natsbus.EnsureStream(ctx, s.js, s.cfg.StreamReplicas)
		if err == nil {
			break
		}
		s.log.Warn("receipt stream not ready; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	var last uint64
	for {
		// During a stream leader election there is no answer to trust
		// (natsbus.ErrStreamNotLed): wait for one.
		l, err := s.pub.LastSeq(ctx)
		if err == nil {
			last = l
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("reading the receipt stream; retrying", "err", err)
		s.notePublishErr(err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(lossRecheck):
		}
	}
	s.setStreamSeq(last)
	s.checkStreamLoss(last)
	var confirmed uint64
	s.node.View(func(st *fsm.State, _ uint64) { confirmed = st.Published() })
	lastConfirm, lastRead := time.Now(), time.Now()
	retry := 50 * time.Millisecond
	var roundSince time.Time // when the partial round now waiting could first have gone
	for ctx.Err() == nil {
		// A short reading is confirmed (or cleared) by reading again, even
		// when nothing is waiting to be published.
		if s.lossSuspected() && time.Since(lastRead) >= lossRecheck {
			if l, lerr := s.pub.LastSeq(ctx); lerr == nil {
				last = l
				s.setStreamSeq(l)
				s.checkStreamLoss(l)
			}
			lastRead = time.Now()
		}
		applied := s.node.Applied()
		// A round goes when a full batch waits, or PublishLinger after the
		// first receipt of a partial one could have gone: one JetStream
		// replication round (and fsync on every replica) then carries
		// many receipts where a quiet cluster would pay one per answer.
		// Until then only the count is read, not the batch.
		if s.cfg.PublishLinger > 0 && !s.lossSuspected() {
			var waiting int
			s.node.View(func(st *fsm.State, _ uint64) { waiting = st.OutboxAfter(last) })
			switch {
			case waiting == 0 || waiting >= s.cfg.PublishBatch:
				roundSince = time.Time{}
			case roundSince.IsZero():
				roundSince = time.Now()
				fallthrough
			default:
				if rest := s.cfg.PublishLinger - time.Since(roundSince); rest > 0 {
					timer := time.NewTimer(rest)
					select {
					case <-ctx.Done():
					case <-applied:
					case <-timer.C:
					}
					timer.Stop()
					continue
				}
			}
		}
		roundSince = time.Time{}
		var batch []natsbus.Message
		s.node.View(func(st *fsm.State, _ uint64) {
			for _, p := range st.Outbox(last, s.cfg.PublishBatch) {
				batch = append(batch, natsbus.Message{Seq: p.Seq, Subject: p.Subject, Data: p.Data})
			}
			confirmed = st.Published()
		})
		if len(batch) > 0 {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			top, err := s.pub.Publish(pctx, batch)
			cancel()
			if err == nil {
				s.mu.Lock()
				s.rounds++
				s.mu.Unlock()
			}
			if top > last {
				last = top
				s.setStreamSeq(last)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("publishing receipts", "from", batch[0].Seq, "err", err)
				s.notePublishErr(err)
				if l, lerr := s.pub.LastSeq(ctx); lerr == nil {
					last = l
					s.setStreamSeq(l)
					s.checkStreamLoss(l)
				}
				lastRead = time.Now()
				select {
				case <-ctx.Done():
				case <-time.After(retry):
				}
				continue
			}
		}
		// The watermark is committed at most once per ConfirmEvery: it
		// only lets followers trim their outboxes, and a log entry per
		// published batch would double the disk writes of a quiet
		// cluster, where every request publishes alone.
		if last > confirmed && time.Since(lastConfirm) >= s.cfg.ConfirmEvery {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
			_, err := s.node.Propose(cctx, fsm.Command{Op: fsm.OpPublished, Caller: "issuer:" + s.node.ID(), Seq: last})
			cancel()
			if err == nil {
				confirmed, lastConfirm = last, time.Now()
			} else if isLeaderErr(err) {
				return nil
			}
		}
		if len(batch) == s.cfg.PublishBatch {
			continue
		}
		wait := s.cfg.ConfirmEvery
		if last > confirmed {
			wait = max(s.cfg.ConfirmEvery-time.Since(lastConfirm), time.Millisecond)
		}
		if s.lossSuspected() {
			wait = min(wait, max(lossRecheck-time.Since(lastRead), time.Millisecond))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-applied:
		case <-timer.C:
		}
		timer.Stop()
	}
	return nil
}

func (s *Service) setStreamSeq(v uint64) {
	s.mu.Lock()
	if v > s.streamSeq {
		s.lastAdvance, s.pubErr = time.Now(), ""
	}
	s.streamSeq = v
	s.mu.Unlock()
}
