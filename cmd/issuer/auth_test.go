package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsauth"
)

func TestAuthInitAndMint(t *testing.T) {
	cleanEnv(t)
	t.Setenv(EnvAuthDir, "")
	dir := filepath.Join(t.TempDir(), "auth")

	r := runCLI(t, "auth", "init", "--dir", dir, "--json")
	if r.code != exitOK {
		t.Fatalf("auth init: %s", r)
	}
	var res natsauth.InitResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Account == "" {
		t.Fatalf("auth init --json printed %q: %v", r.stdout, err)
	}
	if r := runCLI(t, "auth", "init", "--dir", dir); r.code != exitRefused || !strings.Contains(r.stderr, "never overwrites") {
		t.Fatalf("second auth init: %s", r)
	}

	out := filepath.Join(t.TempDir(), "w1.creds")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dir", []string{"--worker", "w1", "--ttl", "1h"}, "--dir is required"},
		{"no ttl", []string{"--dir", dir, "--worker", "w1"}, "--ttl is required"},
		{"worker without expiry", []string{"--dir", dir, "--worker", "w1", "--no-expiry"}, "must expire"},
		{"two identities", []string{"--dir", dir, "--worker", "w1", "--auditor", "a", "--ttl", "1h"}, "exactly one"},
		{"incarnation of an auditor", []string{"--dir", dir, "--auditor", "a", "--incarnation", "2", "--ttl", "1h"}, "--worker only"},
		{"name with a dot", []string{"--dir", dir, "--worker", "w1.x", "--ttl", "1h"}, "w1.x"},
		{"not an auth dir", []string{"--dir", t.TempDir(), "--worker", "w1", "--ttl", "1h"}, "issuer auth init"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"auth", "mint"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want usage error mentioning %q: %s", tc.want, r)
			}
		})
	}

	r = runCLI(t, "auth", "mint", "--dir", dir, "--worker", "w1", "--incarnation", "3", "--ttl", "1h", "--out", out, "--json")
	if r.code != exitOK {
		t.Fatalf("auth mint: %s", r)
	}
	var m struct {
		Role, Name, UserKey, CredsFile string
		Incarnation                    uint64
		Publish                        []string
		Expires                        time.Time
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.ReplaceAll(r.stdout, `"user_key"`, `"userkey"`), `"creds_file"`, `"credsfile"`)), &m); err != nil {
		t.Fatal(err)
	}
	if m.Role != "worker" || m.Name != "w1" || m.Incarnation != 3 || m.CredsFile != out || len(m.Publish) != 1 || m.Publish[0] != "writ.api.w1.>" ||
		time.Until(m.Expires) < 59*time.Minute || time.Until(m.Expires) > time.Hour {
		t.Fatalf("auth mint --json: %+v", m)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Fatalf("creds file mode %04o", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(out)
	tok, err := jwt.ParseDecoratedJWT(raw)
	if err != nil {
		t.Fatal(err)
	}
	if uc, err := jwt.DecodeUserClaims(tok); err != nil || uc.Subject != m.UserKey {
		t.Fatalf("creds file JWT: %v", err)
	}
	if r := runCLI(t, "auth", "mint", "--dir", dir, "--worker", "w1", "--ttl", "1h", "--out", out); r.code != exitRefused {
		t.Fatalf("mint over an existing file: %s", r)
	}
	if after, _ := os.ReadFile(out); string(after) != string(raw) {
		t.Fatal("mint overwrote a creds file")
	}
	// Without --out the creds go to stdout and the description to stderr.
	r = runCLI(t, "auth", "mint", "--dir", dir, "--auditor", "aud", "--no-expiry")
	if r.code != exitOK || !strings.Contains(r.stdout, "BEGIN NATS USER JWT") || !strings.Contains(r.stderr, "never expires") {
		t.Fatalf("auth mint to stdout: %s", r)
	}
}

// TestServeOperatorModeProcess runs a real issuer process in operator mode:
// the operator's and a worker's minted credentials work; the worker cannot
// publish under another worker's subject (NATS refuses it); an expired
// credential is dropped and refused; `issuer auth revoke` drops the
// worker's open connection and refuses it at connect, while the worker's
// next incarnation works.
func TestServeOperatorModeProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the issuer binary")
	}
	cleanEnv(t)
	bin := issuerBinary(t)
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

	revFile := filepath.Join(tmp, "reviewers.json")
	if err := os.WriteFile(revFile, []byte(`{"reviewers":[{"name":"dana","roles":["finance"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	natsPort := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	p := startServe(t, bin, "--node-id", "n1", "--data-dir", filepath.Join(tmp, "data"), "--nats-port", fmt.Sprint(natsPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--nats-operator-dir", dir, "--reviewers", revFile, "--log-level", "warn")
	st := p.waitReady(t, url, testenv.SetupTimeout)
	if !st.Auth {
		t.Error("status does not report authentication")
	}
	// Without credentials nothing connects.
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("anonymous client connected to an operator-mode issuer")
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
	// The issuer answers a worker's request on its own subject (here with
	// a refusal of the empty request: what matters is that it answered).
	answered := func(c *conn, worker string) error {
		_, err := c.Request("writ.api."+worker+".grant", []byte("{}"), 5*time.Second)
		return err
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

	// Reviewers: dana (in --reviewers) reaches the review logic; eve,
	// with a valid credential but not configured, is refused by the issuer.
	for _, tc := range []struct{ name, want string }{{"dana", "unknown_review"}, {"eve", "no reviewer eve is configured"}} {
		cf := mintFile("--reviewer", tc.name, "--ttl", "1h")
		r := runCLI(t, "review", "approve", "rv-0123456789abcdef0123", "--as-reviewer", tc.name, "--nats-url", url, "--nats-creds", cf)
		if r.code != exitRefused || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Fatalf("reviewer %s deciding an unknown review: want refused with %q: %s", tc.name, tc.want, r)
		}
	}

	w1File := mintFile("--worker", "w1", "--ttl", "1h")
	w1 := mustDial(w1File, "w1")
	if err := answered(w1, "w1"); err != nil {
		t.Fatalf("w1 on its own subject: %v", err)
	}
	if err := w1.Publish("writ.api.w2.grant", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w1.errs:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), "writ.api.w2.grant") {
			t.Fatalf("w1 publishing as w2: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("w1 publishing as w2: no permissions violation")
	}

	// Expiry: dropped at its expiry, refused at connect from the next second.
	short := mintFile("--worker", "w3", "--ttl", "2s")
	w3 := mustDial(short, "w3")
	closedWithin(w3, "expired credential", 10*time.Second)
	// JWT times have one-second resolution: from the second after its
	// expiry on, the server refuses the JWT at connect.
	raw, _ := os.ReadFile(short)
	tok, _ := jwt.ParseDecoratedJWT(raw)
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(time.Unix(uc.Expires+1, 0))) // the end of a known second, not a poll
	refused(short, "w3")

	// Revocation through the CLI.
	r := runCLI(t, "auth", "revoke", "--dir", dir, "--worker", "w1", "--nats-url", url, "--json")
	if r.code != exitOK {
		t.Fatalf("auth revoke: %s", r)
	}
	var rev natsauth.Revocation
	if err := json.Unmarshal([]byte(r.stdout), &rev); err != nil || len(rev.Servers) != 1 || rev.Servers[0] != "n1" {
		t.Fatalf("auth revoke --json printed %q: %v", r.stdout, err)
	}
	closedWithin(w1, "revoked worker", 5*time.Second)
	refused(w1File, "w1")
	next := mustDial(mintFile("--worker", "w1", "--incarnation", "1", "--ttl", "1h"), "w1")
	if err := answered(next, "w1"); err != nil {
		t.Fatalf("w1's next incarnation: %v", err)
	}
	p.stop(t)

	// The revocation outlives a restart: the resolver keeps the newer JWT.
	p2 := startServe(t, bin, "--node-id", "n1", "--data-dir", filepath.Join(tmp, "data"), "--nats-port", fmt.Sprint(natsPort),
		"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--nats-operator-dir", dir, "--log-level", "warn")
	p2.waitReady(t, url, testenv.SetupTimeout)
	refused(w1File, "w1")
	p2.stop(t)
}

func TestLoadReviewers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ok", `{"reviewers":[{"name":"dana","roles":["finance"]},{"name":"lee"}]}`, ""},
		{"unknown field", `{"reviewers":[{"name":"dana","password_file":"x"}]}`, "password_file"},
		{"bad name", `{"reviewers":[{"name":"da.na"}]}`, "reviewers[0].name"},
		{"twice", `{"reviewers":[{"name":"dana"},{"name":"dana"}]}`, "twice"},
		{"not json", `reviewers: dana`, "want {"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := loadReviewers(p)
			if tc.want == "" {
				if err != nil || len(got["dana"]) != 1 || got["dana"][0] != "finance" || got["lee"] == nil {
					t.Fatalf("loadReviewers: %v %v", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
}
