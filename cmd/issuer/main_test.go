package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/gobuild"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// The real-process test needs an issuer binary, built once on first use
// (so `go test -run Usage` does not pay for it) and removed by TestMain.
var bins gobuild.Cache

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { bins.Remove() }))
}

func issuerBinary(t *testing.T) string {
	t.Helper()
	p, err := bins.Path("github.com/writ-dev/writ/cmd/issuer")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// result is what one in-process run produced.
type result struct {
	err            error
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	err := run(ctx, args, &out, &errb)
	code := exitCode(err, &errb)
	return result{err: err, code: code, stdout: out.String(), stderr: errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d, err %v\nstdout:\n%s\nstderr:\n%s", r.code, r.err, r.stdout, r.stderr)
}

// cleanEnv makes sure the environment does not supply flags.
func cleanEnv(t *testing.T) {
	for _, k := range []string{"WRIT_NATS_URL", "NATS_URL", "WRIT_NATS_USER", "WRIT_NATS_PASSWORD_FILE", "WRIT_NATS_CA", "WRIT_NATS_CREDS", EnvAuthDir, envNodeID} {
		t.Setenv(k, "")
	}
}

// tripwire counts connections: usage errors must be caught before
// anything dials.
func tripwire(t *testing.T) (url string, accepted *atomic.Int32) { return testenv.Tripwire(t) }

func freePort(t *testing.T) int { return testenv.FreePort(t) }

func TestUsageErrors(t *testing.T) {
	cleanEnv(t)
	url, accepted := tripwire(t)
	dir := t.TempDir()
	raft := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	nodeFlags := []string{"--node-id", "n1", "--data-dir", filepath.Join(dir, "d"), "--raft-addr", raft, "--nats-port", fmt.Sprint(freePort(t))}
	cases := []struct {
		name string
		args []string
		want []string // every one must appear in the error
	}{
		{"serve without --dev or credentials", append([]string{"serve"}, nodeFlags...), []string{"--auth", "--dev"}},
		{"serve with nothing at all", []string{"serve"}, []string{"--auth", "--dev"}},
		{"peers without =", append([]string{"serve", "--insecure-no-auth", "--peers", "n1"}, nodeFlags...), []string{"--peers", `"n1"`}},
		{"peers without port", append([]string{"serve", "--insecure-no-auth", "--peers", "n1=127.0.0.1"}, nodeFlags...), []string{"--peers", "host:port"}},
		{"peers with empty id", append([]string{"serve", "--insecure-no-auth", "--peers", "=127.0.0.1:7001"}, nodeFlags...), []string{"--peers"}},
		{"peers listed twice", append([]string{"serve", "--insecure-no-auth", "--peers", "n1=127.0.0.1:7001,n1=127.0.0.1:7002"}, nodeFlags...), []string{"--peers", "twice"}},
		{"peers without this node", append([]string{"serve", "--insecure-no-auth", "--peers", "n2=127.0.0.1:7002"}, nodeFlags...), []string{"--peers", "n1"}},
		{"bad log level", []string{"serve", "--dev", "--log-level", "loud", "--data-dir", filepath.Join(dir, "dev")}, []string{"--log-level", "loud"}},
		{"bad raft address", []string{"serve", "--insecure-no-auth", "--node-id", "n1", "--data-dir", filepath.Join(dir, "e"), "--raft-addr", "nohostport"}, []string{"--raft-addr", "nohostport"}},
		{"serve with an argument", []string{"serve", "--dev", "extra"}, []string{"extra"}},
		{"operator dir with --auth", append([]string{"serve", "--nats-operator-dir", dir, "--auth", "auth.json"}, nodeFlags...), []string{"--nats-operator-dir", "--auth"}},
		{"operator dir with --dev", []string{"serve", "--dev", "--nats-operator-dir", dir, "--data-dir", filepath.Join(dir, "dev")}, []string{"--nats-operator-dir", "--dev"}},
		{"operator dir without keys", append([]string{"serve", "--nats-operator-dir", filepath.Join(dir, "nokeys")}, nodeFlags...), []string{"--nats-operator-dir", "issuer auth init"}},
		{"reviewers without operator mode", append([]string{"serve", "--auth", "auth.json", "--reviewers", "r.json"}, nodeFlags...), []string{"--reviewers", "--nats-operator-dir"}},
		{"auth revoke without a target", []string{"auth", "revoke", "--dir", dir, "--nats-url", url}, []string{"exactly one"}},
		{"unknown serve flag", []string{"serve", "--bogus"}, []string{"--bogus"}},
		{"unknown command", []string{"frobnicate"}, []string{"frobnicate"}},
		{"revoke with no target", []string{"revoke", "--nats-url", url}, []string{"--worker", "--source", "--lane"}},
		{"revoke with two targets", []string{"revoke", "--worker", "w1", "--lane", "coordinator", "--nats-url", url}, []string{"exactly one"}},
		{"revoke with three targets", []string{"revoke", "--worker", "w1", "--source", "s", "--lane", "l", "--nats-url", url}, []string{"exactly one"}},
		{"revoke with an argument", []string{"revoke", "w1", "--nats-url", url}, []string{"w1"}},
		{"reinstate with a wildcard id", []string{"reinstate", "w*", "--nats-url", url}, []string{"w*"}},
		{"reinstate with a dotted id", []string{"reinstate", "a.b", "--nats-url", url}, []string{"a.b"}},
		{"reinstate with an empty id", []string{"reinstate", "", "--nats-url", url}, []string{"1-64"}},
		{"reinstate without an id", []string{"reinstate", "--nats-url", url}, []string{"arg"}},
		{"reinstate with two ids", []string{"reinstate", "w1", "w2", "--nats-url", url}, []string{"arg"}},
		{"approve without a review id", []string{"approve", "--nats-url", url}, []string{"arg"}},
		{"approve with a malformed review id", []string{"approve", "rv-XYZ", "--nats-url", url}, []string{"rv-XYZ", "hex"}},
		{"approve with a negative ttl", []string{"approve", "rv-0123456789abcdef0123", "--ttl", "-1m", "--nats-url", url}, []string{"--ttl"}},
		{"approve with a ttl over the cap", []string{"approve", "rv-0123456789abcdef0123", "--ttl", "25h", "--nats-url", url}, []string{"--ttl"}},
		{"approve with a long note", []string{"approve", "rv-0123456789abcdef0123", "--note", strings.Repeat("n", 1025), "--nats-url", url}, []string{"--note"}},
		{"status with an argument", []string{"status", "x", "--nats-url", url}, []string{"x"}},
		{"status with a bad timeout", []string{"status", "--timeout", "soon", "--nats-url", url}, []string{"--timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("want exit %d (usage), got %s", exitUsage, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q does not mention %q", r.err, w)
				}
			}
			if !strings.Contains(r.stderr, "issuer: ") {
				t.Errorf("stderr does not carry the error: %q", r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("a usage error printed to stdout: %q", r.stdout)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("usage errors dialled NATS %d times", n)
	}
	// No usage error created the data dirs it was given.
	for _, d := range []string{"d", "dev", "e"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			t.Errorf("a refused serve created %s", d)
		}
	}
}

func TestHelp(t *testing.T) {
	cleanEnv(t)
	r := runCLI(t, "--help")
	if r.code != exitOK {
		t.Fatalf("issuer --help: %s", r)
	}
	for _, w := range []string{"Exit codes", "0 ok", "1 refused", "2 usage", "3 unavailable", "serve", "status", "revoke", "reinstate", "policy", "auth"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("root help does not mention %q:\n%s", w, r.stdout)
		}
	}

	cmds := map[string]struct {
		cmd  *cobra.Command
		want []string
	}{
		"serve":     {serveCmd(io.Discard, io.Discard), []string{"--dev", "--auth", "--insecure-no-auth", "--data-dir", "--peers", "--raft-addr", "--nats-port"}},
		"status":    {statusCmd(io.Discard), []string{"--json", "--node", "--nats-url", "--timeout"}},
		"revoke":    {revokeCmd(io.Discard), []string{"--worker", "--source", "--lane", "--nats-url"}},
		"reinstate": {reinstateCmd(io.Discard), []string{"WORKER", "--nats-url"}},
		"approve":   {approveCmd(io.Discard), []string{"REVIEW_ID", "--ttl", "--note", "--nats-url"}},
		"policy":    {policyCmd(io.Discard), []string{"validate", "apply", "show"}},
		"auth":      {authCmd(io.Discard, io.Discard), []string{"init", "mint", "revoke", "--nats-operator-dir"}},
	}
	for name, c := range cmds {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, name, "--help")
			if r.code != exitOK {
				t.Fatalf("%s --help: %s", name, r)
			}
			// Cobra shows Long when there is one, else Short: either way
			// the help says what the command does.
			what := c.cmd.Long
			if what == "" {
				what = c.cmd.Short
			}
			if strings.TrimSpace(what) == "" || c.cmd.Short == "" {
				t.Fatalf("%s has no description", name)
			}
			first, _, _ := strings.Cut(strings.TrimSpace(what), "\n")
			if !strings.Contains(r.stdout, first) {
				t.Errorf("%s --help does not say what it does (%q):\n%s", name, first, r.stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%s --help does not mention %q", name, w)
				}
			}
			if !strings.Contains(r.stdout, "Usage:") {
				t.Errorf("%s --help has no usage line", name)
			}
		})
	}
}

func TestStatusWithNothingListening(t *testing.T) {
	cleanEnv(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	start := time.Now()
	r := runCLI(t, "status", "--nats-url", url, "--timeout", "2s")
	if r.code != exitUnavailable {
		t.Fatalf("want exit %d, got %s", exitUnavailable, r)
	}
	if !strings.Contains(r.stderr, "issuer serve --dev") {
		t.Errorf("the error should say how to start an issuer: %q", r.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to give up", d)
	}
	// The same for the operator commands.
	for _, args := range [][]string{{"revoke", "--worker", "w1"}, {"reinstate", "w1"}, {"approve", "rv-0123456789abcdef0123"}} {
		r := runCLI(t, append(args, "--nats-url", url, "--timeout", "2s")...)
		if r.code != exitUnavailable || !strings.Contains(r.stderr, "issuer serve --dev") {
			t.Errorf("%v: want exit 3 saying how to start an issuer, got %s", args, r)
		}
	}
}

// NATS is up but no issuer answers: still unavailable, with a hint.
func TestStatusWithNoIssuer(t *testing.T) {
	cleanEnv(t)
	s := testenv.StartNATS(t, false)
	r := runCLI(t, "status", "--nats-url", s.ClientURL(), "--timeout", "500ms")
	if r.code != exitUnavailable {
		t.Fatalf("want exit %d, got %s", exitUnavailable, r)
	}
	if !strings.Contains(r.stderr, "did not answer") || !strings.Contains(r.stderr, "issuer serve") {
		t.Errorf("the error should say the issuer did not answer and how to check: %q", r.stderr)
	}
	r = runCLI(t, "revoke", "--worker", "w1", "--nats-url", s.ClientURL(), "--timeout", "500ms")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "did not answer") {
		t.Fatalf("revoke with no issuer: want exit 3 (unavailable), got %s", r)
	}
}

func statusJSON(t *testing.T, url string) (api.Status, map[string]any) {
	t.Helper()
	r := runCLI(t, "status", "--json", "--nats-url", url, "--timeout", "10s")
	if r.code != exitOK {
		t.Fatalf("status --json: %s", r)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json is not a Status: %v\n%s", err, r.stdout)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	return st, raw
}

func TestOperatorCommandsAgainstIssuer(t *testing.T) {
	cleanEnv(t)
	env := testenv.StartSingle(t, t.TempDir(), nil)

	st, raw := statusJSON(t, env.URL)
	for _, k := range []string{"leader", "epoch", "seq", "state", "term", "state_digest"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("status --json has no %q", k)
		}
	}
	if st.Leader == "" || st.State != "Leader" || st.Epoch < 1 || st.Seq < 1 {
		t.Fatalf("status of a fresh dev issuer: leader %q state %q epoch %d seq %d", st.Leader, st.State, st.Epoch, st.Seq)
	}

	// Human-readable status too.
	r := runCLI(t, "status", "--nats-url", env.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, "leader") || !strings.Contains(r.stdout, "epoch") {
		t.Fatalf("status: %s", r)
	}

	r = runCLI(t, "revoke", "--worker", "w1", "--nats-url", env.URL)
	if r.code != exitOK {
		t.Fatalf("revoke --worker w1: %s", r)
	}
	var env1 grants.Envelope
	if err := json.Unmarshal([]byte(r.stdout), &env1); err != nil {
		t.Fatalf("revoke printed %q: %v", r.stdout, err)
	}
	if env1.Kind != events.KindRevoke || env1.Decision != grants.Permit || env1.Seq <= st.Seq {
		t.Fatalf("revoke envelope %+v; want kind revoke, permit, seq after %d", env1, st.Seq)
	}
	if !strings.Contains(r.stdout, `"kind": "revoke"`) {
		t.Errorf("revoke output does not name its kind: %s", r.stdout)
	}

	after, _ := statusJSON(t, env.URL)
	if after.Seq != env1.Seq || after.BarredWorkers != 1 {
		t.Fatalf("after revoke: seq %d (want %d), barred %d (want 1)", after.Seq, env1.Seq, after.BarredWorkers)
	}

	r = runCLI(t, "reinstate", "w1", "--nats-url", env.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, `"kind": "reinstate"`) {
		t.Fatalf("reinstate w1: %s", r)
	}
	if st, _ := statusJSON(t, env.URL); st.BarredWorkers != 0 {
		t.Fatalf("after reinstate %d workers are barred", st.BarredWorkers)
	}
}

type syncBuffer = testenv.SyncBuffer

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan error
}

func startServe(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	p.cmd.Env = append(os.Environ(), "WRIT_NATS_URL=", "WRIT_NODE_ID=")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitReady polls `status --json` until the node leads with a policy
// applied, failing if the process exits first.
func (p *proc) waitReady(t *testing.T, url string, within time.Duration) api.Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("issuer exited before it was ready: %v\nstdout:\n%s\nstderr:\n%s", err, p.stdout, p.stderr)
		default:
		}
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, []string{"status", "--json", "--nats-url", url, "--timeout", "1s"}, &out, &errb)
		cancel()
		if err == nil {
			var st api.Status
			if json.Unmarshal(out.Bytes(), &st) == nil && st.Leader != "" && st.Epoch >= 1 {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("issuer not ready after %s (last: %v %s)\nstdout:\n%s\nstderr:\n%s", within, err, errb.String(), p.stdout, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a prompt, clean exit.
func (p *proc) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			t.Fatalf("issuer exited with %v after SIGTERM, want 0\nstderr:\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("issuer still running 15s after SIGTERM\nstderr:\n%s", p.stderr)
	}
	return time.Since(start)
}

func TestServeDevProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the issuer binary")
	}
	if runtime.GOOS == "windows" {
		t.Skip("uses SIGTERM")
	}
	cleanEnv(t)
	bin := issuerBinary(t)
	dir := t.TempDir()
	natsPort, raftAddr := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	args := []string{"--dev", "--data-dir", dir, "--nats-port", fmt.Sprint(natsPort), "--raft-addr", raftAddr, "--log-level", "warn"}

	p := startServe(t, bin, args...)
	st := p.waitReady(t, url, testenv.SetupTimeout)
	banner := p.stdout.String()
	for _, w := range []string{"development mode", "NO AUTHENTICATION", url, dir} {
		if !strings.Contains(banner, w) {
			t.Errorf("startup banner does not mention %q:\n%s", w, banner)
		}
	}
	if !st.DevMode {
		t.Error("status does not report development mode")
	}
	// Write something, so there is state to keep.
	r := runCLI(t, "revoke", "--source", "web", "--nats-url", url)
	if r.code != exitOK {
		t.Fatalf("revoke: %s", r)
	}
	before, _ := statusJSON(t, url)
	if before.Seq <= st.Seq {
		t.Fatalf("seq did not move: %d -> %d", st.Seq, before.Seq)
	}
	took := p.stop(t)
	t.Logf("first run stopped %s after SIGTERM", took)

	p2 := startServe(t, bin, args...)
	p2.waitReady(t, url, testenv.SetupTimeout)
	// A restarted node may answer before it has re-applied its log; wait
	// (briefly) for it to catch up, then require the very same position.
	var after api.Status
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, _ = statusJSON(t, url)
		if after.Seq >= before.Seq || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after.Epoch != before.Epoch || after.Seq != before.Seq || after.StateDigest != before.StateDigest {
		t.Fatalf("restart on the same data dir: epoch %d seq %d digest %s; want epoch %d seq %d digest %s",
			after.Epoch, after.Seq, after.StateDigest, before.Epoch, before.Seq, before.StateDigest)
	}
	took = p2.stop(t)
	t.Logf("second run stopped %s after SIGTERM", took)
	if strings.Contains(p2.stderr.String(), "panic") {
		t.Errorf("stderr mentions a panic:\n%s", p2.stderr)
	}
}
