package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/events"
)

// pullBatch is how many messages one pull request asks for.
var pullBatch = 2048

// errStalled cancels a read that made no progress for --timeout.
var errStalled = errors.New("stalled")

// receipts is an open receipt stream.
type receipts struct {
	nc    *nats.Conn
	js    jetstream.JetStream
	st    jetstream.Stream
	url   string
	last  uint64 // the stream's last sequence when it was opened
	stall time.Duration
}

// openReceipts connects and looks the stream up. Errors are exit code 3
// and say what to check next.
func openReceipts(ctx context.Context, o connect.Options) (*receipts, error) {
	nc, err := o.DialContext(ctx)
	if errors.Is(err, connect.ErrBadURL) {
		return nil, &exitError{code: ExitUsage, err: err}
	}
	if err != nil {
		return nil, unavailableErr(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, unavailableErr(fmt.Errorf("jetstream: %v", err))
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := nc.ConnectedUrlRedacted()
	st, err := js.Stream(ictx, events.StreamName)
	if err != nil {
		nc.Close()
		return nil, unavailableErr(streamError(err, url))
	}
	return &receipts{nc: nc, js: js, st: st, url: url, last: st.CachedInfo().State.LastSeq, stall: timeout}, nil
}

func streamError(err error, url string) error {
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return fmt.Errorf("no receipt stream %s at %s: has an issuer with JetStream started there? (issuer serve --dev creates it)", events.StreamName, url)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("JetStream is not enabled at %s: point --nats-url (%s) at the issuer's NATS server", url, connect.EnvURL)
	case errors.Is(err, nats.ErrPermissionViolation), errors.Is(err, nats.ErrAuthorization):
		return fmt.Errorf("%v at %s: the auditor's NATS user needs the auditor permissions (subscribe writ.evt.>, JetStream info and ordered consumer on %s)", err, url, events.StreamName)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no JetStream answer from %s about stream %s within --timeout: is JetStream enabled there and is the auditor allowed to read %s?", url, events.StreamName, events.StreamName)
	}
	return fmt.Errorf("looking up stream %s at %s: %v", events.StreamName, url, err)
}

func (r *receipts) Close() { r.nc.Close() }

// message is one receipt as read from the stream.
type message struct {
	data    []byte
	seq     uint64 // stream sequence
	pending uint64 // messages after this one in the stream, at delivery
}

// errStop ends a read early without an error.
var errStop = errors.New("stop")

// read delivers the stream's messages from sequence from, in order,
// through an ordered consumer. With until > 0 it returns after the message
// at until (or earlier, if the stream holds nothing more up to until); with
// until == 0 it follows new messages until ctx ends and then returns nil.
// fn returning errStop ends the read with nil. If no message arrives for
// r.stall while messages are still due, read fails (the server went away).
func (r *receipts) read(ctx context.Context, from, until uint64, fn func(message) error) error {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cons, err := r.st.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy:    jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:      from,
		MaxResetAttempts: 5,
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return unavailableErr(fmt.Errorf("creating an ordered consumer on %s at %s: %v", events.StreamName, r.url, err))
	}
	defer r.deleteConsumer(cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch))
	if err != nil {
		return unavailableErr(fmt.Errorf("reading %s at %s: %v", events.StreamName, r.url, err))
	}
	defer it.Stop()

	// The watchdog cancels the read when it has waited r.stall for a
	// message that is due: always before until, and when following only
	// while the consumer is behind the stream. Time spent in fn (a slow
	// stdout) does not count.
	var seen atomic.Uint64        // last stream sequence delivered
	var waitingSince atomic.Int64 // when Next was entered; 0 outside Next
	var behind atomic.Bool        // the consumer has messages to catch up on
	behind.Store(r.last >= from)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(r.stall/4, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				w := waitingSince.Load()
				if w != 0 && time.Since(time.Unix(0, w)) >= r.stall && (until > 0 || behind.Load()) {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)

	for {
		waitingSince.Store(time.Now().UnixNano())
		m, err := it.Next(jetstream.NextContext(rctx))
		waitingSince.Store(0)
		if err != nil {
			switch {
			case errors.Is(context.Cause(rctx), errStalled):
				return unavailableErr(fmt.Errorf("no receipt arrived from %s for %s after seq %d: is the server still reachable? (raise --timeout for a slow link)", r.url, r.stall, seen.Load()))
			case ctx.Err() != nil:
				return ctx.Err()
			}
			return unavailableErr(fmt.Errorf("reading %s at %s after seq %d: %v", events.StreamName, r.url, seen.Load(), err))
		}
		md, err := m.Metadata()
		if err != nil {
			return unavailableErr(fmt.Errorf("reading %s: %v", events.StreamName, err))
		}
		seq := md.Sequence.Stream
		seen.Store(seq)
		behind.Store(md.NumPending > 0)
		if err := fn(message{data: m.Data(), seq: seq, pending: md.NumPending}); err != nil {
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
		if until > 0 && (seq >= until || md.NumPending == 0) {
			return nil
		}
	}
}

// deleteConsumer removes the ordered consumer now rather than leaving it to
// the server's inactivity timeout. Best effort.
func (r *receipts) deleteConsumer(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = r.js.DeleteConsumer(ctx, events.StreamName, info.Name)
}
