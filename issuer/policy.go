package issuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// errNoEpoch: the requested epoch is not in the receipt stream.
var errNoEpoch = errors.New("issuer: no such epoch")

// epochScanWait bounds how long one fetch from the receipt stream waits.
const epochScanWait = 2 * time.Second

// handlePolicyShow answers writ.op.policy.show: the document of the epoch
// in force from the state machine, or of an older epoch from the receipt
// stream. The state machine keeps only the policy in force (memory follows
// live authority); every epoch receipt carries its canonical document and
// digest, and the stream is the durable record, so old epochs stay
// readable for audit without growing the state.
func (s *Service) handlePolicyShow(m *nats.Msg) { s.spawn(m, policyShowHandler) }

// policyShow answers one writ.op.policy.show request.
func (s *Service) policyShow(m *nats.Msg) {
	var r api.PolicyShowRequest
	if err := decodeStrict(m.Data, &r); err != nil {
		s.respondShow(m, api.PolicyShow{Error: err.Error()})
		return
	}
	var cur api.PolicyShow
	s.node.View(func(st *fsm.State, _ uint64) {
		p, d := st.Policy()
		cur.Epoch = st.Epoch()
		if p != nil {
			cur.Policy, cur.Digest = p.Canonical(), d.String()
		}
	})
	switch {
	case r.Epoch == 0 || r.Epoch == cur.Epoch:
		s.respondShow(m, cur)
	case r.Epoch > cur.Epoch:
		s.respondShow(m, api.PolicyShow{Epoch: r.Epoch, Error: fmt.Sprintf("epoch %d is not applied yet (the epoch in force is %d)", r.Epoch, cur.Epoch)})
	default:
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
		defer cancel()
		e, err := s.epochReceipt(ctx, r.Epoch)
		if err != nil {
			s.respondShow(m, api.PolicyShow{Epoch: r.Epoch, Error: err.Error()})
			return
		}
		s.respondShow(m, api.PolicyShow{Epoch: e.Epoch, Digest: e.PolicyDigest.String(), Seq: e.Seq, Policy: e.Policy})
	}
}

func (s *Service) respondShow(m *nats.Msg, ps api.PolicyShow) {
	data, err := json.Marshal(ps)
	if err != nil {
		s.log.Error("encoding policy", "err", err)
		return
	}
	_ = m.Respond(data)
}

// epochReceipt reads the receipt that applied epoch from the stream's
// epoch subject, oldest first.
func (s *Service) epochReceipt(ctx context.Context, epoch uint64) (events.Event, error) {
	st, err := s.js.Stream(ctx, events.StreamName)
	if err != nil {
		return events.Event{}, fmt.Errorf("receipt stream: %w", err)
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.Subject(events.KindEpoch)},
	})
	if err != nil {
		return events.Event{}, fmt.Errorf("reading epoch receipts: %w", err)
	}
	for {
		batch, err := cons.Fetch(64, jetstream.FetchMaxWait(epochScanWait))
		if err != nil {
			return events.Event{}, fmt.Errorf("reading epoch receipts: %w", err)
		}
		n := 0
		last := false
		for msg := range batch.Messages() {
			n++
			e, err := events.Decode(msg.Data())
			if err != nil {
				return events.Event{}, fmt.Errorf("epoch receipt: %w", err)
			}
			if e.Kind == events.KindEpoch && e.Epoch == epoch {
				return e, nil
			}
			if md, err := msg.Metadata(); err == nil && md.NumPending == 0 {
				last = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return events.Event{}, fmt.Errorf("reading epoch receipts: %w", err)
		}
		if n == 0 || last {
			return events.Event{}, fmt.Errorf("%w: epoch %d is not in the receipt stream (not yet published, or the stream was truncated)", errNoEpoch, epoch)
		}
	}
}
