package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// An operator's break-glass request, once the node writes receipt format
// 6, is one break_glass receipt naming the case, the worker, the operator,
// the reason and the expiry; a malformed one is refused before the log.
func TestBreakGlassRequest(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	testenv.WaitFor(t, testenv.SetupTimeout, "receipt format 6", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatBreakGlass
	})
	nc := dial(t, env.URL)
	op := client.New(nc, "operator")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, bad := range []api.BreakGlassRequest{
		{CaseID: "inc 1", Scope: "worker:w1", TTLMillis: 60_000, Reason: "r"},
		{CaseID: "inc-1", Scope: "lane:isolated", TTLMillis: 60_000, Reason: "r"},
		{CaseID: "inc-1", Scope: "worker:w1", TTLMillis: api.MaxBreakGlassTTLMillis + 1, Reason: "r"},
		{CaseID: "inc-1", Scope: "worker:w1", TTLMillis: 60_000},
		{CaseID: "inc-1", Scope: "worker:w1", TTLMillis: 60_000, Reason: "a\x00b"},
	} {
		e, err := op.BreakGlass(ctx, bad)
		if err != nil || e.Decision != grants.Deny || e.Reason != grants.ReasonInvalidRequest || e.Seq != 0 {
			t.Fatalf("%+v: %+v %v", bad, e, err)
		}
	}
	e, err := op.BreakGlass(ctx, api.BreakGlassRequest{CaseID: "inc-1", Scope: "worker:w1", TTLMillis: 30 * 60_000, Reason: "unknown payee"})
	if err != nil || e.Decision != grants.Permit || e.Seq == 0 {
		t.Fatalf("break-glass: %+v %v", e, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.Event
	testenv.WaitFor(t, 10*time.Second, "the receipt in the stream", func() bool {
		m, err := stream.GetMsg(ctx, e.Seq)
		if err != nil {
			return false
		}
		ev, err = events.Decode(m.Data)
		return err == nil
	})
	if ev.Kind != events.KindBreakGlass || ev.CaseID != "inc-1" || ev.Worker != "w1" || ev.Detail != "unknown payee" ||
		ev.ExpiresAt-ev.IssuedAt != int64(30*time.Minute) {
		t.Fatalf("receipt: %+v", ev)
	}
}
