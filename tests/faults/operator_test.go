package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/raftnode"
)

// issuerCLI runs the issuer binary and returns its combined output and
// exit code.
func issuerCLI(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	bin, err := cluster.Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("issuer %v: %v", args, err)
	}
	return out.String(), 0
}

// TestOperatorSurface checks what an operator sees and does:
//   - `issuer status` shows every peer with its applied index and last
//     contact, the stream watermark and whether the outbox is draining,
//     durability and security settings;
//   - `issuer snapshot save` writes a checked state file from a running
//     node (online, over NATS, compacting its log) and from a data dir
//     (offline, its newest raft snapshot); `inspect` verifies it;
//   - `issuer snapshot restore` refuses a data dir holding raft state, and
//     three fresh data dirs restored from the same file start a cluster
//     with the saved state digest, where an idempotent retry returns the
//     original grant; that cluster's status says loudly that its (new,
//     empty) stream lacks the receipts the state confirmed;
//   - a node started on a data dir with the wrong --peers refuses, naming
//     both member sets.
func TestOperatorSurface(t *testing.T) {
	smokeOK(t)
	c := cluster.Start(t, 3)
	leader := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client(leader, "w1")
	var minted []grants.Envelope
	for i := range 5 {
		g := cluster.Mint(t, ctx, cl, i, fmt.Sprintf("op-grant-%d", i))
		minted = append(minted, g)
		if i%2 == 0 {
			if a, err := cl.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("op-spend-%d", i)}); err != nil || !cluster.IsAttempt(a) {
				t.Fatalf("spend %d: %+v %v", i, a, err)
			}
		}
	}
	c.WaitPublished()
	// Wait until the watermark is confirmed through the log too, so the
	// saved state says every receipt is in the stream.
	var conv api.Status
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		conv = c.WaitConverged()
		if conv.Published == conv.Seq {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the published watermark never reached seq %d: %d", conv.Seq, conv.Published)
		}
	}
	env := []string{"WRIT_NATS_URL=" + c.Nodes[leader].URL()}

	// Status.
	out, code := issuerCLI(t, env, "status")
	if code != 0 {
		t.Fatalf("issuer status: exit %d\n%s", code, out)
	}
	for _, want := range []string{"stream watermark", "outbox draining", "last contact", "applied", "durability", "raft log fsync yes", "JetStream sync every write yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("issuer status does not show %q:\n%s", want, out)
		}
	}
	for _, nd := range c.Nodes {
		if !strings.Contains(out, "\n"+nd.ID+" ") {
			t.Errorf("issuer status has no line for peer %s:\n%s", nd.ID, out)
		}
	}
	t.Logf("issuer status:\n%s", out)

	// Save online (compacting) and offline.
	dir := t.TempDir()
	online := filepath.Join(dir, "online.snap")
	if out, code := issuerCLI(t, env, "snapshot", "save", "--out", online, "--compact"); code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s", code, out)
	}
	if out, code := issuerCLI(t, nil, "snapshot", "inspect", online); code != 0 || !strings.Contains(out, conv.StateDigest) {
		t.Fatalf("snapshot inspect: exit %d, want digest %s\n%s", code, conv.StateDigest, out)
	}
	offline := filepath.Join(dir, "offline.snap")
	if out, code := issuerCLI(t, nil, "snapshot", "save", "--out", offline, "--data-dir", c.Nodes[leader].DataDir); code != 0 {
		t.Fatalf("snapshot save --data-dir: exit %d\n%s", code, out)
	}
	f, err := os.Open(offline)
	if err != nil {
		t.Fatal(err)
	}
	oh, _, err := raftnode.ReadSnapshotFile(f)
	f.Close()
	if err != nil || oh.StateDigest != conv.StateDigest {
		t.Errorf("offline snapshot: digest %s (%v), want %s", oh.StateDigest, err, conv.StateDigest)
	}
	// A damaged file is refused.
	raw, _ := os.ReadFile(online)
	raw[len(raw)-3] ^= 0x01
	bad := filepath.Join(dir, "bad.snap")
	_ = os.WriteFile(bad, raw, 0o600)
	if out, code := issuerCLI(t, nil, "snapshot", "inspect", bad); code == 0 || !strings.Contains(out, "checksum") {
		t.Errorf("a damaged state file passed inspect: exit %d\n%s", code, out)
	}

	// Restore refuses a data dir with state.
	c.StopAll()
	n1 := c.Nodes[0]
	if out, code := issuerCLI(t, nil, "snapshot", "restore", "--in", online, "--data-dir", n1.DataDir, "--node-id", n1.ID, "--peers", c.PeersFlag()); code == 0 || !strings.Contains(out, "already holds raft state") {
		t.Errorf("restore over existing state: exit %d\n%s", code, out)
	}
	// A wrong peer set is refused at start.
	wrong := strings.Replace(c.PeersFlag(), "n3=", "n9=", 1)
	out, code = issuerCLI(t, nil, "serve", "--insecure-no-auth", "--node-id", n1.ID, "--data-dir", n1.DataDir, "--raft-addr", n1.RaftAddr,
		"--peers", wrong, "--nats-port", fmt.Sprint(n1.NATSPort))
	if code == 0 || !strings.Contains(out, "--peers names") || !strings.Contains(out, "n1,n2,n3") {
		t.Errorf("a node with the wrong --peers started or said something unclear: exit %d\n%s", code, out)
	}

	// A fresh cluster from the file.
	restored := cluster.StartWith(t, 3, cluster.Options{BeforeLaunch: func(rc *cluster.Cluster, nd *cluster.Node) {
		if _, err := os.Stat(filepath.Join(nd.DataDir, "raft", "raft.db")); err == nil {
			return
		}
		if out, code := issuerCLI(t, nil, "snapshot", "restore", "--in", online, "--data-dir", nd.DataDir, "--node-id", nd.ID, "--peers", rc.PeersFlag()); code != 0 {
			t.Errorf("restore into %s: exit %d\n%s", nd.ID, code, out)
		}
	}})
	st := checkDigests(t, restored)
	if st.StateDigest != conv.StateDigest || st.Seq != conv.Seq {
		t.Errorf("invariant restored state: digest %.12s seq %d, saved %.12s seq %d", st.StateDigest, st.Seq, conv.StateDigest, conv.Seq)
	}
	rcl := restored.Client(restored.Leader(), "w1")
	again, err := rcl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(1), IdempotencyKey: "op-grant-1"})
	if err != nil || again.GrantID != minted[1].GrantID || again.Seq != minted[1].Seq {
		t.Errorf("invariant idempotent retry after restore: %+v (%v), want %s seq %d", again, err, minted[1].GrantID, minted[1].Seq)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ls, err := restored.LeaderStatus()
		if err == nil && ls.StreamLostFrom == 1 && ls.StreamLostThrough >= conv.Published {
			t.Logf("restored cluster reports the stream lacks receipts %d..%d (status), as documented", ls.StreamLostFrom, ls.StreamLostThrough)
			break
		}
		if time.Now().After(end) {
			t.Errorf("the restored cluster with an empty stream does not report the missing receipts: %+v (%v)", ls.StreamLostFrom, err)
			break
		}
	}
}
