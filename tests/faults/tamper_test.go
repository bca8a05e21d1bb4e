package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/internal/testing/gobuild"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsbus"
)

// buildAuditor builds cmd/auditor for this test; the binary is removed
// when the test ends.
func buildAuditor(t *testing.T) string {
	t.Helper()
	var bins gobuild.Cache
	t.Cleanup(bins.Remove)
	p, err := bins.Path("github.com/writ-dev/writ/cmd/auditor")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type verifyResult struct {
	OK        bool `json:"ok"`
	Violation *struct {
		Seq    uint64 `json:"seq"`
		Code   string `json:"code"`
		Detail string `json:"detail"`
	} `json:"violation"`
}

// auditorVerify runs `auditor verify --json` against url.
func auditorVerify(t *testing.T, bin, url string, extra ...string) (verifyResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"verify", "--json"}, extra...)...)
	cmd.Env = append(os.Environ(), "WRIT_NATS_URL="+url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("auditor verify: %v\n%s", err, stderr.String())
	}
	var res verifyResult
	if jerr := json.Unmarshal(stdout.Bytes(), &res); jerr != nil {
		t.Fatalf("auditor verify printed %q (stderr %q): %v", stdout.String(), stderr.String(), jerr)
	}
	return res, code
}

// TestTamperedStreamCaughtAtTheBadSeq is scenario 8 end to end: receipts
// from a real issuer's stream are copied, one tampering at a time, into the
// receipt stream of a fresh JetStream server, and `auditor verify` (the
// binary) must exit 1 naming exactly the tampered sequence: a flipped bit,
// a truncated message, two receipts swapped, a receipt deleted. A stream
// cut short is caught by --expect-digest with the issuer's state digest.
func TestTamperedStreamCaughtAtTheBadSeq(t *testing.T) {
	smokeOK(t)
	auditor := buildAuditor(t)

	// A real issuer's receipts.
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w := client.New(nc, "w1")
	for i := range 6 {
		g := cluster.Mint(t, ctx, w, i, fmt.Sprintf("t-grant-%d", i))
		if a, err := w.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("t-spend-%d", i)}); err != nil || !cluster.IsAttempt(a) {
			t.Fatalf("spend %d: %+v %v", i, a, err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "every receipt published", func() bool {
		st := env.Service.Status()
		return st.StreamLastSeq == st.Seq && st.Seq >= 13
	})
	status := env.Service.Status()
	if res, code := auditorVerify(t, auditor, env.URL, "--expect-digest", status.StateDigest); code != 0 || !res.OK {
		t.Fatalf("the real stream does not verify: exit %d %+v", code, res.Violation)
	}
	type msg struct {
		subject string
		data    []byte
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	src, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var orig []msg
	for seq := uint64(1); seq <= status.Seq; seq++ {
		m, err := src.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		orig = append(orig, msg{m.Subject, m.Data})
	}
	env.Stop()

	// A fresh JetStream server for the tampered copies.
	scfg := natsbus.DefaultServerConfig()
	scfg.Port = testenv.FreePort(t)
	scfg.StoreDir = filepath.Join(t.TempDir(), "js")
	ns, err := natsbus.StartServer(scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	tnc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer tnc.Close()
	tjs, err := jetstream.New(tnc)
	if err != nil {
		t.Fatal(err)
	}
	load := func(ms []msg) {
		t.Helper()
		_ = tjs.DeleteStream(ctx, events.StreamName)
		// nats-server removes a deleted stream's store asynchronously;
		// creating the same name at once can fail with "error creating
		// store for stream", so poll with a deadline.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := natsbus.EnsureStream(ctx, tjs, 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, m := range ms {
			if _, err := tjs.Publish(ctx, m.subject, m.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	clone := func() []msg {
		out := make([]msg, len(orig))
		for i, m := range orig {
			out[i] = msg{m.subject, bytes.Clone(m.data)}
		}
		return out
	}
	const k = 7 // the tampered sequence (1-based)
	cases := []struct {
		name   string
		tamper func([]msg) []msg
	}{
		{"flipped bit (middle)", func(ms []msg) []msg { d := ms[k-1].data; d[len(d)/2] ^= 0x10; return ms }},
		{"flipped bit (first third)", func(ms []msg) []msg { d := ms[k-1].data; d[len(d)/3] ^= 0x01; return ms }},
		{"flipped bit (near the end)", func(ms []msg) []msg { d := ms[k-1].data; d[len(d)-10] ^= 0x80; return ms }},
		{"flipped bit (header)", func(ms []msg) []msg { d := ms[k-1].data; d[3] ^= 0x04; return ms }},
		{"truncated receipt", func(ms []msg) []msg { ms[k-1].data = ms[k-1].data[:len(ms[k-1].data)-5]; return ms }},
		{"reordered receipts", func(ms []msg) []msg { ms[k-1], ms[k] = ms[k], ms[k-1]; return ms }},
		{"deleted receipt", func(ms []msg) []msg { return append(ms[:k-1], ms[k:]...) }},
	}
	for _, tc := range cases {
		load(tc.tamper(clone()))
		res, code := auditorVerify(t, auditor, ns.ClientURL())
		switch {
		case code != 1 || res.OK || res.Violation == nil:
			t.Errorf("invariant tampering is caught: %s: exit %d, ok %v", tc.name, code, res.OK)
		case res.Violation.Seq != k:
			t.Errorf("invariant caught at exactly the bad seq: %s at seq %d reported at seq %d: %s %s", tc.name, k, res.Violation.Seq, res.Violation.Code, res.Violation.Detail)
		default:
			t.Logf("%s at seq %d: caught at seq %d (%s)", tc.name, k, res.Violation.Seq, res.Violation.Code)
		}
	}
	// A stream cut short is a valid prefix: only the digest catches it.
	load(clone()[:len(orig)-3])
	res, code := auditorVerify(t, auditor, ns.ClientURL(), "--expect-digest", status.StateDigest)
	if code != 1 || res.OK || res.Violation == nil {
		t.Errorf("invariant truncation is caught with --expect-digest: exit %d, ok %v", code, res.OK)
	} else {
		t.Logf("stream cut to %d of %d receipts: caught (%s at seq %d)", len(orig)-3, len(orig), res.Violation.Code, res.Violation.Seq)
	}
}
