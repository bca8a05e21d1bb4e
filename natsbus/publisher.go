package natsbus

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
)

// Publisher defaults.
const (
	// DefaultRequestTimeout bounds each round trip of a Publisher: a stream
	// read, a message check, or waiting for the acks of one window.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultWindow is how many messages a Publisher keeps in flight.
	DefaultWindow = 256
	// maxWindow stays well below nats.go's default limit of 4000 pending
	// async publishes per JetStream context.
	maxWindow = 1024
	// maxStalls is how many times in a row Publish re-reads the stream
	// after "wrong last sequence" without getting any further.
	maxStalls = 8
	// maxBatch is nats-server's default cap on the messages of one atomic
	// batch (its JetStream limit max_batch_size).
	maxBatch = 1000
)

// Headers of JetStream's atomic batch publish (nats-server 2.12 and later),
// spelled as the server reads them.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// nats-server error codes of atomic batch publishing that Publish acts on.
const (
	errCodeAtomicDisabled     = 10174 // the stream does not allow atomic batches
	errCodeAtomicUnsupported  = 10177 // a header the batch used is not allowed in batches
	errCodeAtomicTooLarge     = 10199 // the server caps batches lower than this one
	errCodeAtomicDuplicateMsg = 10201 // a message id of the batch is already stored
)

// Message is one encoded event. Seq is the event's sequence number, which
// becomes its stream sequence; Subject must start with writ.evt.
type Message struct {
	Seq     uint64
	Subject string
	Data    []byte
}

// Publisher publishes ordered batches of events into the receipt stream so
// that stream sequence equals event sequence. It is safe for concurrent use,
// also by several processes: see Publish.
type Publisher struct {
	js      jetstream.JetStream
	timeout time.Duration
	window  int

	// perMessage is set once the stream refused an atomic batch in a way
	// that will not change (disabled, too large, a header it does not
	// take): from then on every window goes message by message.
	perMessage atomic.Bool

	// mu guards the position remembered from the last Publish that ended
	// without error: the stream handle and the last sequence it
	// acknowledged. A batch that starts right after it skips the stream
	// info round trip: its first message goes alone, and the stream's
	// expected-last-sequence and duplicate checks on it tell whether the
	// guess still holds; if not, Publish re-reads the stream.
	mu     sync.Mutex
	cached jetstream.Stream
	tail   uint64
}

// PublisherOption tunes a Publisher.
type PublisherOption func(*Publisher)

// WithRequestTimeout bounds each round trip (default DefaultRequestTimeout);
// non-positive values are ignored. The ctx given to each call still applies.
func WithRequestTimeout(d time.Duration) PublisherOption {
	return func(p *Publisher) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// WithWindow sets how many messages are in flight at once (default
// DefaultWindow, at most 1024); values below 1 are ignored.
func WithWindow(n int) PublisherOption {
	return func(p *Publisher) {
		if n >= 1 {
			p.window = min(n, maxWindow)
		}
	}
}

// NewPublisher returns a Publisher that publishes through js. A nil js
// makes every call fail with ErrNilJetStream.
func NewPublisher(js jetstream.JetStream, opts ...PublisherOption) *Publisher {
	p := &Publisher{js: js, timeout: DefaultRequestTimeout, window: DefaultWindow}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	return p
}

// LastSeq returns the receipt stream's last sequence (0 when empty), as
// the stream leader reports it while a quorum of the stream's replicas is
// current. Any other answer fails with ErrStreamNotLed: during a stream
// leader election every replica answers stream-info requests from its own
// copy, and the first answer to arrive may come from one that is behind or
// whose store was wiped, so it says nothing about what the stream holds.
//
// A leader that has not yet learned it was deposed can still answer from a
// shorter copy; a caller that draws conclusions from a short answer (that
// the stream lost messages) must see it again over time.
func (p *Publisher) LastSeq(ctx context.Context) (uint64, error) {
	if p == nil || p.js == nil {
		return 0, ErrNilJetStream
	}
	_, last, err := p.stream(ctx, true)
	return last, err
}

// Publish appends msgs, which must have strictly consecutive sequences, to
// the receipt stream and returns the highest sequence known to be in the
// stream afterwards (also on error).
//
// Where the stream allows atomic batches (StreamConfig sets it; servers
// before nats-server 2.12 do not know it) a window of messages goes as one
// batch: the stream stores all of it or none, answers it once, and
// replicates it as one proposal, and every message is still its own stream
// message with its own subject, sequence and message id. Otherwise each
// message is published and acknowledged on its own.
//
// A message whose Seq the stream already holds is not published again; the
// stored message is read back and must have the same subject, data and
// message id, else Publish fails with ErrStreamDiverged. If the stream ends
// before the first message it does not hold, Publish fails with ErrStreamGap
// and the caller must supply the earlier messages. Every other message is
// published with message id Seq and expected last sequence Seq-1, so the
// stream refuses it anywhere but at position Seq; when it is refused because
// another publisher got there first, Publish re-reads the stream and goes on.
//
// Other failures (a timeout, no stream leader during a fail-over, a closed
// connection) are returned as they are. Publish is idempotent: retry the
// same batch. Each round trip is bounded by the request timeout and ctx.
func (p *Publisher) Publish(ctx context.Context, msgs []Message) (_ uint64, err error) {
	if p == nil || p.js == nil {
		return 0, ErrNilJetStream
	}
	if err := checkBatch(msgs); err != nil {
		return 0, err
	}
	var (
		st      jetstream.Stream
		last    uint64
		guessed bool // st and last are remembered, not read
	)
	if len(msgs) > 0 {
		st, last, guessed = p.position(msgs[0].Seq)
	}
	if !guessed {
		var err error
		if st, last, err = p.stream(ctx, false); err != nil {
			return 0, err
		}
	}
	known, stalls := last, 0
	defer func() { p.remember(st, known, err) }()
	for i := 0; i < len(msgs); {
		for ; i < len(msgs) && msgs[i].Seq <= last; i++ {
			if err := p.verify(ctx, st, msgs[i]); err != nil {
				return known, err
			}
			stalls = 0
		}
		if i == len(msgs) {
			break
		}
		if msgs[i].Seq > last+1 {
			return known, fmt.Errorf("%w: stream ends at seq %d, batch continues at seq %d",
				ErrStreamGap, last, msgs[i].Seq)
		}
		end := min(i+p.window, len(msgs))
		batched := end-i > 1 && p.batches(st)
		if batched {
			end = min(end, i+maxBatch)
		}
		if guessed && !batched {
			// Send one message alone first. Were its sequence taken
			// meanwhile by a message with the same id, the duplicate ack
			// is checked before anything is appended after it. A batch
			// needs no such step: a duplicate id or a wrong last sequence
			// anywhere in it refuses all of it.
			end = i + 1
		}
		var (
			n      int
			pubErr error
		)
		if batched {
			n, pubErr = p.publishBatch(ctx, msgs[i:end])
			if permanentBatchRefusal(pubErr) {
				// Nothing was stored: publish this window message by
				// message (from a guessed position, its first message
				// alone), and every later one too.
				p.perMessage.Store(true)
				continue
			}
		} else {
			n, pubErr = p.publishWindow(ctx, st, msgs[i:end])
		}
		guessed = false
		if n > 0 {
			i += n
			last = msgs[i-1].Seq
			known = max(known, last)
			stalls = 0
		}
		if pubErr == nil {
			continue
		}
		if !wrongLastSeq(pubErr) && !duplicateInBatch(pubErr) {
			return known, pubErr
		}
		// Someone else appended meanwhile: find out how far the stream got.
		if n == 0 {
			if stalls++; stalls >= maxStalls {
				return known, fmt.Errorf("natsbus: no progress after %d attempts: %w", stalls, pubErr)
			}
			if err := sleepCtx(ctx, time.Duration(stalls)*10*time.Millisecond); err != nil {
				return known, err
			}
		}
		if st, last, err = p.stream(ctx, false); err != nil {
			return known, err
		}
		if last < known {
			// A stale answer, or a stream that lost its tail: either way a
			// later call sees the truth (and ErrStreamGap if messages are
			// missing, which the caller repairs by publishing them again).
			return known, fmt.Errorf("natsbus: stream reports last seq %d below acknowledged seq %d", last, known)
		}
		known = last
	}
	return known, nil
}

// publishWindow publishes batch asynchronously and waits for the acks in
// order. It returns how many leading messages are confirmed in the stream
// and the first error.
func (p *Publisher) publishWindow(ctx context.Context, st jetstream.Stream, batch []Message) (int, error) {
	wctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	var sendErr error
	for _, m := range batch {
		f, err := p.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}},
			jetstream.WithMsgID(strconv.FormatUint(m.Seq, 10)),
			jetstream.WithExpectLastSequence(m.Seq-1))
		if err != nil {
			sendErr = fmt.Errorf("natsbus: publish seq %d: %w", m.Seq, err)
			break
		}
		futures = append(futures, f)
	}
	for j, f := range futures {
		m := batch[j]
		select {
		case ack := <-f.Ok():
			if err := p.checkAck(wctx, st, m, ack); err != nil {
				return j, err
			}
		case err := <-f.Err():
			return j, fmt.Errorf("natsbus: publish seq %d: %w", m.Seq, err)
		case <-wctx.Done():
			return j, fmt.Errorf("natsbus: publish seq %d: waiting for ack: %w", m.Seq, wctx.Err())
		}
	}
	return len(futures), sendErr
}

// batches tells whether windows go to the stream st as atomic batches.
func (p *Publisher) batches(st jetstream.Stream) bool {
	if p.perMessage.Load() || st == nil {
		return false
	}
	info := st.CachedInfo()
	return info != nil && info.Config.AllowAtomicPublish
}

// batchAck is the server's answer to a batch's commit message: a PubAck for
// its last message, the batch id and how many messages it stored.
type batchAck struct {
	jetstream.PubAck
	Batch string              `json:"batch"`
	Count int                 `json:"count"`
	Error *jetstream.APIError `json:"error,omitempty"`
}

// publishBatch publishes batch (at least two messages) as one atomic batch:
// every message carries its message id and its place in the batch, the
// first one the expected last sequence, the last one the commit, which
// alone is answered. The stream stores all of it, at sequences
// batch[0].Seq onwards, or none of it, so publishBatch returns len(batch)
// or 0.
func (p *Publisher) publishBatch(ctx context.Context, batch []Message) (int, error) {
	nc := p.js.Conn()
	// Every stored message keeps its batch id, so it is kept short: the 60
	// random bits in half a version-4 UUID tell apart the batches in
	// flight on one stream.
	u := uuid.New()
	id := hex.EncodeToString(u[:8])
	first, last := batch[0].Seq, batch[len(batch)-1].Seq
	header := func(j int) nats.Header {
		h := nats.Header{
			jetstream.MsgIDHeader: {strconv.FormatUint(batch[j].Seq, 10)},
			hdrBatchID:            {id},
			hdrBatchSeq:           {strconv.Itoa(j + 1)},
		}
		if j == 0 {
			h[jetstream.ExpectedLastSeqHeader] = []string{strconv.FormatUint(first-1, 10)}
		}
		return h
	}
	n := len(batch) - 1
	for j, m := range batch[:n] {
		if err := nc.PublishMsg(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: header(j)}); err != nil {
			return 0, fmt.Errorf("natsbus: publish batch seq %d..%d: seq %d: %w", first, last, m.Seq, err)
		}
	}
	commit := header(n)
	commit[hdrBatchCommit] = []string{"1"}
	wctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := nc.RequestMsgWithContext(wctx, &nats.Msg{Subject: batch[n].Subject, Data: batch[n].Data, Header: commit})
	if err != nil {
		return 0, fmt.Errorf("natsbus: publish batch seq %d..%d: waiting for its ack: %w", first, last, err)
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("natsbus: publish batch seq %d..%d: unreadable ack %q: %w", first, last, resp.Data, err)
	}
	switch {
	case ack.Error != nil:
		return 0, fmt.Errorf("natsbus: publish batch seq %d..%d: %w", first, last, ack.Error)
	case ack.Batch != id || ack.Count != len(batch):
		return 0, fmt.Errorf("natsbus: publish batch seq %d..%d: the ack is for batch %q of %d messages, sent %q of %d",
			first, last, ack.Batch, ack.Count, id, len(batch))
	case ack.Sequence != last:
		return 0, fmt.Errorf("%w: batch seq %d..%d: stream stored it up to seq %d",
			ErrStreamDiverged, first, last, ack.Sequence)
	}
	return len(batch), nil
}

// checkAck confirms m landed at stream sequence m.Seq. A duplicate ack means
// a message with the same id was already stored: it must be the same one.
func (p *Publisher) checkAck(ctx context.Context, st jetstream.Stream, m Message, ack *jetstream.PubAck) error {
	if ack.Sequence != m.Seq {
		return fmt.Errorf("%w: seq %d: stream stored it at seq %d (duplicate=%v)",
			ErrStreamDiverged, m.Seq, ack.Sequence, ack.Duplicate)
	}
	if ack.Duplicate {
		return p.verify(ctx, st, m)
	}
	return nil
}

// verify checks the stream's message at m.Seq is m.
func (p *Publisher) verify(ctx context.Context, st jetstream.Stream, m Message) error {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	raw, err := st.GetMsg(rctx, m.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: seq %d: not in the stream", ErrStreamDiverged, m.Seq)
	}
	if err != nil {
		return fmt.Errorf("natsbus: read seq %d: %w", m.Seq, err)
	}
	id := strconv.FormatUint(m.Seq, 10)
	switch {
	case raw.Subject != m.Subject:
		return fmt.Errorf("%w: seq %d: stored subject %q, batch has %q", ErrStreamDiverged, m.Seq, raw.Subject, m.Subject)
	case raw.Header.Get(jetstream.MsgIDHeader) != id:
		return fmt.Errorf("%w: seq %d: stored message id %q, want %q",
			ErrStreamDiverged, m.Seq, raw.Header.Get(jetstream.MsgIDHeader), id)
	case !bytes.Equal(raw.Data, m.Data):
		return fmt.Errorf("%w: seq %d: stored data (%d bytes) differs from batch (%d bytes)",
			ErrStreamDiverged, m.Seq, len(raw.Data), len(m.Data))
	}
	return nil
}

// position returns the remembered stream handle and last sequence when a
// batch starting at first continues exactly where the last clean Publish
// ended.
func (p *Publisher) position(first uint64) (jetstream.Stream, uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cached == nil || first != p.tail+1 {
		return nil, 0, false
	}
	return p.cached, p.tail, true
}

// remember records where a Publish left the stream; any error forgets it,
// so the next call reads the stream again.
func (p *Publisher) remember(st jetstream.Stream, last uint64, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || st == nil {
		p.cached, p.tail = nil, 0
		return
	}
	p.cached, p.tail = st, last
}

// stream reads the receipt stream's info. An answer that did not come from
// the stream leader (or, with quorum, from a leader with a quorum of
// current replicas) fails with ErrStreamNotLed.
func (p *Publisher) stream(ctx context.Context, quorum bool) (jetstream.Stream, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	st, err := p.js.Stream(rctx, events.StreamName)
	if err != nil {
		return nil, 0, fmt.Errorf("natsbus: read stream %s: %w", events.StreamName, err)
	}
	info := st.CachedInfo()
	if err := checkLed(info.Cluster, quorum); err != nil {
		return nil, 0, fmt.Errorf("%w: stream %s says last seq %d, but %v", ErrStreamNotLed, events.StreamName, info.State.LastSeq, err)
	}
	return st, info.State.LastSeq, nil
}

// checkLed tells whether a stream-info answer with cluster info ci came
// from the stream's leader: the server fills ci.Leader with the leader it
// knows of (none during an election) and lists every replica but itself in
// ci.Replicas, so an answer from a follower lists the leader there. With
// quorum it also wants a majority of the replicas, the leader included,
// current and online as the leader sees them. A server without clustering
// names itself leader and lists no replicas; a nil ci (no cluster info at
// all) is taken as such a server.
func checkLed(ci *jetstream.ClusterInfo, quorum bool) error {
	if ci == nil {
		return nil
	}
	if ci.Leader == "" {
		return errors.New("the stream has no leader (a replica answered from its own copy)")
	}
	current := 1
	for _, r := range ci.Replicas {
		if r == nil {
			continue
		}
		if r.Name == ci.Leader {
			return fmt.Errorf("a follower answered, not the leader %s", ci.Leader)
		}
		if r.Current && !r.Offline {
			current++
		}
	}
	if need := (len(ci.Replicas)+1)/2 + 1; quorum && current < need {
		return fmt.Errorf("leader %s has %d of %d replicas current, below a quorum of %d", ci.Leader, current, len(ci.Replicas)+1, need)
	}
	return nil
}

// checkBatch validates sequences and subjects before anything is sent.
func checkBatch(msgs []Message) error {
	for i, m := range msgs {
		switch {
		case m.Seq == 0:
			return fmt.Errorf("%w: msgs[%d]: seq 0 (sequences start at 1)", ErrInvalidMessage, i)
		case i > 0 && m.Seq != msgs[i-1].Seq+1:
			return fmt.Errorf("%w: msgs[%d]: seq %d does not follow seq %d", ErrInvalidMessage, i, m.Seq, msgs[i-1].Seq)
		case !strings.HasPrefix(m.Subject, events.SubjectPrefix):
			return fmt.Errorf("%w: msgs[%d] (seq %d): subject %q is not under %s", ErrInvalidMessage, i, m.Seq, m.Subject, events.SubjectPrefix)
		}
		if err := checkSubject(m.Subject, false); err != nil {
			return fmt.Errorf("%w: msgs[%d] (seq %d): %v", ErrInvalidMessage, i, m.Seq, err)
		}
	}
	return nil
}

// wrongLastSeq reports the stream refusing a message because its last
// sequence was not the expected one.
func wrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// duplicateInBatch reports the stream refusing a whole atomic batch because
// it already holds one of its message ids: another publisher, or an earlier
// try whose ack was lost, got there first.
func duplicateInBatch(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDuplicateMsg
}

// permanentBatchRefusal reports a refusal of an atomic batch that sending
// it again will not change.
func permanentBatchRefusal(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeAtomicDisabled, errCodeAtomicUnsupported, errCodeAtomicTooLarge:
		return true
	}
	return false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
