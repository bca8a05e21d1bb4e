// End to end through the real hook entry point (the built binary) against
// a real single-node issuer in dev mode: a model cannot release its own
// held call by running writ's operator commands.

package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

var reviewIDPattern = regexp.MustCompile(`rv-[0-9a-f]{20}`)

// TestModelCannotApproveItsOwnHeldCall: under the recommended policy (as
// the issuer writes it to its log, with the built-in rules) a coordinator's
// Bash call that reads a private key is held for review. The model's
// attempts to approve that review itself — the issuer command with or
// without a path, the NATS operator subject from the shell, the same
// subject as an MCP tool's argument, through Claude Code and Codex — are
// each refused by a built-in rule, the review stays open and the held call
// stays held. The model's text names no operator command; the person's
// line (stderr, Claude Code's systemMessage) does. When a person approves
// through the operator API, the same call then passes.
func TestModelCannotApproveItsOwnHeldCall(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.InitialPolicy = policy.Recommended().Canonical()
	})
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	const held = "cat ~/.ssh/id_ed25519"
	call := func(h, id, tool string, input map[string]any) result {
		t.Helper()
		in := patch(t, fixture(t, h+"/pre_bash.json"), map[string]any{"tool_use_id": id, "tool_name": tool, "tool_input": input})
		return binRun{stdin: in}.run(t, "hook", h, "--config", cfg, "--state-dir", dir)
	}
	bash := func(h, id, command string) result {
		t.Helper()
		return call(h, id, "Bash", map[string]any{"command": command})
	}
	holdCheck := func(what string, r result) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		d := hookDecision(t, r.stdout)
		reason := d["permissionDecisionReason"]
		if d["permissionDecision"] != "deny" || !strings.Contains(reason, "writ requires approval") || !strings.Contains(reason, "A person has to decide") {
			t.Fatalf("%s: want the call held, got %+v", what, r)
		}
		if strings.Contains(reason, "issuer approve") || strings.Contains(reason, "writ.op.") {
			t.Fatalf("%s: the model's text hands it an operator command: %s", what, reason)
		}
		id := reviewIDPattern.FindString(reason)
		if id == "" || !strings.Contains(r.stderr, "`issuer approve "+id+"`") {
			t.Fatalf("%s: the person's line lacks the operator command for the review in %q: stderr %q", what, reason, r.stderr)
		}
		return id
	}

	rv := holdCheck("the held call", bash(harness.ClaudeCode, "toolu_held_1", held))
	attempts := []struct {
		name, h, tool string
		input         map[string]any
		rule          string
	}{
		{"issuer approve", harness.ClaudeCode, "Bash", map[string]any{"command": "issuer approve " + rv}, "writ-operator-command"},
		{"issuer with a path and a flag", harness.ClaudeCode, "Bash", map[string]any{"command": "cd /tmp && /usr/local/bin/issuer --nats-url " + env.URL + " approve " + rv}, "writ-operator-command"},
		{"quoted in sh -c", harness.ClaudeCode, "Bash", map[string]any{"command": `sh -c "iss''uer approve ` + rv + `"`}, "writ-operator-command"},
		{"nats req to the operator subject", harness.ClaudeCode, "Bash", map[string]any{"command": `nats req writ.op.approve '{"v":1,"review_id":"` + rv + `"}'`}, "writ-operator-subject"},
		{"operator subject as an MCP argument", harness.ClaudeCode, "mcp__nats__request", map[string]any{"subject": "writ.op.approve", "data": `{"v":1,"review_id":"` + rv + `"}`}, "writ-operator-subject"},
		{"reinstate", harness.ClaudeCode, "Bash", map[string]any{"command": "issuer reinstate w1"}, "writ-operator-command"},
		{"codex issuer approve", harness.Codex, "Bash", map[string]any{"command": "./bin/issuer approve " + rv}, "writ-operator-command"},
	}
	for i, a := range attempts {
		r := call(a.h, "toolu_self_"+string(rune('a'+i)), a.tool, a.input)
		if r.code != 0 {
			t.Fatalf("%s: %+v", a.name, r)
		}
		d := hookDecision(t, r.stdout)
		if d["permissionDecision"] != "deny" || !strings.Contains(d["permissionDecisionReason"], "shape_rule") ||
			!strings.Contains(d["permissionDecisionReason"], "Rule: shape:"+a.rule) || !strings.Contains(d["permissionDecisionReason"], "only a person decides") {
			t.Fatalf("%s: want a denial by shape:%s, got %+v", a.name, a.rule, r)
		}
		if !strings.Contains(r.stderr, "shape:"+a.rule) {
			t.Errorf("%s: stderr does not name the rule: %q", a.name, r.stderr)
		}
		if a.h == harness.Codex {
			checkCodexOutput(t, r.stdout, true)
		}
	}
	if st := env.Service.Status(); st.Approvals != 0 || st.OpenReviews == 0 {
		t.Fatalf("after the model's attempts: %d approvals, %d open reviews; want 0 and the review still open", st.Approvals, st.OpenReviews)
	}
	rv = holdCheck("the held call, retried", bash(harness.ClaudeCode, "toolu_held_2", held))

	// A person approves through the operator API: the same call passes.
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if e, err := client.New(nc, "").Approve(ctx, api.ApproveRequest{ReviewID: rv}); err != nil || e.Decision != grants.Permit {
		t.Fatalf("the operator's approval: %+v %v", e, err)
	}
	if r := bash(harness.ClaudeCode, "toolu_held_3", held); r.code != 0 || r.stdout != "" {
		t.Fatalf("the approved call: want a permit (exit 0, no output), got %+v", r)
	}
}
