package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/worker"
)

type doctorReport struct {
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

// doctorCheck is one line of doctor's JSON report.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// doctorJSON runs doctor --json and decodes its report.
func doctorJSON(t *testing.T, args ...string) (doctorReport, result) {
	t.Helper()
	r := runCLI(t, "", append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%+v", err, r)
	}
	if rep.OK != (r.code == 0) || (r.code != 0 && r.code != worker.ExitDoctor) {
		t.Fatalf("ok %v with exit %d", rep.OK, r.code)
	}
	return rep, r
}

func (rep doctorReport) status() map[string]doctorCheck {
	out := map[string]doctorCheck{}
	for _, c := range rep.Checks {
		out[c.Name] = c
	}
	return out
}

// copyBinary puts a copy of the built worker-agent in a directory of its
// own, so a test can delete or replace it.
func copyBinary(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(builtBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "worker-agent")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoctor(t *testing.T) {
	isolateInstall(t)
	bin := copyBinary(t) // built before any deadline starts
	env := testenv.StartSingle(t, t.TempDir(), nil)
	dir := t.TempDir()
	good := writeJSON(t, dir, "w1.json", workerConfigFor(env.URL))
	project := t.TempDir()
	if r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", bin, "--config", good); r.code != 0 {
		t.Fatalf("install: %+v", r)
	}

	// Everything in place: every check passes, one line each.
	rep, _ := doctorJSON(t, "claude-code", "--project", project)
	st := rep.status()
	for _, name := range []string{"hooks claude-code", "config", "credentials", "nats", "issuer"} {
		if st[name].Status != "ok" {
			t.Errorf("%s: %+v", name, st[name])
		}
	}
	if !rep.OK || len(rep.Checks) != 5 || !strings.Contains(st["config"].Detail, good) || !strings.Contains(st["hooks claude-code"].Detail, bin) {
		t.Fatalf("report: %+v", rep)
	}
	text := runCLI(t, "", "doctor", "claude-code", "--project", project)
	if lines := strings.Split(strings.TrimSpace(text.stdout), "\n"); text.code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "ok    hooks claude-code") {
		t.Fatalf("text report: %+v", text)
	}
	// The probe is harmless: the issuer recorded nothing.
	if evs := receipts(t, env); len(evs) != 1 { // the initial policy
		t.Fatalf("doctor left %d receipts: %+v", len(evs), evs)
	}

	// NATS without an issuer, a NATS that is down, a missing config, a
	// password file others can read: each check fails on its own line,
	// naming what to do.
	pw := filepath.Join(dir, "w1.password")
	if err := os.WriteFile(pw, []byte("secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withPW := workerConfigFor(env.URL)
	withPW["nats_user"], withPW["nats_password_file"] = "w1", pw
	// Operator-mode credentials: another worker's, and the worker's own
	// readable by others.
	otherCreds, openCreds := mintCreds(t, dir, "w2", 0o600), mintCreds(t, dir, "w1", 0o644)
	withCreds := func(file string) map[string]any {
		c := workerConfigFor(env.URL)
		c["nats_creds"] = file
		return c
	}
	for _, tc := range []struct {
		name, config, failing string
		want                  []string
		ok                    []string
	}{
		{"NATS without an issuer", writeJSON(t, dir, "noissuer.json", workerConfigFor(startNATS(t))), "issuer", []string{"no issuer listens on writ.api.w1.grant", "issuer serve"}, []string{"nats"}},
		{"NATS down", writeJSON(t, dir, "down.json", workerConfigFor("nats://127.0.0.1:1")), "nats", []string{"cannot connect to NATS", "nats_url"}, []string{"config", "credentials"}},
		{"no config file", filepath.Join(dir, "nope.json"), "config", []string{"nope.json", "no such file"}, nil},
		{"no lane", writeJSON(t, dir, "nolane.json", map[string]any{"worker": "w1", "nats_url": env.URL}), "config", []string{`"lane"`}, nil},
		{"password readable by others", writeJSON(t, dir, "pw.json", withPW), "credentials", []string{"mode 0644", "chmod 600 " + pw}, []string{"config"}},
		{"another worker's creds", writeJSON(t, dir, "other.json", withCreds(otherCreds)), "credentials", []string{`for "w2", not the worker "w1"`, "issuer auth mint --worker w1"}, []string{"config"}},
		{"creds readable by others", writeJSON(t, dir, "open.json", withCreds(openCreds)), "credentials", []string{"mode 0644", "chmod 600 " + openCreds}, []string{"config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, _ := doctorJSON(t, "claude-code", "--project", project, "--config", tc.config)
			st := rep.status()
			c := st[tc.failing]
			if rep.OK || c.Status != "fail" || c.Fix == "" {
				t.Fatalf("%s: %+v", tc.failing, rep)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Detail+" "+c.Fix, w) {
					t.Errorf("%s lacks %q: %+v", tc.failing, w, c)
				}
			}
			for _, name := range append(tc.ok, "hooks claude-code") {
				if st[name].Status != "ok" {
					t.Errorf("%s: %+v", name, st[name])
				}
			}
		})
	}

	// The installed hook: a crashing binary, a deleted one, an entry an
	// older install wrote without the wrapper, no hooks at all.
	hooksFail := func(t *testing.T, want string, args ...string) {
		t.Helper()
		rep, _ := doctorJSON(t, append([]string{"claude-code"}, args...)...)
		c := rep.status()["hooks claude-code"]
		if c.Name == "" {
			c = rep.status()["hooks"]
		}
		if rep.OK || c.Status != "fail" || !strings.Contains(c.Detail, want) || c.Fix == "" {
			t.Fatalf("want the hooks check to fail with %q: %+v", want, rep)
		}
		if rep.status()["issuer"].Status != "ok" {
			t.Fatalf("the other checks: %+v", rep)
		}
	}
	t.Run("crashing binary", func(t *testing.T) {
		_ = os.WriteFile(bin, []byte("#!/bin/sh\necho boom >&2\nexit 1\n"), 0o755)
		hooksFail(t, "does not answer a probe: exit status 2", "--project", project)
	})
	t.Run("deleted binary", func(t *testing.T) {
		_ = os.Remove(bin)
		hooksFail(t, "no such file", "--project", project)
	})
	t.Run("unwrapped command", func(t *testing.T) {
		old, direct := t.TempDir(), copyBinary(t)
		p := filepath.Join(old, ".claude", "settings.json")
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		var b strings.Builder
		b.WriteString(`{"hooks":{`)
		for i, ev := range layouts["claude-code"].events {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + ev + `":[{"hooks":[{"type":"command","command":"` + direct + ` hook claude-code --config ` + good + `"}]}]`)
		}
		b.WriteString("}}")
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
		hooksFail(t, "runs the binary directly", "--project", old)
	})
	t.Run("no hooks", func(t *testing.T) {
		hooksFail(t, "no writ hooks in", "--project", t.TempDir(), "--config", good)
	})
}

// With NATS authentication: the right password passes, a wrong one fails
// the NATS check and says so.
func TestDoctorWithCredentials(t *testing.T) {
	isolateInstall(t)
	env := testenv.StartSingleAuth(t, t.TempDir(), []natsbus.User{natsbus.WorkerUser("w1", "pw1")}, nil)
	dir := t.TempDir()
	cfgFor := func(name, password string) string {
		pw := filepath.Join(dir, name+".password")
		if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c := workerConfigFor(env.URL)
		c["nats_user"], c["nats_password_file"] = "w1", pw
		return writeJSON(t, dir, name+".json", c)
	}
	rep, _ := doctorJSON(t, "--config", cfgFor("good", "pw1"), "--project", t.TempDir())
	st := rep.status()
	for _, name := range []string{"config", "credentials", "nats", "issuer"} {
		if st[name].Status != "ok" {
			t.Errorf("%s: %+v", name, st[name])
		}
	}
	if !strings.Contains(st["credentials"].Detail, "user w1") || st["hooks"].Status != "fail" {
		t.Fatalf("%+v", rep)
	}
	rep, _ = doctorJSON(t, "--config", cfgFor("bad", "nope"), "--project", t.TempDir())
	if c := rep.status()["nats"]; c.Status != "fail" || !strings.Contains(strings.ToLower(c.Detail), "authorization") {
		t.Fatalf("wrong password: %+v", rep)
	}
}

// mintCreds writes a worker's operator-mode credentials file with mode.
func mintCreds(t *testing.T, dir, worker string, mode os.FileMode) string {
	t.Helper()
	authDir := filepath.Join(t.TempDir(), "auth")
	if _, err := natsauth.Init(authDir, natsauth.DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	a, err := natsauth.Load(authDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.MintWorker(worker, 0, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Creds()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("%s-%o.creds", worker, mode))
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// An entry that runs writ-hook passes doctor, its probe answered through
// worker-agent beside it; without that worker-agent doctor fails, since
// every event the sidecar does not take would then be blocked.
func TestDoctorThinClient(t *testing.T) {
	isolateInstall(t)
	dir := thinDir(t, true)
	env := testenv.StartSingle(t, t.TempDir(), nil)
	good := writeJSON(t, t.TempDir(), "w1.json", workerConfigFor(env.URL))
	project := t.TempDir()
	if r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", filepath.Join(dir, "worker-agent"), "--config", good); r.code != 0 || !strings.Contains(r.stdout, "writ-hook") {
		t.Fatalf("install: %+v", r)
	}
	rep, _ := doctorJSON(t, "claude-code", "--project", project)
	if c := rep.status()["hooks claude-code"]; !rep.OK || c.Status != "ok" || !strings.Contains(c.Detail, filepath.Join(dir, "writ-hook")) ||
		!strings.Contains(c.Detail, "no sidecar on") {
		t.Fatalf("report: %+v", rep)
	}
	// With the sidecar running: doctor from the sidecar's environment sees
	// it run hooks; from another environment (this process's home), it
	// sees the sidecar decline them, and says why. Neither is a failure.
	stateDir := os.Getenv(worker.EnvStateDir)
	home, same := t.TempDir(), []string{worker.EnvStateDir + "=" + stateDir}
	startSidecarIn(t, home, good, filepath.Join(stateDir, "worker-w1.sock"), same...)
	r := binRun{dir: home, env: same}.run(t, "doctor", "--json", "claude-code", "--project", project)
	var fromSame doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &fromSame); err != nil {
		t.Fatalf("%v: %+v", err, r)
	}
	if c := fromSame.status()["hooks claude-code"]; !fromSame.OK || !strings.Contains(c.Detail, "runs hooks from this environment") {
		t.Fatalf("doctor from the sidecar's environment: %+v", fromSame)
	}
	rep, _ = doctorJSON(t, "claude-code", "--project", project)
	if c := rep.status()["hooks claude-code"]; !rep.OK || !strings.Contains(c.Detail, "declines hooks from this environment") || !strings.Contains(c.Detail, "HOME") {
		t.Fatalf("doctor from another environment: %+v", rep)
	}
	if err := os.Remove(filepath.Join(dir, "worker-agent")); err != nil {
		t.Fatal(err)
	}
	rep, _ = doctorJSON(t, "claude-code", "--project", project)
	if c := rep.status()["hooks claude-code"]; rep.OK || c.Status != "fail" || !strings.Contains(c.Detail, "needs "+filepath.Join(dir, "worker-agent")) {
		t.Fatalf("report without worker-agent: %+v", rep)
	}
}
