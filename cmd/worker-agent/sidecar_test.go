package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// lockedBuffer is a strings.Builder safe for a child process's writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSidecar runs `worker-agent run` and waits for its socket.
func startSidecar(t testing.TB, cfg, socket string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	return startSidecarOf(t, builtBinary, cfg, socket)
}

// startSidecarOf is startSidecar with the binary bin returns.
func startSidecarOf(t testing.TB, bin func(testing.TB) string, cfg, socket string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := binRun{binary: bin}.command(t, "run", "--config", cfg, "--socket", socket)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	testenv.WaitFor(t, testenv.SetupTimeout, "the sidecar socket", func() bool {
		return strings.Contains(logs.String(), "serving worker")
	})
	return cmd, logs
}

func TestSidecarWarmPathAndFallback(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	dir := t.TempDir()
	socket := filepath.Join(dir, "run", "w1.sock")
	good := writeJSON(t, dir, "good.json", workerConfigFor(env.URL))
	// The hook's own NATS URL leads nowhere: only the sidecar can answer.
	blind := writeJSON(t, dir, "blind.json", workerConfigFor("nats://127.0.0.1:1"))
	// A subagent that is a child worker of its own goes to NATS directly
	// (the sidecar serves w1 alone); one kept in w1's name uses the
	// sidecar like the main session.
	blindSub := workerConfigFor("nats://127.0.0.1:1")
	blindSub["subagents_as_workers"] = false
	blindInName := writeJSON(t, dir, "blind-in-name.json", blindSub)
	otherCfg := workerConfigFor(env.URL)
	otherCfg["worker"] = "w2"
	other := writeJSON(t, dir, "other.json", otherCfg)

	sc, logs := startSidecar(t, good, socket)
	if st, err := os.Stat(socket); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", st, err)
	}
	if st, _ := os.Stat(filepath.Dir(socket)); st.Mode().Perm() != 0o700 {
		t.Fatalf("socket dir mode %v", st.Mode().Perm())
	}
	hook := func(cfg, session string, fx string) result {
		in := patch(t, fixture(t, "claude-code/"+fx), map[string]any{"session_id": session})
		return binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfg, "--socket", socket)
	}
	if r := hook(blind, "warm-1", "pre_bash.json"); r.code != 0 || r.stdout != "" {
		t.Fatalf("via the sidecar: %+v", r)
	}
	if r := hook(blind, "warm-1", "post_bash.json"); r.code != 0 {
		t.Fatalf("post via the sidecar: %+v", r)
	}
	if r := hook(blindInName, "warm-2", "pre_subagent_explore_bash.json"); r.code != 0 || !strings.Contains(r.stdout, `"deny"`) {
		t.Fatalf("deny via the sidecar: %+v", r)
	}
	if r := hook(blind, "warm-5", "pre_subagent_explore_bash.json"); r.code != 2 || !strings.Contains(r.stderr, "cannot reach") {
		t.Fatalf("a subagent as a child worker without a way to NATS is blocked: %+v", r)
	}
	// Another worker's hook does not borrow the sidecar's identity: it
	// falls back to its own connection.
	if r := hook(other, "warm-3", "pre_bash.json"); r.code != 0 {
		t.Fatalf("other worker: %+v", r)
	}
	evs := receipts(t, env)
	decided := func(session string) string {
		for _, e := range evs {
			inSession := e.Session == session || strings.HasPrefix(e.Session, session+"/") // subagents: session/agent
			if inSession && (e.Kind == events.KindPermit || e.Kind == events.KindDeny) {
				return e.Worker + "/" + e.Kind.String()
			}
		}
		return ""
	}
	if got := []string{decided("warm-1"), decided("warm-2"), decided("warm-3")}; !reflect.DeepEqual(got, []string{"w1/permit", "w1/deny", "w2/permit"}) {
		t.Fatalf("requests: %v", got)
	}
	var effects int
	for _, e := range evs {
		if e.Kind == events.KindEffect && e.Worker == "w1" {
			effects++
		}
	}
	if effects != 1 {
		t.Fatalf("%d effects", effects)
	}

	// A second sidecar on the same socket refuses to start.
	r := binRun{}.run(t, "run", "--config", good, "--socket", socket)
	if r.code != 2 || !strings.Contains(r.stderr, "already serving") {
		t.Fatalf("second sidecar: %+v", r)
	}

	// Killed without cleanup: the stale socket is skipped.
	_ = sc.Process.Kill()
	_ = sc.Wait()
	if _, err := os.Stat(socket); err != nil {
		t.Fatalf("the killed sidecar should leave its socket behind: %v", err)
	}
	if r := hook(good, "stale-1", "pre_bash.json"); r.code != 0 {
		t.Fatalf("direct after a stale socket: %+v", r)
	}
	if r := hook(blind, "stale-2", "pre_bash.json"); r.code != 2 || !strings.Contains(r.stderr, "cannot reach") {
		t.Fatalf("no sidecar and no issuer: %+v", r)
	}
	// A restarted sidecar takes the stale socket over, and a clean stop
	// removes it.
	sc2, _ := startSidecar(t, good, socket)
	if r := hook(blind, "warm-4", "pre_bash.json"); r.code != 0 {
		t.Fatalf("restarted sidecar: %+v", r)
	}
	// The issuer goes away: the sidecar cannot answer, and the hook
	// blocks the call within its deadline.
	env.Stop()
	in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "down-1"})
	r = binRun{stdin: in}.run(t, "hook", "claude-code", "--config", blind, "--socket", socket, "--deadline", "1s")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "did not answer in time") || !strings.Contains(r.stderr, grants.KeptBlocked) {
		t.Fatalf("issuer down behind the sidecar: %+v", r)
	}
	if r.took > 3*time.Second {
		t.Fatalf("took %v with a 1s deadline", r.took)
	}
	_ = sc2.Process.Signal(syscall.SIGTERM)
	if err := sc2.Wait(); err != nil {
		t.Fatalf("sidecar exit: %v\n%s", err, logs.String())
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Fatalf("socket left after a clean stop: %v", err)
	}
}
