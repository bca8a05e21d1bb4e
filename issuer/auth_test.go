package issuer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsbus"
)

// TestIdentityComesFromTheTransport: a worker can neither ask or spend in
// another worker's name (its NATS user may not publish there), nor spend
// another's grant through its own subject, nor reach operator subjects.
func TestIdentityComesFromTheTransport(t *testing.T) {
	users := []natsbus.User{
		natsbus.WorkerUser("w1", "pw1"),
		natsbus.WorkerUser("w2", "pw2"),
	}
	env := testenv.StartSingleAuth(t, t.TempDir(), users, nil)
	conn := func(name, pw string) (*nats.Conn, chan error) {
		errs := make(chan error, 16)
		opts := append(natsbus.ClientOptions(name, pw), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
		nc, err := nats.Connect(env.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, errs
	}
	w1, _ := conn("w1", "pw1")
	w2, w2errs := conn("w2", "pw2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	args := json.RawMessage(`{"file_path":"/srv/shop/orders.csv"}`)
	permit, err := client.New(w1, "w1").Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Read", Args: args})
	if err != nil || permit.Decision != grants.Permit {
		t.Fatalf("w1 grant: %+v %v", permit, err)
	}

	// w2 through its own subject: the issuer sees w2 and refuses.
	spend, err := client.New(w2, "w2").Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if spend.Reason != grants.ReasonNotGrantee {
		t.Fatalf("w2 spending w1's grant: want not_grantee, got %+v", spend)
	}

	// w2 publishing under w1's prefix or an operator subject: the NATS
	// server refuses the publish, so no issuer ever sees it.
	for _, subj := range []string{api.WorkerSubject("w1", api.OpSpend), api.SubjectRevoke, api.SubjectApprove} {
		_, err := w2.Request(subj, []byte(`{"v":1}`), 500*time.Millisecond)
		if err == nil {
			t.Fatalf("w2 publishing on %s got an answer", subj)
		}
		select {
		case perr := <-w2errs:
			if !errors.Is(perr, nats.ErrPermissionViolation) {
				t.Fatalf("want a permissions violation for %s, got %v", subj, perr)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no permissions violation reported for %s", subj)
		}
	}
	// The grant is still unspent: w1 can spend it.
	own, err := client.New(w1, "w1").Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args})
	if err != nil || own.Decision != grants.Permit {
		t.Fatalf("w1 spend after the attempts: %+v %v", own, err)
	}

	// An unauthenticated client is refused at connect.
	if nc, err := nats.Connect(env.URL); err == nil {
		nc.Close()
		t.Fatal("unauthenticated connection was accepted")
	}
}
