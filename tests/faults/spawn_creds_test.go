package faults

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/worker"
)

// TestOperatorModeSpawnRevocationConverges runs three issuer processes in
// NATS operator mode and checks that the revocation of spawned children's
// own credentials, pushed by the leader when a worker revocation commits,
// reaches every server:
//   - a node that was down when its parent was revoked refuses the
//     child's credential within the resolver sync interval after it is
//     back;
//   - when the leader is killed right after a revocation commits, the
//     next leader pushes it, and every server refuses the child.
func TestOperatorModeSpawnRevocationConverges(t *testing.T) {
	needFull(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "auth")
	if _, err := natsauth.Init(dir, natsauth.DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	a, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	harness, err := a.Mint(natsauth.Identity{Role: natsauth.RoleIssuer, Name: "harness"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartWith(t, 3, cluster.Options{
		Secure:      true,
		ExtraArgs:   []string{"--nats-operator-dir", dir, "--insecure-no-tls"},
		ConnOptions: []nats.Option{nats.UserJWTAndSeed(harness.JWT, string(harness.Seed)), nats.CustomInboxPrefix(natsbus.InboxPrefix("harness"))},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	deadline := time.Now().Add(60 * time.Second)
	for c.Status(c.Leader()).ReceiptFormatLevel < fsm.ReceiptFormatWorkerKeys {
		if time.Now().After(deadline) {
			t.Fatal("receipt format level 12 not reached")
		}
		time.Sleep(100 * time.Millisecond) // poll interval under the deadline above
	}

	// spawn asks, as parent, for child with a key pair generated here and
	// returns the child's .creds file.
	spawn := func(parent, child string) string {
		t.Helper()
		seed, pub, err := worker.NewChildKey()
		if err != nil {
			t.Fatal(err)
		}
		env, err := c.Client(c.Leader(), parent).Spawn(ctx, api.SpawnRequest{Child: child, Lane: "isolated", TTLMillis: 30 * 60_000, UserKey: pub})
		if err != nil || env.Decision != grants.Permit || env.UserJWT == "" {
			t.Fatalf("spawn %s: %+v %v", child, env, err)
		}
		path := filepath.Join(tmp, child+".creds")
		if err := worker.WriteChildCreds(path, env, seed); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dial := func(i int, file, name string) (*nats.Conn, error) {
		return nats.Connect(c.Nodes[i].URL(), nats.UserCredentials(file), nats.CustomInboxPrefix(natsbus.InboxPrefix(name)),
			nats.NoReconnect(), nats.Timeout(3*time.Second))
	}
	// refusedOn waits, up to within, until node i refuses the credential
	// at connect.
	refusedOn := func(i int, file, name string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			nc, err := dial(i, file, name)
			if err != nil {
				if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
					t.Fatalf("%s on %s: %v; want an authorization violation", name, c.Nodes[i].ID, err)
				}
				return
			}
			nc.Close()
			if time.Now().After(deadline) {
				t.Fatalf("%s still accepted by %s %s after its revocation", name, c.Nodes[i].ID, within)
			}
			time.Sleep(200 * time.Millisecond) // poll interval under the deadline above
		}
	}
	revoke := func(w string) {
		t.Helper()
		env, err := c.Client(c.Leader(), "").Revoke(ctx, api.RevokeRequest{Worker: w})
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("revoke %s: %+v %v", w, env, err)
		}
	}

	// A node down during the revocation catches up from its peers.
	aFile := spawn("w1", "w1-a")
	for i := range c.Nodes {
		nc, err := dial(i, aFile, "w1-a")
		if err != nil {
			t.Fatalf("w1-a on %s before any revocation: %v", c.Nodes[i].ID, err)
		}
		nc.Close()
	}
	down := (c.Leader() + 1) % 3
	c.Stop(down)
	revoke("w1")
	for i := range c.Nodes {
		if i != down {
			refusedOn(i, aFile, "w1-a", 20*time.Second)
		}
	}
	c.Restart(down)
	refusedOn(down, aFile, "w1-a", natsbus.DefaultResolverSync+15*time.Second)

	// The leader dies right after the revocation commits: the next one
	// pushes it.
	bFile := spawn("w2", "w2-b")
	leader := c.Leader()
	revoke("w2")
	c.Stop(leader)
	c.Leader()
	for i := range c.Nodes {
		if i != leader {
			refusedOn(i, bFile, "w2-b", 30*time.Second)
		}
	}
	c.Restart(leader)
	refusedOn(leader, bFile, "w2-b", natsbus.DefaultResolverSync+15*time.Second)
}
