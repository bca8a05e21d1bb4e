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

// decision decodes a PreToolUse answer's stdout: the decision object,
// with Claude Code's systemMessage (for the user) under "systemMessage".
func decision(t *testing.T, out []byte) map[string]string {
	t.Helper()
	var doc struct {
		HookSpecificOutput map[string]string `json:"hookSpecificOutput"`
		SystemMessage      *string           `json:"systemMessage"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("stdout is not the decision JSON: %v: %q", err, out)
	}
	if doc.SystemMessage != nil {
		doc.HookSpecificOutput["systemMessage"] = *doc.SystemMessage
	}
	return doc.HookSpecificOutput
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

	// Approval: a deny (never "ask") naming the review and saying a person
	// decides it; the operator command only in what the user sees.
	a = harness.PreToolUse(harness.ClaudeCode, "Bash", approval, harness.Options{ReplacePrompt: true})
	d = decision(t, a.Stdout)
	if a.Exit != 0 || d["permissionDecision"] != "deny" {
		t.Fatalf("approval: %+v", a)
	}
	for _, want := range []string{"deploy_v2_review", "A person has to decide", "you cannot approve it yourself", "authority_too_low", "owner approval", "bind to nothing"} {
		if !strings.Contains(d["permissionDecisionReason"], want) {
			t.Errorf("approval reason lacks %q: %s", want, d["permissionDecisionReason"])
		}
	}
	for _, where := range []string{d["systemMessage"], a.Stderr} {
		if !strings.Contains(where, "`issuer approve deploy_v2_review`") || strings.Contains(where, "\n") {
			t.Errorf("the user's line lacks the operator command: systemMessage %q stderr %q", d["systemMessage"], a.Stderr)
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

// TestApprovalTextGivesTheModelNoCommand: the text the model gets for a
// held call — Claude Code's and Codex's permissionDecisionReason, the MCP
// refusal — says a person has to decide and never names a command it
// could run to approve the review itself; the command reaches the person
// on channels the model does not get (systemMessage, stderr at exit 0).
func TestApprovalTextGivesTheModelNoCommand(t *testing.T) {
	held := []grants.Envelope{
		approval,
		{Decision: grants.ApprovalRequired, ReviewID: "rv-0123456789abcdef0123", Reason: grants.ReasonShapeReview, Missing: "review of shape credential-read-shell", Rules: []string{"shape:credential-read-shell"}},
		{Decision: grants.ApprovalRequired, ReviewID: "rv-0123456789abcdef0124", Reason: grants.ReasonReviewRequired, Missing: "review of consequence class credential_use"},
		{Decision: grants.ApprovalRequired, ReviewID: "rv-0123456789abcdef0125", Reason: grants.ReasonMemoryWrite, Missing: "owner review of a write to memory path */CLAUDE.md"},
	}
	for _, env := range held {
		texts := map[string]string{"mcp": harness.RefusalReason("mcp__x__y", env)}
		for _, h := range []string{harness.ClaudeCode, harness.Codex} {
			a := harness.PreToolUse(h, "Bash", env, harness.Options{})
			d := decision(t, a.Stdout)
			texts[h] = d["permissionDecisionReason"]
			if !strings.Contains(a.Stderr, harness.ApproveCommand(env.ReviewID)) {
				t.Errorf("%s %s: stderr lacks the operator command: %q", h, env.ReviewID, a.Stderr)
			}
			if h == harness.ClaudeCode && !strings.Contains(d["systemMessage"], harness.ApproveCommand(env.ReviewID)) {
				t.Errorf("claude-code %s: systemMessage lacks the operator command: %q", env.ReviewID, d["systemMessage"])
			}
		}
		for h, text := range texts {
			for _, bad := range []string{"issuer approve", "writ.op.", "`"} {
				if strings.Contains(text, bad) {
					t.Errorf("%s %s: the model's text hands it %q: %s", h, env.ReviewID, bad, text)
				}
			}
			for _, want := range []string{env.ReviewID, "A person has to decide", "you cannot approve it yourself"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s: the model's text lacks %q: %s", h, want, text)
				}
			}
		}
	}
}

// TestDenialNamesTheRule: a denial by an explicit rule or a shape rule
// names the rule, in the model's text and on stderr, instead of the
// generic "no explicit denial"; the built-in operator rules say a person
// decides.
func TestDenialNamesTheRule(t *testing.T) {
	for _, tc := range []struct {
		env  grants.Envelope
		rule string
	}{
		{grants.Envelope{Decision: grants.Deny, Reason: grants.ReasonDeniedByPolicy, Missing: "no explicit denial", Recovery: grants.RecoverNone,
			Rules: []string{"lane:coordinator", "surface:file_write", "deny:no-prod-secrets"}}, "deny:no-prod-secrets"},
		{grants.Envelope{Decision: grants.Deny, Reason: grants.ReasonShapeRule, Missing: "a form no shape rule denies", Recovery: grants.RecoverNone,
			Rules: []string{"lane:coordinator", "surface:shell", "shape:writ-operator-command"}}, "shape:writ-operator-command"},
	} {
		r := harness.RefusalReason("Bash", tc.env)
		if !strings.Contains(r, "Rule: "+tc.rule) || strings.Contains(r, tc.env.Missing) {
			t.Errorf("%s: text %s", tc.rule, r)
		}
		if strings.HasPrefix(tc.rule, "shape:writ-operator") && !strings.Contains(r, "only a person decides these") {
			t.Errorf("built-in rule text: %s", r)
		}
		for _, h := range []string{harness.ClaudeCode, harness.Codex} {
			if a := harness.PreToolUse(h, "Bash", tc.env, harness.Options{}); !strings.Contains(a.Stderr, tc.rule) {
				t.Errorf("%s: stderr %q lacks %s", h, a.Stderr, tc.rule)
			}
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
