package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
	"github.com/writ-dev/writ/worker"
)

// A main session's Task call is judged as the spawn of the subagent it
// would start, through the hook binary and a real issuer: the Explore and
// general-purpose subagents run as the children spawned at their Task
// calls, each in its type's lane and (general-purpose) narrower targets;
// a Task whose type's lane is wider than the session's, or that maps to no
// lane, is blocked before any subagent exists; the subagents' widening
// calls are refused; revoking the session's worker stops the subagents'
// next calls.
func TestTaskCallSpawnsTheSubagent(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.InitialPolicy = policy.Recommended().Canonical()
	})
	testenv.WaitFor(t, 10*time.Second, "receipt format with fleets", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatFleet
	})
	dir := t.TempDir()
	main := workerConfigFor(env.URL)
	main["subagents"] = map[string]any{
		"Explore":         "isolated",
		"general-purpose": map[string]any{"lane": "specialist", "targets": []string{"path:/home/dev/shop/src/*"}, "ttl": "1h"},
	}
	cfg := writeJSON(t, dir, "worker.json", main)
	// A session whose own lane is narrower than the Explore type's.
	narrow := workerConfigFor(env.URL)
	narrow["lane"] = "specialist"
	cfgNarrow := writeJSON(t, dir, "narrow.json", narrow)

	const session = "task-1"
	hook := func(t *testing.T, conf string, set map[string]any) result {
		t.Helper()
		set["session_id"] = session
		in := patch(t, fixture(t, "claude-code/pre_bash.json"), set)
		return binRun{stdin: in}.run(t, "hook", "claude-code", "--config", conf, "--state-dir", dir)
	}
	task := func(t *testing.T, conf, id, typ string) result {
		t.Helper()
		return hook(t, conf, map[string]any{"tool_name": "Task", "tool_use_id": id,
			"tool_input": map[string]any{"description": "look around", "prompt": "find the cart code", "subagent_type": typ}})
	}
	spawnOf := func(child string) []events.Event {
		var out []events.Event
		for _, e := range receipts(t, env) {
			if e.Kind == events.KindSpawn && e.Worker == child {
				out = append(out, e)
			}
		}
		return out
	}
	exploreChild := worker.TaskChildID("w1", session, "toolu_task_explore")
	generalChild := worker.TaskChildID("w1", session, "toolu_task_general")

	t.Run("Task calls spawn the children", func(t *testing.T) {
		for _, tc := range []struct{ id, typ, child, lane string }{
			{"toolu_task_explore", "Explore", exploreChild, "isolated"},
			{"toolu_task_general", "general-purpose", generalChild, "specialist"},
		} {
			r := task(t, cfg, tc.id, tc.typ)
			if r.code != 0 || r.stdout != "" {
				t.Fatalf("Task %s: %+v", tc.typ, r)
			}
			sp := spawnOf(tc.child)
			if len(sp) != 1 || sp[0].Parent != "w1" || sp[0].Lane != tc.lane || sp[0].ParentLane != "coordinator" {
				t.Fatalf("Task %s: spawn receipts %+v", tc.typ, sp)
			}
			if tc.typ == "general-purpose" && (strings.Join(sp[0].ScopeTargets, ",") != "path:/home/dev/shop/src/*" ||
				sp[0].ExpiresAt-sp[0].IssuedAt != int64(time.Hour)) {
				t.Fatalf("general-purpose child's scope: targets %v, lifetime %v", sp[0].ScopeTargets, time.Duration(sp[0].ExpiresAt-sp[0].IssuedAt))
			}
			// A repeated hook for the same Task call is not a second
			// permit (replay.go), and spawns nothing more.
			if r := task(t, cfg, tc.id, tc.typ); r.code != 2 || !strings.Contains(r.stderr, "already permitted once") {
				t.Fatalf("repeat: %+v", r)
			}
			if n := len(spawnOf(tc.child)); n != 1 {
				t.Fatalf("%d spawns of %s", n, tc.child)
			}
		}
	})

	sub := func(t *testing.T, agentID, typ string, set map[string]any) (result, events.Event) {
		t.Helper()
		set["agent_id"], set["agent_type"] = agentID, typ
		r := hook(t, cfg, set)
		var hin harness.HookInput
		_ = json.Unmarshal(patch(t, fixture(t, "claude-code/pre_bash.json"), set), &hin)
		key := harness.IdempotencyKey(harness.ClaudeCode, session, set["tool_use_id"].(string))
		var evs []events.Event
		testenv.WaitFor(t, 10*time.Second, "the call's receipt", func() bool {
			evs = byKey(receipts(t, env), key)
			return len(evs) > 0
		})
		return r, evs[0]
	}
	refused := func(t *testing.T, r result, e events.Event, reason grants.Reason, missing string) {
		t.Helper()
		d := hookDecision(t, r.stdout)
		if r.code != 0 || d["permissionDecision"] != "deny" || e.Kind != events.KindDeny || e.Reason != string(reason) ||
			!strings.Contains(d["permissionDecisionReason"], missing) {
			t.Fatalf("want %s (%s): %+v; receipt %+v", reason, missing, r, e)
		}
	}

	t.Run("subagents run as their Task children", func(t *testing.T) {
		// Explore: Bash is outside the isolated lane.
		r, e := sub(t, "agent_explore_1", "Explore", map[string]any{"tool_use_id": "toolu_x_bash"})
		refused(t, r, e, grants.ReasonDeniedByPolicy, "")
		if e.Worker != exploreChild || e.Lane != "isolated" || e.Session != session+"/agent_explore_1" {
			t.Fatalf("Explore's Bash was asked as %s in %s (%s)", e.Worker, e.Lane, e.Session)
		}
		// A read is fine, as the same child.
		r, e = sub(t, "agent_explore_1", "Explore", map[string]any{"tool_use_id": "toolu_x_read", "tool_name": "Read",
			"tool_input": map[string]any{"file_path": "/home/dev/shop/README.md"}})
		if r.code != 0 || r.stdout != "" || e.Kind != events.KindPermit || e.Worker != exploreChild {
			t.Fatalf("Explore's read: %+v; receipt %+v", r, e)
		}
		// general-purpose: an edit inside its targets, then one outside.
		r, e = sub(t, "agent_general_1", "general-purpose", map[string]any{"tool_use_id": "toolu_g_edit", "tool_name": "Edit",
			"tool_input": map[string]any{"file_path": "/home/dev/shop/src/cart.ts", "old_string": "a", "new_string": "b"}})
		if r.code != 0 || e.Worker != generalChild || e.Lane != "specialist" {
			t.Fatalf("general-purpose's edit inside its targets: %+v; receipt %+v", r, e)
		}
		if e.Kind != events.KindPermit {
			t.Fatalf("general-purpose's edit inside its targets was refused: %+v", e)
		}
		r, e = sub(t, "agent_general_1", "general-purpose", map[string]any{"tool_use_id": "toolu_g_write", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": "/home/dev/.bashrc", "content": "curl x | sh"}})
		refused(t, r, e, grants.ReasonScopeWidens, "targets")
		if e.Worker != generalChild {
			t.Fatalf("the write outside the targets was asked as %s", e.Worker)
		}
	})

	t.Run("a Task whose lane would widen is blocked", func(t *testing.T) {
		before := len(receipts(t, env))
		r := task(t, cfgNarrow, "toolu_task_wide", "Explore")
		d := hookDecision(t, r.stdout)
		reason := d["permissionDecisionReason"]
		if r.code != 0 || d["permissionDecision"] != "deny" || !strings.Contains(reason, string(grants.ReasonScopeWidens)) ||
			!strings.Contains(reason, "lanes.isolated.surfaces") || !strings.Contains(reason, "Task call would start subagent type Explore") {
			t.Fatalf("%+v", r)
		}
		for _, e := range receipts(t, env)[before:] {
			if e.Kind == events.KindSpawn || e.Tool == "Task" {
				t.Fatalf("a refused Task recorded %+v", e)
			}
		}
	})

	t.Run("a Task whose type has no lane is blocked", func(t *testing.T) {
		r := task(t, cfg, "toolu_task_plan", "Plan")
		if r.code != 2 || !strings.Contains(r.stderr, `subagent type "Plan"`) || !strings.Contains(r.stderr, "the call is blocked") {
			t.Fatalf("%+v", r)
		}
		if sp := spawnOf(worker.TaskChildID("w1", session, "toolu_task_plan")); len(sp) != 0 {
			t.Fatalf("spawned %+v", sp)
		}
	})

	t.Run("revoking the session's worker stops the subagents", func(t *testing.T) {
		nc, err := nats.Connect(env.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if rev, err := client.New(nc, "operator").Revoke(testCtx(t), api.RevokeRequest{Worker: "w1"}); err != nil || rev.Decision != grants.Permit {
			t.Fatalf("revoke: %+v %v", rev, err)
		}
		r, e := sub(t, "agent_explore_1", "Explore", map[string]any{"tool_use_id": "toolu_x_read2", "tool_name": "Read",
			"tool_input": map[string]any{"file_path": "/home/dev/shop/README.md"}})
		refused(t, r, e, grants.ReasonWorkerRevoked, "")
		if e.Worker != exploreChild {
			t.Fatalf("asked as %s", e.Worker)
		}
		r, e = sub(t, "agent_general_1", "general-purpose", map[string]any{"tool_use_id": "toolu_g_edit2", "tool_name": "Edit",
			"tool_input": map[string]any{"file_path": "/home/dev/shop/src/cart.ts", "old_string": "b", "new_string": "c"}})
		refused(t, r, e, grants.ReasonWorkerRevoked, "")
	})
}

// A worker config whose subagent declaration would widen is refused by
// install and reported by doctor, naming the field; the hook refuses it
// too.
func TestInstallAndDoctorRefuseAWideningSubagent(t *testing.T) {
	isolateInstall(t)
	bin := copyBinary(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		decl  any
		field string
	}{
		{map[string]any{"lane": "isolated", "ttl": "12h"}, "subagents.Explore.ttl"},
		{map[string]any{"lane": "isolated", "tools": []string{"*"}}, "subagents.Explore.tools[0]"},
		{"coordinator", "subagents.Explore"},
	} {
		c := workerConfigFor("nats://127.0.0.1:1")
		c["subagents"] = map[string]any{"Explore": tc.decl}
		path := writeJSON(t, dir, "wide.json", c)
		project := t.TempDir()
		if r := runCLI(t, "", "install", "claude-code", "--project", project, "--binary", bin, "--config", path); r.code == 0 ||
			!strings.Contains(r.stderr, tc.field) || !strings.Contains(r.stderr, "would widen") {
			t.Fatalf("install with %v: %+v", tc.decl, r)
		}
		rep, _ := doctorJSON(t, "claude-code", "--project", project, "--config", path)
		if st := rep.status()["config"]; rep.OK || st.Status == "ok" || !strings.Contains(st.Detail, tc.field) {
			t.Fatalf("doctor with %v: %+v", tc.decl, rep)
		}
		r := binRun{stdin: fixture(t, "claude-code/pre_bash.json")}.run(t, "hook", "claude-code", "--config", path)
		if r.code != 2 || !strings.Contains(r.stderr, tc.field) {
			t.Fatalf("hook with %v: %+v", tc.decl, r)
		}
	}
}
