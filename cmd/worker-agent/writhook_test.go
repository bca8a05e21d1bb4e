package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/worker"
)

// thinDir lays out writ-hook as make build does, with worker-agent beside
// it when agent is set. Without it, any run of worker-agent by writ-hook
// fails (exit 2, "running .../worker-agent"), which shows that writ-hook
// fell back.
func thinDir(t testing.TB, agent bool) string {
	t.Helper()
	dir := t.TempDir()
	hook, err := bins.Path("github.com/writ-dev/writ/cmd/writ-hook")
	if err != nil {
		t.Fatal(err)
	}
	place := func(src, name string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	place(hook, "writ-hook")
	if agent {
		place(builtBinary(t), "worker-agent")
	}
	return dir
}

// thinWorld is an issuer, a sidecar for w1 and a home directory that the
// sidecar and every hook share (a hook whose environment differs from the
// sidecar's is declined: see worker/hookrun.go).
type thinWorld struct {
	env    *testenv.Single
	home   string
	socket string
	cfgs   map[string]string
}

func newThinWorld(t *testing.T) *thinWorld {
	t.Helper()
	w := &thinWorld{env: testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))}
	w.home = t.TempDir()
	sockDir, err := os.MkdirTemp("", "wth") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	w.socket = filepath.Join(sockDir, "w1.sock")
	good := workerConfigFor(w.env.URL)
	// The hook's own NATS URL leads nowhere: only the sidecar's
	// connection can answer its calls.
	blind := workerConfigFor("nats://127.0.0.1:1")
	blindInName := workerConfigFor("nats://127.0.0.1:1")
	blindInName["subagents_as_workers"] = false
	other := workerConfigFor(w.env.URL)
	other["worker"] = "w2"
	w.cfgs = map[string]string{
		"good":          writeJSON(t, w.home, "good.json", good),
		"blind":         writeJSON(t, w.home, "blind.json", blind),
		"blind-in-name": writeJSON(t, w.home, "blind-in-name.json", blindInName),
		"other":         writeJSON(t, w.home, "other.json", other),
	}
	return w
}

// sidecar starts worker-agent run for w1 on w.socket, from w.home, and
// returns the function that stops it.
func (w *thinWorld) sidecar(t *testing.T) func() {
	t.Helper()
	cmd := startSidecarIn(t, w.home, w.cfgs["good"], w.socket)
	return func() { stopSidecar(cmd) }
}

// startSidecarIn starts worker-agent run on socket with the environment
// binRun gives a run in dir with env (the hooks' own, when they run in
// dir with env too) and waits for its socket; the test's end stops it.
func startSidecarIn(t testing.TB, dir, cfg, socket string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := binRun{dir: dir, env: env}.command(t, "run", "--config", cfg, "--socket", socket)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSidecar(cmd) })
	testenv.WaitFor(t, testenv.SetupTimeout, "the sidecar socket", func() bool {
		return strings.Contains(logs.String(), "serving worker")
	})
	return cmd
}

// stopSidecar ends a sidecar, stopped (SIGSTOP) or not.
func stopSidecar(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// hook runs bin (writ-hook or worker-agent) as an installed hook would,
// from w.home, on a fixture event in session.
func (w *thinWorld) hook(t *testing.T, bin, cfg, session, fx string, extraEnv ...string) result {
	t.Helper()
	in := patch(t, fixture(t, "claude-code/"+fx), map[string]any{"session_id": session})
	r := binRun{dir: w.home, stdin: in, env: extraEnv, binary: func(testing.TB) string { return bin }}
	return r.run(t, "hook", "claude-code", "--config", w.cfgs[cfg], "--socket", w.socket)
}

// decided is the worker and kind of the decision on session's call.
func decided(evs []events.Event, session string) []string {
	var out []string
	for _, e := range evs {
		inSession := e.Session == session || strings.HasPrefix(e.Session, session+"/")
		if inSession && (e.Kind == events.KindPermit || e.Kind == events.KindDeny) {
			out = append(out, e.Worker+"/"+e.Kind.String())
		}
	}
	return out
}

// writ-hook with a sidecar answers exactly as worker-agent hook does, from
// the sidecar's process: with no worker-agent beside it and a config
// whose NATS URL leads nowhere, only a hosted run can answer. A hook for
// another worker, or with another environment, is declined before
// anything is asked, and writ-hook runs worker-agent instead.
func TestWritHookRunsTheHookInTheSidecar(t *testing.T) {
	w := newThinWorld(t)
	w.sidecar(t)
	alone := filepath.Join(thinDir(t, false), "writ-hook")
	agent := builtBinary(t)

	// Permit, then the outcome, through the sidecar.
	if r := w.hook(t, alone, "blind", "thin-1", "pre_bash.json"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("permit via writ-hook: %+v", r)
	}
	if r := w.hook(t, alone, "blind", "thin-1", "post_bash.json"); r.code != 0 || r.stderr != "" {
		t.Fatalf("post via writ-hook: %+v", r)
	}
	// A refusal reads the same as worker-agent hook's own, byte for byte
	// but for the number of its receipt.
	thin := w.hook(t, alone, "blind-in-name", "thin-2", "pre_subagent_explore_bash.json")
	direct := w.hook(t, agent, "blind-in-name", "direct-2", "pre_subagent_explore_bash.json")
	receiptNo := regexp.MustCompile(`\[receipt [0-9]+\]`)
	if thin.code != 0 || !strings.Contains(thin.stdout, `"deny"`) || !receiptNo.MatchString(thin.stdout) || thin.code != direct.code ||
		receiptNo.ReplaceAllString(thin.stdout, "") != receiptNo.ReplaceAllString(direct.stdout, "") || thin.stderr != direct.stderr {
		t.Fatalf("deny: writ-hook %+v, worker-agent hook %+v", thin, direct)
	}
	// A repeated PreToolUse of a permitted call is refused, as by
	// worker-agent hook: the call's record is the same one.
	again := w.hook(t, alone, "blind", "thin-1", "pre_bash.json")
	if again.code != 2 {
		t.Fatalf("repeated pre via writ-hook: %+v", again)
	}

	// The socket under another name (a symlinked directory) is still the
	// sidecar's own.
	link := filepath.Join(w.home, "sock-link")
	if err := os.Symlink(filepath.Dir(w.socket), link); err != nil {
		t.Fatal(err)
	}
	viaLink := binRun{dir: w.home, stdin: patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "thin-6"}),
		binary: func(testing.TB) string { return alone }}.run(t, "hook", "claude-code", "--config", w.cfgs["blind"], "--socket", filepath.Join(link, filepath.Base(w.socket)))
	if viaLink.code != 0 || viaLink.stdout != "" {
		t.Fatalf("socket through a symlink: %+v", viaLink)
	}

	// Declined: another worker's hook, and a hook whose environment
	// differs. writ-hook then runs worker-agent, missing here.
	for name, r := range map[string]result{
		"another worker":        w.hook(t, alone, "other", "thin-3", "pre_bash.json"),
		"another environment":   w.hook(t, alone, "blind", "thin-4", "pre_bash.json", "WRIT_ROUTE=nightly"),
		"an unset variable set": w.hook(t, alone, "blind", "thin-5", "pre_bash.json", "NATS_URL=nats://127.0.0.1:1"),
	} {
		if r.code != 2 || !strings.Contains(r.stderr, "worker-agent") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: %+v, want the fallback to the missing worker-agent", name, r)
		}
	}

	evs := receipts(t, w.env)
	for _, c := range []struct {
		session string
		want    string
	}{
		{"thin-1", "w1/permit"}, {"thin-2", "w1/deny"}, {"direct-2", "w1/deny"}, {"thin-6", "w1/permit"},
		{"thin-3", ""}, {"thin-4", ""}, {"thin-5", ""},
	} {
		if got := strings.Join(decided(evs, c.session), ","); got != c.want {
			t.Errorf("session %s: decisions %q, want %q", c.session, got, c.want)
		}
	}
	// The PostToolUse reported the outcome once, against that permit.
	var grant string
	for _, e := range evs {
		if e.Kind == events.KindPermit && e.Session == "thin-1" {
			grant = e.GrantID
		}
	}
	var effects int
	for _, e := range evs {
		if e.Kind == events.KindEffect && grant != "" && e.GrantID == grant {
			effects++
		}
	}
	if effects != 1 {
		t.Errorf("%d effects for thin-1's grant %q, want 1", effects, grant)
	}
}

// Relative paths in a hosted hook are the hook process's, not the
// sidecar's: the project config found from the hook's directory, and a
// relative --config.
func TestWritHookHostedPathsAreTheHooks(t *testing.T) {
	w := newThinWorld(t)
	w.sidecar(t)
	alone := filepath.Join(thinDir(t, false), "writ-hook")
	project := filepath.Join(w.home, "project")
	b, err := os.ReadFile(w.cfgs["blind"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(project, ".writ"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".writ", "worker.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "rel.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The sidecar runs in w.home, which has neither file.
	run := func(session string, args ...string) result {
		in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": session})
		r := binRun{dir: project, stdin: in, env: []string{"HOME=" + w.home, "XDG_STATE_HOME=" + filepath.Join(w.home, "state")},
			binary: func(testing.TB) string { return alone }}
		return r.run(t, append([]string{"hook", "claude-code", "--socket", w.socket}, args...)...)
	}
	if r := run("rel-1"); r.code != 0 || r.stdout != "" {
		t.Fatalf("project config: %+v", r)
	}
	if r := run("rel-2", "--config", "rel.json"); r.code != 0 || r.stdout != "" {
		t.Fatalf("relative --config: %+v", r)
	}
	evs := receipts(t, w.env)
	for _, s := range []string{"rel-1", "rel-2"} {
		if got := strings.Join(decided(evs, s), ","); got != "w1/permit" {
			t.Errorf("%s: %q", s, got)
		}
	}
}

// Without a sidecar writ-hook runs worker-agent beside it, which answers
// as it always has: through its own connection, or blocked when it has
// none.
func TestWritHookWithoutASidecar(t *testing.T) {
	w := newThinWorld(t)
	both := filepath.Join(thinDir(t, true), "writ-hook")
	if r := w.hook(t, both, "good", "none-1", "pre_bash.json"); r.code != 0 || r.stdout != "" {
		t.Fatalf("direct via worker-agent: %+v", r)
	}
	if r := w.hook(t, both, "blind", "none-2", "pre_bash.json"); r.code != 2 || !strings.Contains(r.stderr, "cannot reach") {
		t.Fatalf("no sidecar and no issuer: %+v", r)
	}
	// A sidecar that stopped leaves nothing behind that writ-hook waits on.
	stop := w.sidecar(t)
	stop()
	if r := w.hook(t, both, "good", "none-3", "pre_bash.json"); r.code != 0 {
		t.Fatalf("after the sidecar stopped: %+v", r)
	}
	if got := strings.Join(decided(receipts(t, w.env), "none-1"), ","); got != "w1/permit" {
		t.Fatalf("none-1: %q", got)
	}
}

// Hosted hooks run concurrently in one sidecar: this one runs in the test
// process (under the race detector), and eight writ-hook processes ask it
// at once. Each call is permitted exactly once, each with its own grant.
func TestWritHookConcurrentHostedHooks(t *testing.T) {
	cleanEnv(t)
	t.Setenv(worker.EnvStateDir, t.TempDir())
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	cfg := writeJSON(t, t.TempDir(), "w1.json", workerConfigFor(env.URL))
	sockDir, err := os.MkdirTemp("", "wtc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "w1.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--config", cfg, "--socket", socket}, strings.NewReader(""), &logs, &logs, nil)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testenv.WaitFor(t, testenv.SetupTimeout, "the sidecar socket", func() bool {
		return strings.Contains(logs.String(), "serving worker")
	})
	alone := filepath.Join(thinDir(t, false), "writ-hook")
	const n = 8
	results := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "conc", "tool_use_id": fmt.Sprint("toolu_conc_", i)})
			cmd := exec.Command(alone, "hook", "claude-code", "--config", cfg, "--socket", socket)
			cmd.Env = os.Environ()
			cmd.Stdin = bytes.NewReader(in)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			results[i] = fmt.Sprint(err, " ", out.String())
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r != "<nil> " {
			t.Errorf("hook %d: %s", i, r)
		}
	}
	grantsSeen := map[string]bool{}
	for _, e := range receipts(t, env) {
		if e.Kind == events.KindPermit && e.Session == "conc" {
			grantsSeen[e.GrantID] = true
		}
	}
	if len(grantsSeen) != n {
		t.Fatalf("%d distinct permits, want %d", len(grantsSeen), n)
	}
}

// A sidecar that stops answering (paused here with SIGSTOP; a stuck or
// swapped-out process looks the same) costs writ-hook a second: it then
// runs worker-agent with --socket=none, which connects directly instead
// of waiting for the same sidecar until its deadline and blocking.
func TestWritHookAroundAStalledSidecar(t *testing.T) {
	w := newThinWorld(t)
	both := filepath.Join(thinDir(t, true), "writ-hook")
	sc := startSidecarIn(t, w.home, w.cfgs["good"], w.socket)
	if err := sc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if r := w.hook(t, both, "good", "stalled-1", "pre_bash.json"); r.code != 0 || r.stdout != "" {
		t.Fatalf("with the sidecar stopped: %+v", r)
	}
	// --socket none connects directly; a sidecar cannot serve none.
	in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "stalled-3"})
	if r := (binRun{dir: w.home, stdin: in}).run(t, "hook", "claude-code", "--config", w.cfgs["good"], "--socket", "none"); r.code != 0 {
		t.Fatalf("--socket none: %+v", r)
	}
	if r := (binRun{dir: w.home}).run(t, "run", "--config", w.cfgs["good"], "--socket", "none"); r.code != 2 || !strings.Contains(r.stderr, "needs a socket") {
		t.Fatalf("run --socket none: %+v", r)
	}
	evs := receipts(t, w.env)
	for s, want := range map[string]string{"stalled-1": "w1/permit", "stalled-3": "w1/permit"} {
		if got := strings.Join(decided(evs, s), ","); got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
}
