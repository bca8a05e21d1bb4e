package clustertests

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

const (
	worker = "w1"
	tool   = cluster.Tool
	lane   = cluster.Lane
)

// attemptsByGrant counts attempt receipts per grant.
func attemptsByGrant(evs []events.Event) map[string][]events.Event {
	out := map[string][]events.Event{}
	for _, e := range evs {
		if e.Kind == events.KindAttempt {
			out[e.GrantID] = append(out[e.GrantID], e)
		}
	}
	return out
}

// receiptAt waits until the stream holds seq and returns that event.
func receiptAt(t testing.TB, nc *nats.Conn, seq uint64) events.Event {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		s, err := js.Stream(ctx, events.StreamName)
		if err == nil && s.CachedInfo().State.LastSeq >= seq {
			// A read can meet a stream leader change (503): poll again.
			var m *jetstream.RawStreamMsg
			if m, err = s.GetMsg(ctx, seq); err == nil {
				e, err := events.Decode(m.Data)
				if err != nil {
					t.Fatalf("receipt %d: %v", seq, err)
				}
				return e
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipt %d never read from the stream: %v", seq, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
