package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestSpawnedChildCredentials runs an issuer process in NATS operator mode
// and worker-agent processes that spawn children, and checks what NATS
// itself enforces on each child's own credential:
//   - (a) a child's credential reaches the issuer on its own subject, and
//     NATS refuses it (permissions violation, before the issuer sees a
//     byte) on its parent's subject; the command a spawn runs gets the
//     child's .creds file, not the parent's, and it is gone afterwards;
//   - (b) once the child's lifetime ends, NATS drops the connection and
//     refuses the credential at connect;
//   - a child that restores a checkpoint loses the credential of its
//     first incarnation;
//   - a Claude Code subagent's calls are made with the credential of its
//     child worker, which the hook keeps in its state directory;
//   - (c) after `issuer revoke --worker <parent>`, NATS drops the open
//     connections of the parent's children (the subagent's too) and
//     grandchild and refuses their credentials at connect.
func TestSpawnedChildCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the issuer and worker-agent binaries")
	}
	cleanEnv(t)
	bin := issuerBinary(t)
	agent, err := bins.Path("github.com/writ-dev/writ/cmd/worker-agent")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "auth")
	if r := runCLI(t, "auth", "init", "--dir", dir); r.code != exitOK {
		t.Fatalf("auth init: %s", r)
	}
	mintFile := func(args ...string) string {
		t.Helper()
		out := filepath.Join(tmp, fmt.Sprintf("c%d.creds", time.Now().UnixNano()))
		if r := runCLI(t, append([]string{"auth", "mint", "--dir", dir, "--out", out}, args...)...); r.code != exitOK {
			t.Fatalf("auth mint %v: %s", args, r)
		}
		return out
	}
	ops := mintFile("--operator", "ops", "--ttl", "1h")
	t.Setenv("WRIT_NATS_CREDS", ops)
	w1File := mintFile("--worker", "w1", "--ttl", "1h")

	natsPort := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	p := startServe(t, bin, "--node-id", "n1", "--data-dir", filepath.Join(tmp, "data"), "--nats-port", fmt.Sprint(natsPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--nats-operator-dir", dir, "--log-level", "warn")
	p.waitReady(t, url, testenv.SetupTimeout)
	deadline := time.Now().Add(testenv.SetupTimeout)
	for {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := run(ctx, []string{"status", "--json", "--nats-url", url, "--timeout", "1s"}, &out, &errb)
		cancel()
		var st api.Status
		if err == nil && json.Unmarshal(out.Bytes(), &st) == nil && st.ReceiptFormatLevel >= fsm.ReceiptFormatWorkerKeys {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipt format level 12 not reached: %v %s %s", err, out.String(), errb.String())
		}
		time.Sleep(100 * time.Millisecond) // poll interval under the deadline above
	}

	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	// spawn runs `worker-agent spawn` as the worker whose credentials
	// file is creds, and returns its envelope and output.
	spawn := func(creds, worker string, args ...string) (grants.Envelope, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, agent, append([]string{"spawn", "--worker", worker, "--nats-url", url, "--nats-creds", creds,
			"--timeout", "10s"}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("worker-agent spawn: %v", err)
		}
		var env grants.Envelope
		first, _, _ := strings.Cut(out.String(), "\n")
		_ = json.Unmarshal([]byte(first), &env)
		return env, out.String() + errb.String(), code
	}

	type conn = credsConn
	dial := func(file, name string) (*conn, error) { return dialCreds(t, url, file, name) }
	mustDial := func(file, name string) *conn {
		t.Helper()
		c, err := dial(file, name)
		if err != nil {
			t.Fatalf("connect as %s: %v", name, err)
		}
		return c
	}
	refused := func(file, name string) {
		t.Helper()
		c, err := dial(file, name)
		if err == nil {
			c.Close()
			t.Fatalf("%s connected; want refused", name)
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Fatalf("%s: %v; want an authorization violation", name, err)
		}
	}
	closedWithin := func(c *conn, what string, d time.Duration) {
		t.Helper()
		select {
		case <-c.closed:
		case <-time.After(d):
			t.Fatalf("%s: connection still open after %s", what, d)
		}
	}
	userJWT := func(file string) *jwt.UserClaims {
		t.Helper()
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.ParseDecoratedJWT(raw)
		if err != nil {
			t.Fatal(err)
		}
		uc, err := jwt.DecodeUserClaims(tok)
		if err != nil {
			t.Fatal(err)
		}
		return uc
	}

	// (a) The child's own credential: its subject only.
	aFile := filepath.Join(tmp, "w1-a.creds")
	env, out, code := spawn(w1File, "w1", "--lane", "isolated", "--child", "w1-a", "--ttl", "30m", "--creds-out", aFile)
	if code != 0 || env.Decision != grants.Permit || env.UserJWT == "" {
		t.Fatalf("spawn w1-a: exit %d\n%s", code, out)
	}
	if st, err := os.Stat(aFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("w1-a's creds file: %v %v", st, err)
	}
	if uc := userJWT(aFile); uc.Name != "w1-a" || uc.Expires > env.ExpiresAt/int64(time.Second) || uc.Expires < env.ExpiresAt/int64(time.Second)-1 {
		t.Fatalf("w1-a's JWT: name %q expires %d, child ends %d", uc.Name, uc.Expires, env.ExpiresAt)
	}
	if strings.Contains(out, "SUAA") || strings.Contains(out, "SEED") {
		t.Fatalf("the spawn's output holds a seed:\n%s", out)
	}
	a := mustDial(aFile, "w1-a")
	if _, err := a.Request("writ.api.w1-a.grant", []byte("{}"), 5*time.Second); err != nil {
		t.Fatalf("w1-a on its own subject: %v", err)
	}
	if err := a.Publish("writ.api.w1.grant", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.errs:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "writ.api.w1.grant") {
			t.Fatalf("w1-a publishing as its parent: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("w1-a publishing as its parent: no permissions violation")
	}
	// The grandchild, spawned by the child with its own credential.
	axFile := filepath.Join(tmp, "w1-a-x.creds")
	if env, out, code := spawn(aFile, "w1-a", "--lane", "isolated", "--child", "w1-a-x", "--ttl", "20m", "--creds-out", axFile); code != 0 || env.UserJWT == "" {
		t.Fatalf("spawn w1-a-x: exit %d\n%s", code, out)
	}
	ax := mustDial(axFile, "w1-a-x")

	// A command run as the child gets the child's credential, removed
	// when it exits.
	env, out, code = spawn(w1File, "w1", "--lane", "isolated", "--child", "w1-cmd", "--ttl", "30m", "--",
		"sh", "-c", `echo "creds=$WRIT_NATS_CREDS"; head -n 1 "$WRIT_NATS_CREDS"`)
	if code != 0 || !strings.Contains(out, "-----BEGIN NATS USER JWT-----") {
		t.Fatalf("spawn with a command: exit %d\n%s", code, out)
	}
	_, rest, _ := strings.Cut(out, "creds=")
	cmdCreds, _, _ := strings.Cut(rest, "\n")
	if cmdCreds == "" || cmdCreds == w1File {
		t.Fatalf("the command's credential is %q", cmdCreds)
	}
	if _, err := os.Stat(cmdCreds); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the child's creds file %s outlived the command: %v", cmdCreds, err)
	}

	// (b) Lifetime: dropped at the child's end, refused from the next
	// second on.
	bFile := filepath.Join(tmp, "w1-b.creds")
	if env, out, code := spawn(w1File, "w1", "--lane", "isolated", "--child", "w1-b", "--ttl", "3s", "--creds-out", bFile); code != 0 || env.UserJWT == "" {
		t.Fatalf("spawn w1-b: exit %d\n%s", code, out)
	}
	b := mustDial(bFile, "w1-b")
	closedWithin(b, "w1-b at the end of its lifetime", 15*time.Second)
	time.Sleep(time.Until(time.Unix(userJWT(bFile).Expires+1, 0))) // the end of a known second, not a poll
	refused(bFile, "w1-b")

	// A restore moves the child past the incarnation its key belongs to:
	// its credential is revoked too.
	rFile := filepath.Join(tmp, "w1-r.creds")
	if env, out, code := spawn(w1File, "w1", "--lane", "isolated", "--child", "w1-r", "--ttl", "30m", "--creds-out", rFile); code != 0 || env.UserJWT == "" {
		t.Fatalf("spawn w1-r: exit %d\n%s", code, out)
	}
	r := mustDial(rFile, "w1-r")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if env, err := client.New(r.Conn, "w1-r").Restore(ctx); err != nil || env.Decision != grants.Permit || env.Incarnation != 2 {
		t.Fatalf("w1-r restores: %+v %v", env, err)
	}
	closedWithin(r, "w1-r after its restore", 20*time.Second)
	refused(rFile, "w1-r")

	// A Claude Code subagent of w1 is a child worker with a credential of
	// its own, kept in the hook's state directory.
	stateDir := filepath.Join(tmp, "state")
	cfgFile := filepath.Join(tmp, "worker.json")
	cfgDoc, _ := json.Marshal(map[string]any{"worker": "w1", "lane": "coordinator", "subagents": map[string]string{"Explore": "isolated"},
		"nats_url": url, "nats_creds": w1File})
	if err := os.WriteFile(cfgFile, cfgDoc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "README.md"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := func(toolUse string) (string, int) {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"session_id": "sess-1", "cwd": tmp, "hook_event_name": "PreToolUse", "tool_name": "Read",
			"tool_input": map[string]any{"file_path": filepath.Join(tmp, "README.md")}, "tool_use_id": toolUse,
			"agent_id": "agent_1", "agent_type": "Explore", "permission_mode": "default", "transcript_path": filepath.Join(tmp, "t.jsonl")})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, agent, "hook", "claude-code", "--config", cfgFile)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp, "WRIT_STATE_DIR=" + stateDir}
		cmd.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String() + errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatalf("hook: %v", err)
		}
		return out.String() + errb.String(), 0
	}
	if out, code := hook("toolu_1"); code != 0 || out != "" {
		t.Fatalf("the subagent's read: exit %d\n%s", code, out)
	}
	saChild := "w1-sa-"
	matches, _ := filepath.Glob(filepath.Join(stateDir, "fleet", saChild+"*.creds"))
	if len(matches) != 1 {
		t.Fatalf("subagent creds files: %v", matches)
	}
	saFile := matches[0]
	saName := strings.TrimSuffix(filepath.Base(saFile), ".creds")
	if uc := userJWT(saFile); uc.Name != saName {
		t.Fatalf("the subagent's JWT names %q, want %q", uc.Name, saName)
	}
	if st, err := os.Stat(saFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the subagent's creds file: %v %v", st, err)
	}
	sa := mustDial(saFile, saName)

	// (c) Revoking the parent revokes the child's and the grandchild's
	// NATS users on the server.
	if r := runCLI(t, "revoke", "--worker", "w1", "--nats-url", url); r.code != exitOK {
		t.Fatalf("revoke --worker w1: %s", r)
	}
	closedWithin(a, "w1-a after its parent's revocation", 20*time.Second)
	closedWithin(ax, "w1-a-x after its grandparent's revocation", 5*time.Second)
	closedWithin(sa, "the subagent's child after its parent's revocation", 5*time.Second)
	refused(aFile, "w1-a")
	refused(axFile, "w1-a-x")
	refused(saFile, saName)
	if out, code := hook("toolu_2"); code == 0 && out == "" {
		t.Fatal("the revoked subagent's read was permitted")
	}
	p.stop(t)
}
