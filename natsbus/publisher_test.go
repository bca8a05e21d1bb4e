package natsbus

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
)

// singleServer starts a server, connects and ensures the stream.
func singleServer(t *testing.T) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	s := startServer(t, testConfig(t, "single"))
	_, js := connect(t, ClientURL(s))
	st, err := EnsureStream(testCtx(t, 10*time.Second), js, 1)
	if err != nil {
		t.Fatalf("EnsureStream: %v", err)
	}
	return js, st
}

// newPublisherFunc makes the Publisher a test uses.
type newPublisherFunc = func(jetstream.JetStream, ...PublisherOption) *Publisher

// forEachPublishMode runs a publisher test twice: with windows sent as
// atomic batches, as the receipt stream allows, and message by message, as
// against a server without atomic batches.
func forEachPublishMode(t *testing.T, test func(*testing.T, newPublisherFunc)) {
	t.Run("batched", func(t *testing.T) { test(t, NewPublisher) })
	t.Run("per-message", func(t *testing.T) {
		test(t, func(js jetstream.JetStream, opts ...PublisherOption) *Publisher {
			p := NewPublisher(js, opts...)
			p.perMessage.Store(true)
			return p
		})
	})
}

func TestEnsureStreamIdempotent(t *testing.T) {
	js, first := singleServer(t)
	ctx := testCtx(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := EnsureStream(ctx, js, 1)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureStream: %v", err)
		}
	}
	st, err := EnsureStream(ctx, js, 1)
	if err != nil {
		t.Fatalf("second EnsureStream: %v", err)
	}
	c := st.CachedInfo().Config
	if !c.DenyDelete || !c.DenyPurge || c.AllowRollup || c.Discard != jetstream.DiscardNew ||
		c.Storage != jetstream.FileStorage || c.MaxAge != 0 || c.Duplicates != DuplicateWindow {
		t.Fatalf("stream config not append-only: %+v", c)
	}
	if !st.CachedInfo().Created.Equal(first.CachedInfo().Created) {
		t.Fatal("EnsureStream re-created the stream")
	}
	if _, err := EnsureStream(ctx, js, 0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("EnsureStream(replicas=0) = %v, want ErrInvalidConfig", err)
	}
	if _, err := EnsureStream(ctx, nil, 1); !errors.Is(err, ErrNilJetStream) {
		t.Fatalf("EnsureStream(nil) = %v, want ErrNilJetStream", err)
	}
}

func TestPublisherOrderedIdempotent(t *testing.T) {
	forEachPublishMode(t, testPublisherOrderedIdempotent)
}

func testPublisherOrderedIdempotent(t *testing.T, newPublisher newPublisherFunc) {
	js, _ := singleServer(t)
	ctx := testCtx(t, 30*time.Second)
	p := newPublisher(js, WithWindow(16))

	if last, err := p.LastSeq(ctx); err != nil || last != 0 {
		t.Fatalf("LastSeq on empty stream = %d, %v", last, err)
	}
	got, err := p.Publish(ctx, eventMsgs(1, 100))
	if err != nil || got != 100 {
		t.Fatalf("Publish 1..100 = %d, %v", got, err)
	}
	if last, err := p.LastSeq(ctx); err != nil || last != 100 {
		t.Fatalf("LastSeq = %d, %v; want 100", last, err)
	}

	got, err = p.Publish(ctx, eventMsgs(50, 120))
	if err != nil || got != 120 {
		t.Fatalf("Publish 50..120 = %d, %v", got, err)
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 120 || last != 120 {
		t.Fatalf("stream holds %d messages up to %d, want 120 up to 120", msgs, last)
	}
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 50, 100, 101, 120} {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("GetMsg(%d): %v", seq, err)
		}
		want := event(seq)
		if string(raw.Data) != string(want.Data) || raw.Header.Get(jetstream.MsgIDHeader) != strings.TrimPrefix(string(want.Data), "event-") {
			t.Fatalf("seq %d holds %q (id %q)", seq, raw.Data, raw.Header.Get(jetstream.MsgIDHeader))
		}
	}

	// Fully published batch: nothing to do.
	if got, err = p.Publish(ctx, eventMsgs(1, 10)); err != nil || got != 120 {
		t.Fatalf("Publish 1..10 again = %d, %v", got, err)
	}
	// Empty batch reports the stream's end.
	if got, err = p.Publish(ctx, nil); err != nil || got != 120 {
		t.Fatalf("Publish(nil) = %d, %v", got, err)
	}

	got, err = p.Publish(ctx, eventMsgs(130, 140))
	if !errors.Is(err, ErrStreamGap) || got != 120 {
		t.Fatalf("Publish 130..140 = %d, %v; want 120, ErrStreamGap", got, err)
	}

	bad := eventMsgs(59, 61)
	bad[1].Data = []byte("forged")
	got, err = p.Publish(ctx, bad)
	if !errors.Is(err, ErrStreamDiverged) || !strings.Contains(err.Error(), "seq 60") || got != 120 {
		t.Fatalf("Publish with different data at 60 = %d, %v; want ErrStreamDiverged naming seq 60", got, err)
	}
	bad = eventMsgs(121, 121)
	bad[0].Subject = "writ.evt.revoke"
	if _, err := p.Publish(ctx, eventMsgs(120, 121)); err != nil {
		t.Fatalf("Publish 120..121: %v", err)
	}
	if _, err := p.Publish(ctx, bad); !errors.Is(err, ErrStreamDiverged) {
		t.Fatalf("Publish with different subject at 121 = %v; want ErrStreamDiverged", err)
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 121 || last != 121 {
		t.Fatalf("stream holds %d messages up to %d, want 121", msgs, last)
	}
}

func TestPublisherRejectsBadBatch(t *testing.T) {
	js, _ := singleServer(t)
	ctx := testCtx(t, 10*time.Second)
	p := NewPublisher(js)
	batches := map[string][]Message{
		"seq zero":        {{Seq: 0, Subject: "writ.evt.permit"}},
		"not consecutive": {event(1), event(3)},
		"descending":      {event(2), event(1)},
		"other subject":   {{Seq: 1, Subject: "writ.api.w1.grant"}},
		"wildcard":        {{Seq: 1, Subject: "writ.evt.*"}},
		"empty token":     {{Seq: 1, Subject: "writ.evt."}},
	}
	for name, b := range batches {
		if _, err := p.Publish(ctx, b); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: Publish = %v, want ErrInvalidMessage", name, err)
		}
	}
	if _, last := streamMsgs(t, ctx, js); last != 0 {
		t.Fatalf("bad batches reached the stream: last seq %d", last)
	}
	var nilP *Publisher
	if _, err := nilP.Publish(ctx, eventMsgs(1, 1)); !errors.Is(err, ErrNilJetStream) {
		t.Fatalf("nil Publisher: %v", err)
	}
	if _, err := NewPublisher(nil).LastSeq(ctx); !errors.Is(err, ErrNilJetStream) {
		t.Fatalf("Publisher(nil js): %v", err)
	}
}

// Two publishers racing over the same events (two issuer nodes around a
// leader change) leave exactly one copy of each, in order.
func TestPublisherConcurrentPublishers(t *testing.T) {
	forEachPublishMode(t, testPublisherConcurrentPublishers)
}

func testPublisherConcurrentPublishers(t *testing.T, newPublisher newPublisherFunc) {
	s := startServer(t, testConfig(t, "race"))
	ctx := testCtx(t, 30*time.Second)
	_, js1 := connect(t, ClientURL(s))
	_, js2 := connect(t, ClientURL(s))
	if _, err := EnsureStream(ctx, js1, 1); err != nil {
		t.Fatal(err)
	}
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, js := range []jetstream.JetStream{js1, js2} {
		wg.Go(func() {
			p := newPublisher(js, WithWindow(8))
			// Publish in overlapping chunks so the two interleave.
			for from := uint64(1); from <= n; from += 25 {
				if _, err := p.Publish(ctx, eventMsgs(from, min(from+40, n))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if msgs, last := streamMsgs(t, ctx, js1); msgs != n || last != n {
		t.Fatalf("stream holds %d messages up to %d, want %d", msgs, last, n)
	}
}

func TestStreamIsAppendOnly(t *testing.T) {
	js, st := singleServer(t)
	ctx := testCtx(t, 10*time.Second)
	if _, err := NewPublisher(js).Publish(ctx, eventMsgs(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, 5); err == nil {
		t.Error("DeleteMsg succeeded")
	}
	if err := st.SecureDeleteMsg(ctx, 6); err == nil {
		t.Error("SecureDeleteMsg succeeded")
	}
	if err := st.Purge(ctx); err == nil {
		t.Error("Purge succeeded")
	}
	if err := st.Purge(ctx, jetstream.WithPurgeKeep(1)); err == nil {
		t.Error("Purge(keep 1) succeeded")
	}
	rollup := &nats.Msg{Subject: "writ.evt.permit", Header: nats.Header{}, Data: []byte("x")}
	rollup.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	if _, err := js.PublishMsg(ctx, rollup); err == nil {
		t.Error("roll-up publish succeeded")
	}
	if _, err := js.Publish(ctx, "writ.evt.permit", []byte("x"), jetstream.WithMsgTTL(time.Second)); err == nil {
		t.Error("publish with a message TTL succeeded")
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 10 || last != 10 {
		t.Fatalf("stream holds %d messages up to %d, want 10", msgs, last)
	}
}

func TestPublisherHonoursContext(t *testing.T) {
	js, _ := singleServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewPublisher(js).Publish(ctx, eventMsgs(1, 5)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish with cancelled ctx = %v", err)
	}
}

// An existing stream that is not append-only is updated to be; one that
// cannot be (another storage type) is an error, not an endless retry.
func TestEnsureStreamRepairsExisting(t *testing.T) {
	s := startServer(t, testConfig(t, "repair"))
	_, js := connect(t, ClientURL(s))
	ctx := testCtx(t, 10*time.Second)
	loose := StreamConfig(1)
	loose.DenyDelete, loose.DenyPurge, loose.AllowRollup = false, false, true
	loose.MaxAge, loose.Discard, loose.MaxMsgsPerSubject = time.Hour, jetstream.DiscardOld, 10
	if _, err := js.CreateStream(ctx, loose); err != nil {
		t.Fatal(err)
	}
	st, err := EnsureStream(ctx, js, 1)
	if err != nil {
		t.Fatalf("EnsureStream over a loose stream: %v", err)
	}
	if err := checkStreamConfig(st.CachedInfo().Config, 1); err != nil {
		t.Fatal(err)
	}

	if err := js.DeleteStream(ctx, events.StreamName); err != nil {
		t.Fatal(err)
	}
	mem := StreamConfig(1)
	mem.Storage = jetstream.MemoryStorage
	if _, err := js.CreateStream(ctx, mem); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := EnsureStream(ctx, js, 1); err == nil {
		t.Fatal("EnsureStream over a memory stream succeeded")
	} else if time.Since(start) > 2*time.Second {
		t.Fatalf("EnsureStream retried a permanent error for %v: %v", time.Since(start), err)
	}
}

// TestPublisherRemembersPosition checks that consecutive batches skip the
// stream info round trip, and that the remembered position never lets a
// publisher skip past what another publisher wrote meanwhile.
func TestPublisherRemembersPosition(t *testing.T) {
	forEachPublishMode(t, testPublisherRemembersPosition)
}

func testPublisherRemembersPosition(t *testing.T, newPublisher newPublisherFunc) {
	s := startServer(t, testConfig(t, "position"))
	ctx := testCtx(t, 30*time.Second)
	nc, js1 := connect(t, ClientURL(s))
	_, js2 := connect(t, ClientURL(s))
	if _, err := EnsureStream(ctx, js1, 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	sub, err := nc.Subscribe("$JS.API.STREAM.INFO."+events.StreamName, func(*nats.Msg) { mu.Lock(); n++; mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	infoReads := func() int {
		_ = nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return n
	}

	p1, p2 := newPublisher(js1, WithWindow(4)), newPublisher(js2, WithWindow(4))
	for from := uint64(1); from <= 30; from += 10 {
		if got, err := p1.Publish(ctx, eventMsgs(from, from+9)); err != nil || got != from+9 {
			t.Fatalf("Publish %d..%d = %d, %v", from, from+9, got, err)
		}
	}
	if got := infoReads(); got != 1 {
		t.Fatalf("three consecutive batches read the stream info %d times, want once", got)
	}

	// Another publisher appends 31..35; p1 still believes the stream ends
	// at 30 and must find out, verify 31..35 and go on.
	if _, err := p2.Publish(ctx, eventMsgs(31, 35)); err != nil {
		t.Fatal(err)
	}
	if got, err := p1.Publish(ctx, eventMsgs(31, 40)); err != nil || got != 40 {
		t.Fatalf("Publish 31..40 after another publisher wrote 31..35 = %d, %v", got, err)
	}
	// A different message at 41 written by someone else is found, not
	// skipped over, even though p1 remembers the stream ending at 40.
	forged := eventMsgs(41, 41)
	forged[0].Data = []byte("forged")
	if _, err := p2.Publish(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if _, err := p1.Publish(ctx, eventMsgs(41, 45)); !errors.Is(err, ErrStreamDiverged) {
		t.Fatalf("Publish 41..45 over a forged 41 = %v; want ErrStreamDiverged", err)
	}
	if msgs, last := streamMsgs(t, ctx, js1); msgs != 41 || last != 41 {
		t.Fatalf("stream holds %d messages up to %d, want 41", msgs, last)
	}
}

// batchOf returns the atomic batch id and place a stored message carries
// ("" and 0 for a message published on its own).
func batchOf(t *testing.T, ctx context.Context, st jetstream.Stream, seq uint64) (string, int) {
	t.Helper()
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		t.Fatalf("GetMsg(%d): %v", seq, err)
	}
	want := event(seq)
	if raw.Subject != want.Subject || string(raw.Data) != string(want.Data) || raw.Header.Get(jetstream.MsgIDHeader) != strconv.FormatUint(seq, 10) {
		t.Fatalf("seq %d holds %s %q (id %q), want %s %q (id %d)", seq, raw.Subject, raw.Data,
			raw.Header.Get(jetstream.MsgIDHeader), want.Subject, want.Data, seq)
	}
	place, _ := strconv.Atoi(raw.Header.Get(hdrBatchSeq))
	return raw.Header.Get(hdrBatchID), place
}

// TestPublisherBatchesKeepEachReceipt checks that a window goes to the
// stream as one atomic batch in which every receipt is still its own
// message, at its own sequence, with its own subject and message id.
func TestPublisherBatchesKeepEachReceipt(t *testing.T) {
	js, st := singleServer(t)
	ctx := testCtx(t, 30*time.Second)
	if !st.CachedInfo().Config.AllowAtomicPublish {
		t.Fatal("the receipt stream does not allow atomic batches")
	}
	if got, err := NewPublisher(js, WithWindow(64)).Publish(ctx, eventMsgs(1, 150)); err != nil || got != 150 {
		t.Fatalf("Publish 1..150 = %d, %v", got, err)
	}
	ids := map[string]bool{}
	for seq := uint64(1); seq <= 150; seq++ {
		id, place := batchOf(t, ctx, st, seq)
		if want := int(seq-1)%64 + 1; id == "" || place != want {
			t.Fatalf("seq %d is in batch %q at place %d, want a batch at place %d", seq, id, place, want)
		}
		ids[id] = true
	}
	if len(ids) != 3 {
		t.Fatalf("150 messages in windows of 64 went as %d batches, want 3", len(ids))
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 150 || last != 150 {
		t.Fatalf("stream holds %d messages up to %d, want 150", msgs, last)
	}
}

// batchesTurnedOff publishes 1..10 through a new Publisher, which then
// remembers the stream allowing atomic batches, turns them off on the
// stream, and returns that Publisher.
func batchesTurnedOff(t *testing.T, ctx context.Context, js jetstream.JetStream, st jetstream.Stream) *Publisher {
	t.Helper()
	p := NewPublisher(js, WithWindow(16))
	if got, err := p.Publish(ctx, eventMsgs(1, 10)); err != nil || got != 10 {
		t.Fatalf("Publish 1..10 = %d, %v", got, err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowAtomicPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("turning atomic batches off: %v", err)
	}
	return p
}

// TestPublisherFallsBackWhenBatchesRefused checks that a stream refusing
// atomic batches (its setting changed after the publisher read it) loses
// nothing: the window is published message by message, and so is every
// later one.
func TestPublisherFallsBackWhenBatchesRefused(t *testing.T) {
	js, st := singleServer(t)
	ctx := testCtx(t, 30*time.Second)
	p := batchesTurnedOff(t, ctx, js, st)
	// p remembers the stream as it was, so it sends a batch first.
	if got, err := p.Publish(ctx, eventMsgs(11, 40)); err != nil || got != 40 {
		t.Fatalf("Publish 11..40 to a stream without atomic batches = %d, %v", got, err)
	}
	if !p.perMessage.Load() {
		t.Fatal("the publisher still sends batches to a stream that refuses them")
	}
	for seq := uint64(1); seq <= 40; seq++ {
		id, _ := batchOf(t, ctx, st, seq)
		if batched := id != ""; batched != (seq <= 10) {
			t.Fatalf("seq %d: batched %v, want %v", seq, batched, seq <= 10)
		}
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 40 || last != 40 {
		t.Fatalf("stream holds %d messages up to %d, want 40", msgs, last)
	}
}

// TestPublisherFallbackStopsAtADivergedMessage checks that falling back
// from batches keeps the guard of a remembered position: when another
// publisher wrote a different message at the next sequence, nothing is
// appended after it.
func TestPublisherFallbackStopsAtADivergedMessage(t *testing.T) {
	js, st := singleServer(t)
	ctx := testCtx(t, 30*time.Second)
	p := batchesTurnedOff(t, ctx, js, st)
	forged := eventMsgs(11, 11)
	forged[0].Data = []byte("forged")
	if _, err := NewPublisher(js).Publish(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx, eventMsgs(11, 20)); !errors.Is(err, ErrStreamDiverged) {
		t.Fatalf("Publish 11..20 over a forged 11 = %v; want ErrStreamDiverged", err)
	}
	if msgs, last := streamMsgs(t, ctx, js); msgs != 11 || last != 11 {
		t.Fatalf("stream holds %d messages up to %d, want 11: something was appended after the diverged message", msgs, last)
	}
}
