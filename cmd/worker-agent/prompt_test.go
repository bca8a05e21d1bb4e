package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/harness"
)

// While the issuer cannot be reached, a prompt goes through with a
// warning for the user (it cannot be registered, so values copied from it
// count as model-made), tool calls stay blocked, and once the issuer is
// back the unregistered prompt has lent no authority: a payment to the
// recipient it names is refused until the prompt is submitted again.
func TestPromptWhileIssuerUnreachable(t *testing.T) {
	cleanEnv(t)
	builtBinary(t) // before any deadline starts
	env := startPayIssuer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	up := writeJSON(t, dir, "up.json", workerConfigFor(env.URL))
	down := writeJSON(t, dir, "down.json", workerConfigFor("nats://127.0.0.1:1"))
	noIssuer := writeJSON(t, dir, "noissuer.json", workerConfigFor(startNATS(t)))
	const session = "prompt-offline"
	hook := func(h, cfg string, in []byte, extra ...string) result {
		t.Helper()
		return binRun{stdin: in}.run(t, append([]string{"hook", h, "--config", cfg, "--state-dir", state}, extra...)...)
	}

	for _, tc := range []struct {
		name, harness, cfg string
		want               string
		extra              []string
	}{
		{"claude-code, issuer down", harness.ClaudeCode, down, "cannot reach the writ issuer", nil},
		{"codex, issuer down", harness.Codex, down, "cannot reach the writ issuer", nil},
		{"claude-code, NATS without an issuer", harness.ClaudeCode, noIssuer, "did not answer in time", []string{"--deadline", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := patch(t, fixture(t, tc.harness+"/user_prompt_submit.json"), map[string]any{"session_id": session})
			r := hook(tc.harness, tc.cfg, in, tc.extra...)
			var out map[string]string
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || len(out) != 1 {
				t.Fatalf("prompt: want exit 0 and {\"systemMessage\": ...}, got %+v (%v)", r, err)
			}
			msg := out["systemMessage"]
			for _, w := range []string{tc.want, "this prompt", "sent anyway", "tool calls stay blocked", "Submit the prompt again"} {
				if !strings.Contains(msg, w) {
					t.Errorf("systemMessage lacks %q: %s", w, msg)
				}
			}
			if strings.TrimSpace(r.stderr) != msg {
				t.Errorf("stderr %q", r.stderr)
			}
		})
	}

	pay := func(cfg, callID string) result {
		return hook(harness.ClaudeCode, cfg, payCall(t, session, callID, map[string]any{"to": promptTo, "amount": 4200}))
	}
	// Tool calls stay fail-closed while the issuer is down.
	if r := pay(down, "toolu_offline"); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach") {
		t.Fatalf("a tool call with the issuer down: %+v", r)
	}
	// The issuer is back: the prompt that was never registered lends its
	// recipient no authority.
	r := pay(up, "toolu_after")
	if d := hookDecision(t, r.stdout); r.code != 0 || d["permissionDecision"] != "deny" || !strings.Contains(d["permissionDecisionReason"], "authority_too_low") {
		t.Fatalf("paying the unregistered prompt's recipient: %+v", r)
	}
	// Submitted again, the prompt is registered and the payment may run.
	in := patch(t, fixture(t, "claude-code/user_prompt_submit.json"), map[string]any{"session_id": session})
	if r := hook(harness.ClaudeCode, up, in); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("the prompt again: %+v", r)
	}
	if r := pay(up, "toolu_registered"); r.code != 0 || r.stdout != "" {
		t.Fatalf("paying the registered prompt's recipient: %+v", r)
	}
}
