package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/worker"
)

// worker-agent spawn and checkpoint against a real issuer: a spawned
// child runs a command under its own identity and lane, a widening spawn
// exits 10 naming the field, and a checkpoint restore leaves the old
// incarnation's grant unspendable (grant_revoked naming the incarnation)
// while the bundle comes back as history.
func TestSpawnAndCheckpointCLI(t *testing.T) {
	cleanEnv(t)
	t.Setenv(worker.EnvSpawned, "")
	t.Setenv(worker.EnvSpawnedLane, "")
	env := testenv.StartSingle(t, t.TempDir(), nil)
	testenv.WaitFor(t, testenv.SetupTimeout, "receipt format 8", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatFleet
	})
	conn := []string{"--nats-url", env.URL, "--timeout", "10s"}

	r := runCLI(t, "", append(conn, "spawn", "--worker", "lead-1", "--lane", "isolated", "--parent-lane", "coordinator",
		"--child", "lead-1-scout", "--tools", "Read,Grep", "--", "sh", "-c", `echo "$WRIT_WORKER $WRIT_SPAWNED_LANE $WRIT_PARENT_WORKER $WRIT_INCARNATION"`)...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "lead-1-scout isolated lead-1 1" || !strings.Contains(r.stderr, "spawned lead-1-scout") {
		t.Fatalf("spawn with a command: %+v", r)
	}
	// A hook inside the spawned child acts as the child in its lane, even
	// with the parent's worker config: the child's Bash call is outside
	// its spawn scope.
	dir0 := t.TempDir()
	parentCfg := writeJSON(t, dir0, "worker.json", map[string]any{"worker": "lead-1", "lane": "specialist", "nats_url": env.URL})
	t.Setenv(worker.EnvSpawned, "lead-1-scout")
	t.Setenv(worker.EnvSpawnedLane, "isolated")
	in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "spawned-1"})
	if r := runCLI(t, string(in), "hook", "claude-code", "--config", parentCfg, "--state-dir", dir0); r.code != 0 || !strings.Contains(r.stdout, `"deny"`) {
		t.Fatalf("hook inside the child: %+v", r)
	}
	if r := runCLI(t, string(in), "hook", "claude-code", "--config", parentCfg, "--state-dir", dir0, "--worker", "lead-1"); r.code != 2 {
		t.Fatalf("hook inside the child naming the parent: %+v", r)
	}
	t.Setenv(worker.EnvSpawned, "")
	t.Setenv(worker.EnvSpawnedLane, "")
	found := false
	for _, e := range receipts(t, env) {
		if e.Session == "spawned-1" && e.Kind == events.KindDeny {
			found = e.Worker == "lead-1-scout" && e.Lane == "isolated" && e.Reason == string(grants.ReasonScopeWidens)
		}
	}
	if !found {
		t.Fatal("no scope_widens refusal of the child's hook call")
	}
	r = runCLI(t, "", append(conn, "spawn", "--worker", "lead-1-scout", "--lane", "isolated", "--tools", "Bash")...)
	var env1 grants.Envelope
	if r.code != ExitDeny || json.Unmarshal([]byte(r.stdout), &env1) != nil || env1.Reason != grants.ReasonScopeWidens || env1.Missing != "tools" {
		t.Fatalf("widening spawn: %+v", r)
	}
	if r := runCLI(t, "", append(conn, "spawn", "--worker", "lead-1", "--lane", "isolated", "--ttl", "48h")...); r.code != ExitUsage {
		t.Fatalf("spawn with a ttl past 24h: %+v", r)
	}

	dir := t.TempDir()
	r = runCLI(t, "", append(conn, "request", "--worker", "solo-2", "--lane", "specialist", "--tool", "Read",
		"--args", `{"file_path":"/tmp/x/a.md"}`)...)
	var g grants.Envelope
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil || g.GrantID == "" {
		t.Fatalf("request: %+v", r)
	}
	art := filepath.Join(dir, "report.md")
	if err := os.WriteFile(art, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "solo-2.ckpt")
	r = runCLI(t, "", "checkpoint", "save", "--worker", "solo-2", "--out", bundle, "--task", "write the report",
		"--artifact", art, "--review", "report_v1_review", "--target", "path:/tmp/x/a.md", "--staged", "send_email=bob@example.com", "--grant", g.GrantID)
	if r.code != 0 {
		t.Fatalf("save: %+v", r)
	}
	if st, err := os.Stat(bundle); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("bundle: %v %v", st, err)
	}
	if err := os.WriteFile(art, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", append(conn, "checkpoint", "restore", "--worker", "other-9", bundle)...); r.code != ExitUsage {
		t.Fatalf("restore into another worker: %+v", r)
	}
	r = runCLI(t, "", append(conn, "checkpoint", "restore", "--worker", "solo-2", bundle)...)
	var rs worker.Restored
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rs) != nil || rs.Incarnation != 1 || len(rs.Artifacts) != 1 ||
		rs.Artifacts[0].State != "changed" || len(rs.DeadGrants) != 1 || len(rs.Staged) != 1 {
		t.Fatalf("restore: %+v %+v", r, rs)
	}
	r = runCLI(t, "", append(conn, "spend", g.GrantID, "--worker", "solo-2", "--args", `{"file_path":"/tmp/x/a.md"}`)...)
	var sp grants.Envelope
	if r.code != ExitDeny || json.Unmarshal([]byte(r.stdout), &sp) != nil || sp.Reason != grants.ReasonGrantRevoked || !strings.Contains(sp.Detail, "incarnation 0") {
		t.Fatalf("spend of the old incarnation's grant: %+v", r)
	}
	// A bundle with a field this build does not know is refused.
	raw, _ := os.ReadFile(bundle)
	tampered := filepath.Join(dir, "tampered.ckpt")
	if err := os.WriteFile(tampered, []byte(strings.Replace(string(raw), `"kind"`, `"grant_id":"g1","kind"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", append(conn, "checkpoint", "restore", "--worker", "solo-2", tampered)...); r.code != ExitUsage {
		t.Fatalf("tampered bundle: %+v", r)
	}
}
