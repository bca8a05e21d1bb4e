// End to end: writ's OpenClaw plugin, loaded by node in a stand-in for
// OpenClaw's plugin host, against the worker-agent sidecar (the built
// binary) and a real single-node issuer with NATS authorization.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/policy"
)

type standinStep struct {
	Config   map[string]any `json:"config"`
	AgentID  string         `json:"agentId"`
	Session  string         `json:"session"`
	Tool     string         `json:"tool"`
	Params   map[string]any `json:"params"`
	CallID   string         `json:"callId"`
	Decision string         `json:"decision,omitempty"`
	Result   any            `json:"result,omitempty"`
}

type standinResult struct {
	Blocked     bool     `json:"blocked"`
	BlockReason string   `json:"blockReason"`
	Ran         bool     `json:"ran"`
	Warnings    []string `json:"warnings"`
	Approval    *struct {
		Title            string   `json:"title"`
		Description      string   `json:"description"`
		AllowedDecisions []string `json:"allowedDecisions"`
	} `json:"approval"`
}

// runStandin runs the steps through the plugin in node.
func runStandin(t *testing.T, steps []standinStep) []standinResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: the OpenClaw plugin cannot be loaded (install Node 20 or later)")
	}
	f := writeJSON(t, t.TempDir(), "steps.json", steps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "openclaw-standin.mjs"), pluginDir(t), f)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("node stand-in: %v\n%s", err, errb.String())
	}
	var res []standinResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != len(steps) {
		t.Fatalf("stand-in output %q: %v", out.String(), err)
	}
	return res
}

func TestOpenClawPluginEndToEnd(t *testing.T) {
	dir := t.TempDir()
	users := []natsbus.User{natsbus.WorkerUser("w1", "w1-secret"), natsbus.OperatorUser("gateway-ops", "ops-secret")}
	env := testenv.StartSingleAuth(t, filepath.Join(dir, "issuer"), users, testenv.WithInitialPolicy(policy.Recommended().Canonical()))
	w1pw, opspw := filepath.Join(dir, "w1.pw"), filepath.Join(dir, "ops.pw")
	_ = os.WriteFile(w1pw, []byte("w1-secret"), 0o600)
	_ = os.WriteFile(opspw, []byte("ops-secret"), 0o600)
	cfg := writeJSON(t, dir, "w1.json", map[string]any{
		"worker": "w1", "lane": "coordinator", "nats_url": env.URL, "nats_user": "w1", "nats_password_file": w1pw,
	})
	socket := filepath.Join(dir, "run", "w1.sock")
	startSidecar(t, cfg, socket)

	agents := map[string]any{
		"main":     map[string]any{"worker": "w1", "lane": "coordinator"},
		"research": map[string]any{"worker": "w1", "lane": "isolated"},
	}
	gateway := map[string]any{"socket": socket, "agents": agents, "reviewer": map[string]any{"user": "gateway-ops", "passwordFile": opspw}}
	// A gateway misconfigured with the worker's own credential as reviewer.
	selfReview := map[string]any{"socket": socket, "agents": agents, "reviewer": map[string]any{"user": "w1", "passwordFile": w1pw}}
	const held = "cat ~/.ssh/id_ed25519"
	steps := []standinStep{
		{Config: gateway, AgentID: "main", Session: "agent:main:main", Tool: "exec", Params: map[string]any{"command": "ls -la"}, CallID: "call_ok",
			Result: map[string]any{"content": []any{map[string]any{"type": "text", "text": "total 0"}}}},
		{Config: gateway, AgentID: "research", Session: "agent:research:main", Tool: "exec", Params: map[string]any{"command": "ls"}, CallID: "call_iso"},
		{Config: selfReview, AgentID: "main", Session: "agent:main:main", Tool: "exec", Params: map[string]any{"command": held}, CallID: "call_self", Decision: "allow-once"},
		{Config: gateway, AgentID: "main", Session: "agent:main:main", Tool: "exec", Params: map[string]any{"command": held}, CallID: "call_held", Decision: "allow-once", Result: "-----BEGIN OPENSSH PRIVATE KEY-----"},
		// The same toolCallId again: the same answer, nothing new recorded.
		{Config: gateway, AgentID: "main", Session: "agent:main:main", Tool: "exec", Params: map[string]any{"command": "ls -la"}, CallID: "call_ok"},
	}
	res := runStandin(t, steps)
	evs := receipts(t, env, nats.UserInfo("issuer", "issuer-secret"))
	key := func(session, call string) string { return "openclaw:" + session + ":" + call }

	// An allowed exec: permit, attempt, then the effect, as Bash in the
	// coordinator lane.
	if r := res[0]; r.Blocked || !r.Ran || len(r.Warnings) != 0 {
		t.Fatalf("allowed exec: %+v", r)
	}
	ok := byKey(evs, key("agent:main:main", "call_ok"))
	if got := kinds(ok); !reflect.DeepEqual(got, []events.Kind{events.KindPermit, events.KindAttempt}) {
		t.Fatalf("allowed exec receipts: %v", got)
	}
	if ok[0].Tool != "Bash" || ok[0].Lane != "coordinator" || ok[0].Worker != "w1" {
		t.Fatalf("allowed exec permit: %+v", ok[0])
	}
	eff := effectsOf(evs, ok[0].GrantID)
	if len(eff) != 1 || eff[0].Kind != events.KindEffect || eff[0].Outcome != grants.OutcomeConfirmed || eff[0].Verifier != "harness:openclaw" {
		t.Fatalf("allowed exec effect: %+v", eff)
	}
	// Its result is registered as a source of the gateway session.
	var srcs []events.Event
	for _, e := range evs {
		if e.Kind == events.KindSource && e.Session == "agent:main:main" && e.Tool == "Bash" {
			srcs = append(srcs, e)
		}
	}
	if len(srcs) == 0 {
		t.Fatalf("no source receipt for the allowed exec's result")
	}
	// The retry of call_ok ran again in the stand-in (OpenClaw would not
	// repeat a call id), but writ recorded no second grant or attempt.
	if r := res[4]; r.Blocked {
		t.Fatalf("retry of call_ok: %+v", r)
	}

	// exec in the isolated lane: blocked, with a deny receipt.
	if r := res[1]; !r.Blocked || r.Ran || !strings.Contains(r.BlockReason, "writ denied this Bash call") || !strings.Contains(r.BlockReason, "Next step") {
		t.Fatalf("isolated exec: %+v", r)
	}
	if got := kinds(byKey(evs, key("agent:research:main", "call_iso"))); !reflect.DeepEqual(got, []events.Kind{events.KindDeny}) {
		t.Fatalf("isolated exec receipts: %v", got)
	}

	// The worker's own credential cannot release its held call.
	self := res[2]
	if self.Approval == nil || !reflect.DeepEqual(self.Approval.AllowedDecisions, []string{"allow-once", "deny"}) {
		t.Fatalf("held call (self review): want requireApproval with allow-once and deny, got %+v", self)
	}
	if !self.Blocked || self.Ran || !strings.Contains(self.BlockReason, "not the worker") {
		t.Fatalf("resolve with the worker's credential: want blocked, got %+v", self)
	}
	selfEvs := byKey(evs, key("agent:main:main", "call_self"))
	if got := kinds(selfEvs); !reflect.DeepEqual(got, []events.Kind{events.KindApprovalRequired}) {
		t.Fatalf("self-review receipts: %v", got)
	}
	if got := byKey(evs, key("agent:main:main", "call_self#approved")); len(got) != 0 {
		t.Fatalf("a grant for the self-reviewed call: %v", kinds(got))
	}

	// Through the gateway's reviewer: approved, spent, run, recorded.
	h := res[3]
	if h.Approval == nil || !strings.Contains(h.Approval.Title, "writ review rv-") || !strings.Contains(h.Approval.Description, "Bash") {
		t.Fatalf("held call: %+v", h)
	}
	if h.Blocked || !h.Ran || len(h.Warnings) != 0 {
		t.Fatalf("held call after the reviewer's allow-once: %+v", h)
	}
	heldEvs := byKey(evs, key("agent:main:main", "call_held"))
	if got := kinds(heldEvs); !reflect.DeepEqual(got, []events.Kind{events.KindApprovalRequired}) || heldEvs[0].ReviewID == "" {
		t.Fatalf("held call receipts: %v", got)
	}
	var approvals []events.Event
	for _, e := range evs {
		// At receipt format 4 the approval is a decision record's
		// review_approved; below it, an approval receipt.
		if e.Kind == events.KindApproval || e.Kind == events.KindReviewApproved {
			approvals = append(approvals, e)
		}
	}
	if len(approvals) != 1 || approvals[0].ReviewID != heldEvs[0].ReviewID || !strings.Contains(approvals[0].Detail, "OpenClaw gateway for call call_held") {
		t.Fatalf("approvals: %+v; want one, for review %s (none for %s)", approvals, heldEvs[0].ReviewID, selfEvs[0].ReviewID)
	}
	rel := byKey(evs, key("agent:main:main", "call_held#approved"))
	if got := kinds(rel); !reflect.DeepEqual(got, []events.Kind{events.KindPermit, events.KindAttempt}) {
		t.Fatalf("released call receipts: %v", got)
	}
	if eff := effectsOf(evs, rel[0].GrantID); len(eff) != 1 || eff[0].Kind != events.KindEffect || eff[0].Verifier != "harness:openclaw" {
		t.Fatalf("released call effect: %+v", eff)
	}
}
