package harness

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/grants"
)

// Exit codes of a hook process.
const (
	// ExitOK: the hook ran; stdout (possibly empty) is its answer.
	ExitOK = 0
	// ExitBlock: the hook could not decide. Claude Code and Codex both block
	// the call on exit 2 and show stderr to the model; every other non-zero
	// code (and a hook timeout) lets the call run, so writ never uses one.
	ExitBlock = 2
)

// ApproveCommand is the operator command that approves a review. It is
// named only where a person reads it (OperatorNote: Claude Code's
// systemMessage and the hook's stderr), never in the text the model gets.
func ApproveCommand(reviewID string) string { return "issuer approve " + reviewID }

// Answer is what a hook process does: its exit code, its stdout (nil for
// none) and one line on stderr (empty for none).
type Answer struct {
	Exit   int
	Stdout []byte
	Stderr string
}

// preToolUseOutput is the only JSON a writ hook ever prints. Codex rejects
// any field it does not know — and then runs the call — so nothing else
// may ever be added here for Codex.
type preToolUseOutput struct {
	HookSpecificOutput preToolUseDecision `json:"hookSpecificOutput"`
}

// claudeCodeOutput is preToolUseOutput with Claude Code's systemMessage,
// which Claude Code shows to the user and not to the model. Only Claude
// Code answers carry it.
type claudeCodeOutput struct {
	HookSpecificOutput preToolUseDecision `json:"hookSpecificOutput"`
	SystemMessage      string             `json:"systemMessage,omitempty"`
}

type preToolUseDecision struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

// Options tune a harness's answers.
type Options struct {
	// ReplacePrompt makes a Claude Code permit answer "allow", which skips
	// Claude Code's own permission prompt (its deny and ask rules still
	// apply). Set it only where the operator configured writ to replace
	// that prompt. Codex never gets an "allow": it treats one as a failed
	// hook.
	ReplacePrompt bool
	// Sources names the channel of a registered source id (web_fetch,
	// file_read, ...) for the reason text of a provenance refusal; nil,
	// or ok false, leaves the id alone.
	Sources SourceLookup
}

// PreToolUse renders the issuer's decision on a PreToolUse event for the
// harness: env is the attempt receipt of a spent grant (permit) or the
// refusal of the request or the spend.
//
//   - permit: exit 0 and no output — or, for Claude Code with
//     ReplacePrompt, permissionDecision "allow";
//   - deny: exit 0 with permissionDecision "deny" and a reason naming the
//     reason code, the missing fact and the recovery;
//   - approval_required: the same deny, naming the review and saying a
//     person has to decide it — never a command the model could run. The
//     operator command goes to the person only: Claude Code's
//     systemMessage and, for both harnesses, stderr (exit 0: neither
//     harness gives it to the model). Never "ask": an approval given in
//     the harness's prompt would bind to nothing in writ.
//   - a denial by a rule also names the rule on stderr.
//   - anything else: exit 2.
func PreToolUse(harness string, tool string, env grants.Envelope, opt Options) Answer {
	switch env.Decision {
	case grants.Permit:
		if harness == ClaudeCode && opt.ReplacePrompt {
			return decisionAnswer(harness, "allow", PermitReason(tool, env), "")
		}
		return Answer{Exit: ExitOK}
	case grants.Deny, grants.ApprovalRequired:
		note := OperatorNote(tool, env)
		a := decisionAnswer(harness, "deny", RefusalReasonWith(tool, env, opt.Sources), note)
		if a.Stderr == "" {
			a.Stderr = note
			if rule := DecidingRule(env); rule != "" {
				a.Stderr = OneLine("writ: denied " + tool + ": " + string(env.Reason) + " by rule " + rule)
			}
		}
		return a
	}
	return Fail(fmt.Errorf("the issuer answered with unknown decision %q; the call must not run", env.Decision))
}

// decisionAnswer prints the decision; a Claude Code answer also carries
// note, for the user, as its systemMessage.
func decisionAnswer(harness, decision, reason, note string) Answer {
	d := preToolUseDecision{HookEventName: EventPreToolUse, PermissionDecision: decision, PermissionDecisionReason: reason}
	var out any = preToolUseOutput{HookSpecificOutput: d}
	if harness == ClaudeCode && note != "" {
		out = claudeCodeOutput{HookSpecificOutput: d, SystemMessage: note}
	}
	b, err := marshal(out)
	if err != nil {
		return Fail(err)
	}
	return Answer{Exit: ExitOK, Stdout: b}
}

// Fail is the answer to anything that keeps a PreToolUse hook from
// deciding: exit 2 with one line on stderr. Both harnesses block the call
// and show the line to the model.
func Fail(err error) Answer {
	return Answer{Exit: ExitBlock, Stderr: "writ: " + OneLine(err.Error()) + " — the call is blocked"}
}

// FailAfter is the answer to a post-call hook that could not record the
// call's result: exit 2 with one line on stderr, which the harness shows
// to the model (the call has already run).
func FailAfter(err error) Answer {
	return Answer{Exit: ExitBlock, Stderr: "writ: " + OneLine(err.Error())}
}

// FailPrompt is the answer to a UserPromptSubmit hook that could not
// register the prompt as a source: exit 2 with one line on stderr. Both
// harnesses then drop the prompt and show the line to the user, who can
// submit it again; a prompt the issuer never heard of would count as
// model-made content for every call it asks for.
func FailPrompt(err error) Answer {
	return Answer{Exit: ExitBlock, Stderr: "writ: " + OneLine(err.Error()) + " — the prompt was not sent; submit it again"}
}

// marshal encodes v as one line of JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// OneLine folds s onto one line: control characters become spaces and runs
// of spaces collapse.
func OneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029'
	}), " ")
}
