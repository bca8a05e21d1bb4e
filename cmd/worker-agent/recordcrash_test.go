package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// A PreToolUse hook killed while the issuer is deciding (SIGKILL: no
// cleanup of any kind) may have had its permit delivered for all anyone
// knows, so the call's repeat is blocked: the call's record said
// "pending", durably, before the request left. A refused call's record
// is emptied again, so its repeat is asked as usual.
func TestKilledPreToolUseBlocksItsRepeat(t *testing.T) {
	cleanEnv(t)
	bin := builtBinary(t)
	home := t.TempDir()
	calls := filepath.Join(home, "state", "writ", "calls")
	event := fixture(t, "claude-code/pre_bash.json")

	// A NATS server where the API subject is heard and never answered:
	// the hook waits on its request until it is killed.
	srv := testenv.StartNATS(t, false)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	heard := make(chan struct{}, 1)
	hear := func(*nats.Msg) {
		select { // the hook's retries need not be counted
		case heard <- struct{}{}:
		default:
		}
	}
	if _, err := nc.Subscribe("writ.api.>", hear); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	silent := writeJSON(t, home, "silent.json", workerConfigFor(srv.ClientURL()))
	cmd := exec.Command(bin, "hook", "claude-code", "--config", silent, "--socket", "none")
	cmd.Dir, cmd.Env, cmd.Stdin = home, binEnv(home), bytes.NewReader(event)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(testenv.SetupTimeout):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the hook never asked the issuer: %s", errb.String())
	}
	// The request is out and its record written (the write may trail the
	// request by a moment; its fsync is what a permit waits for): kill
	// the hook before any answer.
	record := func() string {
		ents, err := os.ReadDir(calls)
		if err != nil || len(ents) != 1 {
			return ""
		}
		b, _ := os.ReadFile(filepath.Join(calls, ents[0].Name()))
		return string(b)
	}
	testenv.WaitFor(t, testenv.SetupTimeout, "the call's pending record", func() bool { return record() == "pending\n" })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if got := record(); got != "pending\n" {
		t.Fatalf("the killed hook's record reads %q, want pending", got)
	}

	// The same event against a working issuer is blocked, not permitted.
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	cfg := writeJSON(t, home, "w.json", workerConfigFor(env.URL))
	repeat := binRun{dir: home, stdin: event}.run(t, "hook", "claude-code", "--config", cfg, "--socket", "none")
	if repeat.code != 2 || !strings.Contains(repeat.stderr, "stopped after asking the issuer") || strings.Contains(repeat.stdout, "allow") {
		t.Fatalf("the repeat of a killed hook's call: %+v", repeat)
	}

	// A refused call (the issuer unreachable) leaves no record: asked again.
	other := bytes.Replace(event, []byte(`"tool_use_id": "`), []byte(`"tool_use_id": "x`), 1)
	down := writeJSON(t, home, "down.json", workerConfigFor("nats://127.0.0.1:1"))
	if r := (binRun{dir: home, stdin: other}).run(t, "hook", "claude-code", "--config", down, "--socket", "none", "--deadline", "2s"); r.code != 2 {
		t.Fatalf("issuer down: %+v", r)
	}
	if r := (binRun{dir: home, stdin: other}).run(t, "hook", "claude-code", "--config", cfg, "--socket", "none"); r.code != 0 || strings.Contains(r.stderr, "permitted") {
		t.Fatalf("a blocked call asked again: %+v", r)
	}
}
