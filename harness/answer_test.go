package harness_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

var (
	attempt  = grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 12, Kind: events.KindAttempt}
	policyNo = grants.Envelope{Decision: grants.Deny, Reason: grants.ReasonDeniedByPolicy, Missing: "tool Bash allowed in lane isolated", Recovery: grants.RecoverNone, Seq: 9, Kind: events.KindDeny}
	spent    = grants.Refuse(grants.ReasonAlreadySpent, "unspent", "")
	approval = grants.Envelope{Decision: grants.ApprovalRequired, ReviewID: "deploy_v2_review", Reason: "authority_too_low", Missing: "owner approval", Recovery: grants.RecoverRefreshApproval}
	bare     = grants.Envelope{Decision: grants.ApprovalRequired}
	unknown  = grants.Envelope{Decision: "maybe"}
)

// decision decodes a PreToolUse answer's stdout.
func decision(t *testing.T, out []byte) map[string]string {
	t.Helper()
	var doc map[string]map[string]string
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("stdout is not the decision JSON: %v: %q", err, out)
	}
	return doc["hookSpecificOutput"]
}

func TestClaudeCodeAnswers(t *testing.T) {
	a := harness.PreToolUse(harness.ClaudeCode, "Bash", attempt, harness.Options{})
	if a.Exit != 0 || a.Stdout != nil || a.Stderr != "" {
		t.Fatalf("permit: %+v", a)
	}
	a = harness.PreToolUse(harness.ClaudeCode, "Bash", attempt, harness.Options{ReplacePrompt: true})
	if d := decision(t, a.Stdout); a.Exit != 0 || d["permissionDecision"] != "allow" || !strings.Contains(d["permissionDecisionReason"], "g-1") {
		t.Fatalf("permit with replace_prompt: %+v %v", a, d)
	}

	a = harness.PreToolUse(harness.ClaudeCode, "Bash", policyNo, harness.Options{ReplacePrompt: true})
	d := decision(t, a.Stdout)
	if a.Exit != 0 || d["hookEventName"] != "PreToolUse" || d["permissionDecision"] != "deny" {
		t.Fatalf("deny: %+v", a)
	}
	for _, want := range []string{"Bash", "denied_by_policy", "tool Bash allowed in lane isolated", "Recovery: none", "do not retry", "receipt 9"} {
		if !strings.Contains(d["permissionDecisionReason"], want) {
			t.Errorf("deny reason lacks %q: %s", want, d["permissionDecisionReason"])
		}
	}
	d = decision(t, harness.PreToolUse(harness.ClaudeCode, "Bash", spent, harness.Options{}).Stdout)
	for _, want := range []string{"already_spent", "unspent", "reconcile_consumption"} {
		if !strings.Contains(d["permissionDecisionReason"], want) {
			t.Errorf("spend refusal lacks %q: %s", want, d["permissionDecisionReason"])
		}
	}

	// Approval: a deny (never "ask") naming the review and the command.
	a = harness.PreToolUse(harness.ClaudeCode, "Bash", approval, harness.Options{ReplacePrompt: true})
	d = decision(t, a.Stdout)
	if a.Exit != 0 || d["permissionDecision"] != "deny" {
		t.Fatalf("approval: %+v", a)
	}
	for _, want := range []string{"deploy_v2_review", "`issuer approve deploy_v2_review`", "authority_too_low", "owner approval", "bind to nothing"} {
		if !strings.Contains(d["permissionDecisionReason"], want) {
			t.Errorf("approval reason lacks %q: %s", want, d["permissionDecisionReason"])
		}
	}
	if d = decision(t, harness.PreToolUse(harness.ClaudeCode, "Bash", bare, harness.Options{}).Stdout); d["permissionDecision"] != "deny" || d["permissionDecisionReason"] == "" {
		t.Fatalf("bare approval: %v", d)
	}

	a = harness.PreToolUse(harness.ClaudeCode, "Bash", unknown, harness.Options{})
	if a.Exit != harness.ExitBlock || a.Stdout != nil || !strings.Contains(a.Stderr, "maybe") || strings.Contains(a.Stderr, "\n") {
		t.Fatalf("unknown decision: %+v", a)
	}
	a = harness.Fail(errors.New("cannot reach\nthe issuer"))
	if a.Exit != 2 || a.Stderr != "writ: cannot reach the issuer — the call is blocked" {
		t.Fatalf("fail: %+v", a)
	}
}

// Codex runs the call when a hook prints anything it does not accept: a
// plain allow, ask, an empty reason or an unknown field. Every answer must
// be either nothing or exactly a deny with a non-empty reason.
func TestCodexAnswersNeverCarryAFieldCodexRejects(t *testing.T) {
	for _, env := range []grants.Envelope{attempt, policyNo, spent, approval, bare, unknown, {}} {
		for _, replace := range []bool{false, true} {
			a := harness.PreToolUse(harness.Codex, "Bash", env, harness.Options{ReplacePrompt: replace})
			checkCodexAnswer(t, env, a)
		}
	}
}

func checkCodexAnswer(t *testing.T, env grants.Envelope, a harness.Answer) {
	t.Helper()
	switch {
	case env.Decision == grants.Permit:
		if a.Exit != 0 || len(a.Stdout) != 0 {
			t.Fatalf("permit must be exit 0 with no output: %+v", a)
		}
	case env.Decision == grants.Deny || env.Decision == grants.ApprovalRequired:
		if a.Exit != 0 {
			t.Fatalf("refusal exit %d", a.Exit)
		}
		var doc map[string]map[string]any
		if err := json.Unmarshal(a.Stdout, &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc) != 1 || doc["hookSpecificOutput"] == nil {
			t.Fatalf("top-level keys: %s", a.Stdout)
		}
		h := doc["hookSpecificOutput"]
		if len(h) != 3 || h["hookEventName"] != "PreToolUse" || h["permissionDecision"] != "deny" {
			t.Fatalf("decision object: %s", a.Stdout)
		}
		if r, _ := h["permissionDecisionReason"].(string); strings.TrimSpace(r) == "" {
			t.Fatalf("empty reason: %s", a.Stdout)
		}
	default:
		if a.Exit != 2 || len(a.Stdout) != 0 || a.Stderr == "" {
			t.Fatalf("unknown decision must be exit 2 with stderr: %+v", a)
		}
	}
}

func TestRefusalReasonIsOneLine(t *testing.T) {
	env := grants.Refuse(grants.ReasonInvalidRequest, "args", "line one\nline two\r\u2028three")
	r := harness.RefusalReason("Write", env)
	if strings.ContainsAny(r, "\n\r\u2028") {
		t.Fatalf("multi-line reason: %q", r)
	}
	for _, want := range []string{"invalid_request", "fix_request", "line one line two three"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason lacks %q: %s", want, r)
		}
	}
	// Every recovery class in the reason table has advice of its own.
	fallback := harness.RecoveryAdvice("bogus")
	for _, ri := range grants.Reasons {
		if adv := harness.RecoveryAdvice(ri.Recovery); adv == fallback {
			t.Errorf("no advice for %s", ri.Recovery)
		}
	}
	if fallback == harness.RecoveryAdvice(grants.RecoverNone) {
		t.Error("an unknown recovery reads like none")
	}
}
