package clustertests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/cluster"
	"github.com/writ-dev/writ/natsbus"
)

const (
	worker = "w1"
	tool   = "Bash"
	lane   = "coordinator"
)

// argsFor is the tool call of grant i; every grant binds a different one.
func argsFor(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i))
}

func isAttempt(env grants.Envelope) bool {
	return env.Decision == grants.Permit && env.Kind == events.KindAttempt && env.Seq > 0
}

func isPermit(env grants.Envelope) bool {
	return env.Decision == grants.Permit && env.Kind == events.KindPermit && env.GrantID != "" && env.Seq > 0
}

func isRefusal(env grants.Envelope, r grants.Reason) bool {
	return env.Decision == grants.Deny && env.Reason == r
}

// mint asks for one grant with the given idempotency key and fails the test
// unless it is permitted.
func mint(t testing.TB, ctx context.Context, c *api.Client, i int, key string) grants.Envelope {
	t.Helper()
	env, err := c.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: argsFor(i), IdempotencyKey: key})
	if err != nil {
		t.Fatalf("grant %d: %v", i, err)
	}
	if !isPermit(env) {
		t.Fatalf("grant %d: want permit, got %+v", i, env)
	}
	return env
}

// auditReceipts runs the auditor over the whole stream and, when digest is
// given, compares its projection with the issuer's state digest at the
// stream's last seq.
func auditReceipts(t testing.TB, rs []cluster.Receipt, digest string) {
	t.Helper()
	v := audit.NewVerifier(audit.Options{})
	for _, r := range rs {
		if err := v.Add(r.Data, r.StreamSeq); err != nil {
			t.Fatalf("invariant auditor finds no violation: %v", err)
		}
	}
	if digest == "" {
		return
	}
	want, err := events.ParseHash(digest)
	if err != nil {
		t.Fatalf("state digest %q: %v", digest, err)
	}
	if err := v.CheckDigest(want); err != nil {
		t.Fatalf("invariant replay of the stream gives the issuer's state digest: %v", err)
	}
}

// checkedStream reads the stream through c, checks it is whole (see
// cluster.CheckReceipts) and runs the auditor over it, comparing its
// projection with st's digest when st's seq is the stream's last.
func checkedStream(t testing.TB, c *cluster.Cluster, st api.Status) []events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cluster.ConvergeTimeout)
	defer cancel()
	si, rs, err := c.Receipts(ctx)
	if err != nil {
		t.Fatalf("reading the receipt stream: %v", err)
	}
	evs := cluster.CheckReceipts(t, si, rs)
	digest := ""
	if st.Seq == si.LastSeq {
		digest = st.StateDigest
	} else {
		t.Logf("status seq %d != stream last seq %d: digest not compared", st.Seq, si.LastSeq)
	}
	auditReceipts(t, rs, digest)
	return evs
}

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
		s, err := js.Stream(ctx, natsbus.StreamName)
		if err == nil && s.CachedInfo().State.LastSeq >= seq {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				t.Fatalf("receipt %d: %v", seq, err)
			}
			e, err := events.Decode(m.Data)
			if err != nil {
				t.Fatalf("receipt %d: %v", seq, err)
			}
			return e
		}
		select {
		case <-ctx.Done():
			t.Fatalf("receipt %d never reached the stream", seq)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
