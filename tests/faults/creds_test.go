package faults

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
)

// TestOperatorModeClusterRevocation runs three issuer processes in NATS
// operator mode (--nats-operator-dir) and checks, on real processes:
//   - a minted worker credential is served on another node than the one
//     it connected to; publishing under another worker's subject is a
//     permissions violation;
//   - `issuer auth revoke` (a real process, through node 0) is
//     acknowledged by all three servers, drops the worker's connection to
//     node 2, and every node refuses the credential at connect;
//   - a node that was down during a revocation refuses the revoked
//     credential within the resolver sync interval after it is back, even
//     though its own copy of the auth directory never saw the revocation.
func TestOperatorModeClusterRevocation(t *testing.T) {
	needFull(t)
	tmp := t.TempDir()
	opDir := filepath.Join(tmp, "operator") // the operator's copy: auth revoke updates it
	if _, err := natsauth.Init(opDir, natsauth.DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(tmp, "nodes") // the nodes' copy, without identity seeds
	if err := os.Mkdir(nodeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range natsauth.Files {
		if strings.HasSuffix(f, ".nk") && !strings.Contains(f, "signing") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(opDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(nodeDir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	a, err := natsauth.Load(opDir)
	if err != nil {
		t.Fatal(err)
	}
	harness, err := a.Mint(natsauth.Identity{Role: natsauth.RoleIssuer, Name: "harness"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartWith(t, 3, cluster.Options{
		Secure:      true,
		ExtraArgs:   []string{"--nats-operator-dir", nodeDir, "--insecure-no-tls"},
		ConnOptions: []nats.Option{nats.UserJWTAndSeed(harness.JWT, string(harness.Seed)), nats.CustomInboxPrefix(natsbus.InboxPrefix("harness"))},
	})
	for i := range c.Nodes {
		if st := c.Status(i); !st.Auth {
			t.Errorf("%s status: auth %v", st.Node, st.Auth)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	type conn struct {
		*nats.Conn
		errs   chan error
		closed chan struct{}
	}
	dial := func(i int, cred natsauth.Credential) (*conn, error) {
		cn := &conn{errs: make(chan error, 8), closed: make(chan struct{})}
		nc, err := nats.Connect(c.Nodes[i].URL(), nats.UserJWTAndSeed(cred.JWT, string(cred.Seed)),
			nats.CustomInboxPrefix(natsbus.InboxPrefix(cred.Name)), nats.NoReconnect(), nats.Timeout(3*time.Second),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				select {
				case cn.errs <- err:
				default:
				}
			}),
			nats.ClosedHandler(func(*nats.Conn) { close(cn.closed) }))
		if err != nil {
			return nil, err
		}
		cn.Conn = nc
		t.Cleanup(nc.Close)
		return cn, nil
	}
	refusedEverywhere := func(cred natsauth.Credential, nodes ...int) {
		t.Helper()
		for _, i := range nodes {
			cn, err := dial(i, cred)
			if err == nil {
				cn.Close()
				t.Fatalf("%s connected to %s after its revocation", cred.Identity, c.Nodes[i].ID)
			}
			if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				t.Fatalf("%s on %s: %v; want an authorization violation", cred.Identity, c.Nodes[i].ID, err)
			}
		}
	}
	revoke := func(worker string) natsauth.Revocation {
		t.Helper()
		out, code := issuerCLI(t, nil, "auth", "revoke", "--dir", opDir, "--worker", worker, "--nats-url", c.Nodes[0].URL(), "--json")
		if code != 0 {
			t.Fatalf("auth revoke --worker %s: exit %d\n%s", worker, code, out)
		}
		var rev natsauth.Revocation
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &rev); err != nil {
			t.Fatalf("auth revoke printed %q: %v", out, err)
		}
		return rev
	}

	w1cred, err := a.MintWorker("w1", 0, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	w1, err := dial(2, w1cred)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Mint(t, ctx, client.New(w1.Conn, "w1"), 1, "op-mode-1")
	if err := w1.Publish("writ.api.w2.grant", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w1.errs:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			t.Fatalf("w1 publishing as w2: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("w1 publishing as w2: no permissions violation")
	}

	// Revocation through node 0 reaches node 2's open connection.
	rev := revoke("w1")
	if len(rev.Servers) != 3 {
		t.Fatalf("acknowledged by %v", rev.Servers)
	}
	select {
	case <-w1.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("w1's connection to node 2 is still open after its revocation")
	}
	refusedEverywhere(w1cred, 0, 1, 2)

	// A node down during a revocation catches up from its peers.
	w2cred, err := a.MintWorker("w2", 0, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	if rev := revoke("w2"); len(rev.Servers) != 2 {
		t.Fatalf("with node 1 down: acknowledged by %v", rev.Servers)
	}
	c.Restart(1)
	deadline := time.Now().Add(natsbus.DefaultResolverSync + 10*time.Second)
	for {
		cn, err := dial(1, w2cred)
		if err != nil {
			break
		}
		cn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("node 1 still accepts w2's revoked credential %s after its restart", natsbus.DefaultResolverSync+10*time.Second)
		}
		time.Sleep(200 * time.Millisecond) // poll interval under the deadline above
	}
	refusedEverywhere(w2cred, 0, 1, 2)
}
