package clustertests

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

const shortTTLPolicy = `{"version":2,"default_ttl":"1s","lanes":{"coordinator":{"ttl":"1s","surfaces":["*"],"consequences":["*"]}},"surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution","target":{"field":"command","canon":"shell"},"sinks":["command"]}]}`

// single starts an in-process one-node issuer and a connection to it.
func single(t *testing.T) (*testenv.Single, *nats.Conn) {
	t.Helper()
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return env, nc
}

// TestExpiryIsDecidedByTheControlPlaneClock checks that a grant expires on
// the issuer's replicated clock: with a 1s lane ttl, once the status clock
// (moved only by committed entries, here other workers' requests) is past
// the grant's expires_at, a spend is refused expired with recovery
// request_new_grant, and its receipt is stamped at or after expires_at.
// The test never reads its own wall clock to decide anything.
func TestExpiryIsDecidedByTheControlPlaneClock(t *testing.T) {
	_, nc := single(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := client.New(nc, "")
	pol, err := op.SetPolicy(ctx, json.RawMessage(shortTTLPolicy))
	if err != nil || pol.Decision != grants.Permit || pol.Kind != events.KindEpoch {
		t.Fatalf("applying the short-ttl policy: %+v (%v)", pol, err)
	}
	w := client.New(nc, worker)
	g := cluster.Mint(t, ctx, w, 1, "expiry-grant")
	if g.Epoch != pol.Epoch || g.ExpiresAt-g.IssuedAt != int64(time.Second) {
		t.Fatalf("grant under the new policy: epoch %d (policy %d), lifetime %dns", g.Epoch, pol.Epoch, g.ExpiresAt-g.IssuedAt)
	}

	// Move the control-plane clock with another worker's requests until the
	// issuer itself says its clock is past the grant's expiry.
	ticker := client.New(nc, "ticker")
	for i := 0; ; i++ {
		st, err := op.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Clock > g.ExpiresAt {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("control-plane clock stuck at %d, expiry %d", st.Clock, g.ExpiresAt)
		}
		cluster.Mint(t, ctx, ticker, 1000+i, fmt.Sprintf("tick-%d", i))
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}

	env, err := w.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: "expiry-spend"})
	if err != nil {
		t.Fatal(err)
	}
	if !cluster.IsRefusal(env, grants.ReasonExpired) || env.Recovery != grants.RecoverRequestNewGrant || env.Kind != events.KindSpendRefused {
		t.Fatalf("invariant expired on the control-plane clock: want deny expired/request_new_grant, got %+v", env)
	}
	if env.ExpiresAt != g.ExpiresAt {
		t.Errorf("refusal names expires_at %d, the grant's is %d", env.ExpiresAt, g.ExpiresAt)
	}
	rec := receiptAt(t, nc, env.Seq)
	if rec.Kind != events.KindSpendRefused || rec.Reason != string(grants.ReasonExpired) || rec.GrantID != g.GrantID {
		t.Fatalf("receipt %d: %+v", env.Seq, rec)
	}
	if rec.Time < g.ExpiresAt {
		t.Errorf("invariant expiry judged at control-plane time: refusal at %d is before expires_at %d", rec.Time, g.ExpiresAt)
	}
	if rec.RefSeq != g.Seq {
		t.Errorf("refusal refers to seq %d, the permit is seq %d", rec.RefSeq, g.Seq)
	}
	// A fresh grant (the recovery) works.
	g2 := cluster.Mint(t, ctx, w, 2, "expiry-grant-2")
	if a, err := w.Spend(ctx, api.SpendRequest{GrantID: g2.GrantID, Args: cluster.ArgsFor(2), IdempotencyKey: "expiry-spend-2"}); err != nil || !cluster.IsAttempt(a) {
		// Only meaningful while the control-plane clock is before the new
		// expiry; with a 1s ttl a slow machine may miss it.
		if err == nil && cluster.IsRefusal(a, grants.ReasonExpired) {
			t.Logf("new grant expired before it could be spent (slow machine): %+v", a)
		} else {
			t.Errorf("recovery: spending a new grant: %+v (%v)", a, err)
		}
	}
}
