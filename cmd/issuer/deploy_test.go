package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/internal/testing/testpki"
)

// waitResolvable is what lets a container advertise its own DNS name for
// raft (raftnode resolves the advertise address once, at start).
func TestWaitResolvable(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	for _, adv := range []string{"127.0.0.1:7000", "[::1]:7000", "localhost:7000"} {
		start := time.Now()
		if err := waitResolvable(ctx, adv, "", time.Minute, lg); err != nil {
			t.Fatalf("%s: %v", adv, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s took %s", adv, d)
		}
	}
	// The bind address stands in for an empty advertise address.
	if err := waitResolvable(ctx, "", "127.0.0.1:7000", time.Minute, lg); err != nil {
		t.Fatal(err)
	}
	// .invalid never resolves (RFC 6761): the wait ends at the limit and
	// names the address.
	err := waitResolvable(ctx, "writ-0.writ.invalid:7000", "", 1500*time.Millisecond, lg)
	if err == nil || !strings.Contains(err.Error(), "writ-0.writ.invalid:7000") {
		t.Fatalf("want a resolution error naming the address, got %v", err)
	}
	// A cancelled context ends the wait at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := waitResolvable(cctx, "writ-0.writ.invalid:7000", "", time.Minute, lg); err == nil {
		t.Fatal("want an error from a cancelled wait")
	}
}

// A node as it runs in a container: NATS and raft bound to 0.0.0.0, TLS,
// credentials. The node's own connection to its embedded server must not
// dial 0.0.0.0 (the certificate names 127.0.0.1), and the health check
// `status --require-leader` with WRIT_NODE_ID must pass.
func TestServeContainerShape(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the issuer binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGTERM")
	}
	cleanEnv(t)
	bin := issuerBinary(t)
	dir := t.TempDir()
	pki := testpki.NewCA(t, "writ test").WriteFiles(t, dir, "tls")
	ca, cert, key := pki.CA, pki.Cert, pki.Key
	auth := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(auth, []byte(`{"users":[{"name":"ops","role":"operator","password_file":"ops.pw"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ops.pw"), []byte("ops-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natsPort, raftPort := freePort(t), freePort(t)
	p := startServe(t, bin, "--node-id", "c1", "--data-dir", filepath.Join(dir, "data"),
		"--raft-addr", fmt.Sprintf("0.0.0.0:%d", raftPort), "--raft-advertise", fmt.Sprintf("localhost:%d", raftPort),
		"--nats-host", "0.0.0.0", "--nats-port", fmt.Sprint(natsPort),
		"--auth", auth, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, "--log-level", "warn")

	t.Setenv("WRIT_NATS_URL", fmt.Sprintf("nats://127.0.0.1:%d", natsPort))
	t.Setenv("WRIT_NATS_USER", "ops")
	t.Setenv("WRIT_NATS_PASSWORD_FILE", filepath.Join(dir, "ops.pw"))
	t.Setenv("WRIT_NATS_CA", ca)
	t.Setenv(envNodeID, "c1")
	deadline := time.Now().Add(60 * time.Second)
	var last result
	for {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("issuer exited: %v\nstderr:\n%s", err, p.stderr)
		default:
		}
		if last = runCLI(t, "status", "--require-leader", "--json", "--timeout", "1s"); last.code == exitOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --require-leader never passed: %s\nissuer stderr:\n%s", last, p.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(last.stdout), &st); err != nil || st.Node != "c1" || st.Leader != "c1" {
		t.Fatalf("status asked node %q (leader %q), want c1 from %s: %v", st.Node, st.Leader, envNodeID, err)
	}
	// A node id nobody answers for is unavailable (exit 3), not a pass.
	if r := runCLI(t, "status", "--require-leader", "--node", "nosuch", "--timeout", "1s"); r.code != exitUnavailable {
		t.Fatalf("status --node nosuch: %s", r)
	}
	p.stop(t)
}
