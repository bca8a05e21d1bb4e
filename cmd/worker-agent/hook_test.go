package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/worker"
)

// hookDecision decodes a PreToolUse answer, checking it has exactly the
// shape writ emits.
func hookDecision(t *testing.T, stdout string) map[string]string {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("stdout is not a hook answer: %v: %q", err, stdout)
	}
	var h map[string]string
	if err := json.Unmarshal(doc["hookSpecificOutput"], &h); err != nil || h["hookEventName"] != "PreToolUse" || h["permissionDecisionReason"] == "" {
		t.Fatalf("hook answer %q", stdout)
	}
	// Besides the decision, only Claude Code's systemMessage (for the
	// user) may appear.
	for k, v := range doc {
		if k == "systemMessage" {
			if err := json.Unmarshal(v, new(string)); err != nil {
				t.Fatalf("systemMessage is not a string: %q", stdout)
			}
		} else if k != "hookSpecificOutput" {
			t.Fatalf("hook answer has field %q: %q", k, stdout)
		}
	}
	return h
}

// workerConfigFor is the config most hook tests use.
func workerConfigFor(url string) map[string]any {
	return map[string]any{
		"worker": "w1", "lane": "coordinator",
		"subagents": map[string]string{"Explore": "isolated", "general-purpose": "specialist"},
		"nats_url":  url,
	}
}

func TestClaudeCodeHooksAgainstIssuer(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	replace := workerConfigFor(env.URL)
	replace["replace_prompt"] = true
	cfgReplace := writeJSON(t, dir, "replace.json", replace)
	inName := workerConfigFor(env.URL)
	inName["subagents_as_workers"] = false
	cfgInName := writeJSON(t, dir, "in-name.json", inName)

	type want struct {
		decision grants.Decision
		reason   grants.Reason
		lane     string
		rule     string
	}
	tests := []struct {
		name, fixture string
		args          []string // extra flags
		want          want
	}{
		{"Bash as coordinator", "pre_bash.json", nil, want{grants.Permit, "", "coordinator", "lanes.coordinator.tools:*"}},
		{"Write as specialist", "pre_write.json", []string{"--lane", "specialist"}, want{grants.Permit, "", "specialist", "lanes.specialist.tools:Write"}},
		{"Edit as specialist", "pre_edit.json", []string{"--lane", "specialist"}, want{grants.Permit, "", "specialist", "lanes.specialist.tools:Edit"}},
		{"WebFetch as isolated", "pre_webfetch.json", []string{"--lane", "isolated"}, want{grants.Permit, "", "isolated", "lanes.isolated.tools:WebFetch"}},
		{"WebFetch as specialist", "pre_webfetch.json", []string{"--lane", "specialist"}, want{grants.Deny, grants.ReasonDeniedByPolicy, "specialist", "lanes.specialist.tools"}},
		{"MCP tool as coordinator", "pre_mcp.json", nil, want{grants.Permit, "", "coordinator", "lanes.coordinator.tools:*"}},
		{"MCP tool as specialist", "pre_mcp.json", []string{"--lane", "specialist"}, want{grants.Deny, grants.ReasonDeniedByPolicy, "specialist", "lanes.specialist.deny:mcp__*"}},
		// A subagent is a child worker of w1 in its own lane (and judged
		// under w1's too: fsm and tests/injection cover that).
		{"Explore subagent runs Bash", "pre_subagent_explore_bash.json", nil, want{grants.Deny, grants.ReasonDeniedByPolicy, "isolated", "lanes.isolated.tools"}},
		{"general-purpose subagent edits", "pre_subagent_general_edit.json", nil, want{grants.Permit, "", "specialist", "lanes.specialist.tools:Edit"}},
		// Kept in w1's name (subagents_as_workers false), --lane moves
		// only the main session: a subagent keeps its own.
		{"general-purpose subagent edits in w1's name", "pre_subagent_general_edit.json", []string{"--config", "IN-NAME", "--lane", "isolated"}, want{grants.Permit, "", "specialist", "lanes.specialist.tools:Edit"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A session of its own: the same fixture in another lane must
			// not meet the first answer under the same idempotency key.
			session := fmt.Sprintf("s%d-5b0c6a9e", i)
			in := patch(t, fixture(t, "claude-code/"+tc.fixture), map[string]any{"session_id": session})
			var hin harness.HookInput
			_ = json.Unmarshal(in, &hin)
			key := harness.IdempotencyKey(harness.ClaudeCode, session, hin.ToolUseID)

			conf, extra := cfg, tc.args
			if len(extra) >= 2 && extra[0] == "--config" && extra[1] == "IN-NAME" {
				conf, extra = cfgInName, extra[2:]
			}
			r := binRun{stdin: in}.run(t, append([]string{"hook", "claude-code", "--config", conf}, extra...)...)
			if r.code != 0 {
				t.Fatalf("exit %d; stderr %q", r.code, r.stderr)
			}
			evs := byKey(receipts(t, env), key)
			if tc.want.decision == grants.Permit {
				if r.stdout != "" || r.stderr != "" {
					t.Fatalf("permit must be silent: stdout %q stderr %q", r.stdout, r.stderr)
				}
				if got := kinds(evs); !reflect.DeepEqual(got, []events.Kind{events.KindPermit, events.KindAttempt}) {
					t.Fatalf("receipts %v, want permit then attempt", got)
				}
				if evs[0].GrantID == "" || evs[1].GrantID != evs[0].GrantID || evs[1].Digest != evs[0].Digest {
					t.Fatalf("attempt does not spend the permit: %+v / %+v", evs[0], evs[1])
				}
			} else {
				d := hookDecision(t, r.stdout)
				if d["permissionDecision"] != "deny" {
					t.Fatalf("decision %v", d)
				}
				if got := kinds(evs); !reflect.DeepEqual(got, []events.Kind{events.KindDeny}) {
					t.Fatalf("receipts %v, want one deny", got)
				}
				for _, s := range []string{string(tc.want.reason), evs[0].Missing, "Recovery: none", fmt.Sprintf("receipt %d", evs[0].Seq)} {
					if !strings.Contains(d["permissionDecisionReason"], s) {
						t.Errorf("reason lacks %q: %s", s, d["permissionDecisionReason"])
					}
				}
				if evs[0].Reason != string(tc.want.reason) {
					t.Errorf("receipt reason %q", evs[0].Reason)
				}
			}
			e := evs[0]
			wantDigest, _ := args.Digest(hin.ToolName, hin.ToolInput)
			wantSession := session
			if hin.AgentID != "" {
				wantSession += "/" + hin.AgentID // which subagent made the call
			}
			wantWorker := "w1"
			if hin.AgentID != "" && conf == cfg {
				wantWorker = worker.SubagentChildID("w1", session, hin.AgentID)
			}
			if e.Worker != wantWorker || e.Lane != tc.want.lane || e.Session != wantSession || e.Tool != hin.ToolName || e.Digest != wantDigest ||
				!reflect.DeepEqual(e.Rules, []string{tc.want.rule}) {
				t.Errorf("receipt binds worker %q lane %q session %q tool %q rules %v digest %s",
					e.Worker, e.Lane, e.Session, e.Tool, e.Rules, e.Digest)
			}
		})
	}

	t.Run("repeated hook gets the same answer", func(t *testing.T) {
		in := patch(t, fixture(t, "claude-code/pre_write.json"), map[string]any{"session_id": "repeat-1"})
		deny := patch(t, fixture(t, "claude-code/pre_subagent_explore_bash.json"), map[string]any{"session_id": "repeat-1"})
		before := len(receipts(t, env))
		for i := 0; i < 3; i++ {
			if r := (binRun{stdin: in}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 || r.stdout != "" {
				t.Fatalf("run %d: %+v", i, r)
			}
		}
		var first string
		for i := 0; i < 2; i++ {
			r := binRun{stdin: deny}.run(t, "hook", "claude-code", "--config", cfg)
			if i == 0 {
				first = r.stdout
			} else if r.stdout != first {
				t.Fatalf("second deny differs:\n%s\n%s", first, r.stdout)
			}
		}
		got := 0
		for _, e := range receipts(t, env)[before:] {
			if e.Kind != events.KindSpawn { // the subagent's child worker, once
				got++
			}
		}
		if got != 3 { // permit, attempt, deny
			t.Fatalf("%d new receipts, want 3: repeats must not record anything", got)
		}
	})

	t.Run("replace_prompt answers allow", func(t *testing.T) {
		in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "replace-1"})
		r := binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfgReplace)
		d := hookDecision(t, r.stdout)
		if r.code != 0 || d["permissionDecision"] != "allow" || !strings.Contains(d["permissionDecisionReason"], "writ grant ") {
			t.Fatalf("%+v", r)
		}
		// A denial is still a deny.
		in = patch(t, fixture(t, "claude-code/pre_subagent_explore_bash.json"), map[string]any{"session_id": "replace-1"})
		r = binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfgReplace)
		if d := hookDecision(t, r.stdout); d["permissionDecision"] != "deny" {
			t.Fatalf("%+v", r)
		}
	})

	for _, tc := range []struct {
		fixture, outcome string
	}{
		{"post_bash.json", grants.OutcomeConfirmed},
		{"post_failure_bash.json", grants.OutcomeFailed},
	} {
		t.Run("PreToolUse then "+tc.fixture, func(t *testing.T) {
			post := patch(t, fixture(t, "claude-code/"+tc.fixture), map[string]any{"session_id": "post-" + tc.outcome})
			pre := patch(t, post, map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "error": nil, "duration_ms": nil, "is_interrupt": nil})
			if r := (binRun{stdin: pre}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 || r.stdout != "" {
				t.Fatalf("pre: %+v", r)
			}
			r := binRun{stdin: post}.run(t, "hook", "claude-code", "--config", cfg)
			if r.code != 0 || r.stdout != "" || r.stderr != "" {
				t.Fatalf("post: %+v", r)
			}
			var hin harness.HookInput
			_ = json.Unmarshal(post, &hin)
			all := receipts(t, env)
			evs := byKey(all, harness.IdempotencyKey(harness.ClaudeCode, "post-"+tc.outcome, hin.ToolUseID))
			if got := kinds(evs); !reflect.DeepEqual(got, []events.Kind{events.KindPermit, events.KindAttempt}) {
				t.Fatalf("receipts %v: the post hook must find the grant, not mint one", got)
			}
			effs := effectsOf(all, evs[0].GrantID)
			if len(effs) != 1 || effs[0].Kind != events.KindEffect || effs[0].Outcome != tc.outcome ||
				effs[0].Verifier != "harness:claude-code" || effs[0].RefSeq != evs[1].Seq {
				t.Fatalf("effect receipts %+v", effs)
			}
		})
	}

	t.Run("post hooks for a refused call", func(t *testing.T) {
		in := patch(t, fixture(t, "claude-code/pre_subagent_explore_bash.json"), map[string]any{"session_id": "post-refused"})
		binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfg)
		var hin harness.HookInput
		_ = json.Unmarshal(in, &hin)
		var before int
		testenv.WaitFor(t, 10*time.Second, "the refusal in the stream", func() bool {
			all := receipts(t, env)
			before = len(all)
			return len(byKey(all, harness.IdempotencyKey(harness.ClaudeCode, "post-refused", hin.ToolUseID))) > 0
		})
		// It failed because writ refused it: nothing to record.
		failed := patch(t, in, map[string]any{"hook_event_name": "PostToolUseFailure", "error": "blocked by hook"})
		if r := (binRun{stdin: failed}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("failure of a refused call: %+v", r)
		}
		if all := receipts(t, env); len(all) != before {
			t.Fatalf("recorded %d receipts: %+v", len(all)-before, all[before:])
		}
		// It ran although writ refused it: say so.
		ran := patch(t, in, map[string]any{"hook_event_name": "PostToolUse", "tool_response": map[string]any{"stdout": ""}})
		r := binRun{stdin: ran}.run(t, "hook", "claude-code", "--config", cfg)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "ran without a spent writ grant") || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("success of a refused call: %+v", r)
		}
	})

	t.Run("post hook with other tool_input", func(t *testing.T) {
		pre := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "post-drift"})
		binRun{stdin: pre}.run(t, "hook", "claude-code", "--config", cfg)
		post := patch(t, pre, map[string]any{"hook_event_name": "PostToolUse", "tool_input": map[string]any{"command": "npm test"}})
		r := binRun{stdin: post}.run(t, "hook", "claude-code", "--config", cfg)
		if r.code != 2 || !strings.Contains(r.stderr, "tool_input differs") {
			t.Fatalf("%+v", r)
		}
	})

	t.Run("events without a tool call", func(t *testing.T) {
		before := len(receipts(t, env))
		r := binRun{stdin: fixture(t, "claude-code/session_start.json")}.run(t, "hook", "claude-code", "--config", cfg)
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("%+v", r)
		}
		if n := len(receipts(t, env)); n != before {
			t.Fatalf("SessionStart recorded %d receipts", n-before)
		}
	})
}

func TestCodexHooksAgainstIssuer(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "worker.json", map[string]any{"worker": "cx1", "lane": "specialist", "nats_url": env.URL, "replace_prompt": true})

	// Bash as a specialist: permitted, silent (no "allow", even with
	// replace_prompt: Codex would treat it as a failed hook).
	r := binRun{stdin: fixture(t, "codex/pre_bash.json")}.run(t, "hook", "codex", "--config", cfg)
	if r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("Bash: %+v", r)
	}
	// apply_patch is not a specialist tool in the default policy.
	r = binRun{stdin: fixture(t, "codex/pre_apply_patch.json")}.run(t, "hook", "codex", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("apply_patch: %+v", r)
	}
	checkCodexOutput(t, r.stdout, true)
	if d := hookDecision(t, r.stdout); !strings.Contains(d["permissionDecisionReason"], "denied_by_policy") || !strings.Contains(d["permissionDecisionReason"], "apply_patch") {
		t.Fatalf("apply_patch reason: %v", d)
	}
	// PostToolUse records the result against the Bash grant.
	r = binRun{stdin: fixture(t, "codex/post_bash.json")}.run(t, "hook", "codex", "--config", cfg)
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("post: %+v", r)
	}
	var pre harness.HookInput
	_ = json.Unmarshal(fixture(t, "codex/pre_bash.json"), &pre)
	all := receipts(t, env)
	evs := byKey(all, harness.IdempotencyKey(harness.Codex, pre.SessionID, pre.ToolUseID))
	if got := kinds(evs); !reflect.DeepEqual(got, []events.Kind{events.KindPermit, events.KindAttempt}) || evs[0].Worker != "cx1" {
		t.Fatalf("Bash receipts %v", got)
	}
	effs := effectsOf(all, evs[0].GrantID)
	if len(effs) != 1 || effs[0].Outcome != grants.OutcomeConfirmed || effs[0].Verifier != "harness:codex" {
		t.Fatalf("effect %+v", effs)
	}
	var patchIn harness.HookInput
	_ = json.Unmarshal(fixture(t, "codex/pre_apply_patch.json"), &patchIn)
	if got := kinds(byKey(all, harness.IdempotencyKey(harness.Codex, patchIn.SessionID, patchIn.ToolUseID))); !reflect.DeepEqual(got, []events.Kind{events.KindDeny}) {
		t.Fatalf("apply_patch receipts %v", got)
	}
}

// checkCodexOutput fails unless stdout is empty (when refusal is false)
// or exactly {"hookSpecificOutput":{"hookEventName":"PreToolUse",
// "permissionDecision":"deny","permissionDecisionReason":<non-empty>}}:
// Codex treats "allow", "ask", an empty reason or any other field as a
// failed hook and runs the call.
func checkCodexOutput(t *testing.T, stdout string, refusal bool) {
	t.Helper()
	if !refusal {
		if stdout != "" {
			t.Fatalf("Codex permit printed %q", stdout)
		}
		return
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("Codex answer is not JSON: %q", stdout)
	}
	h, _ := doc["hookSpecificOutput"].(map[string]any)
	reason, _ := h["permissionDecisionReason"].(string)
	if len(doc) != 1 || len(h) != 3 || h["hookEventName"] != "PreToolUse" || h["permissionDecision"] != "deny" || strings.TrimSpace(reason) == "" {
		t.Fatalf("Codex answer carries something Codex rejects: %s", stdout)
	}
}

// Against a fake issuer: approval_required, a refused spend and an
// unknown decision, for both harnesses.
func TestHookAnswersFromFakeIssuer(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	permit, _ := json.Marshal(permitEnv)
	answers := map[string]func(n int, subj string) []byte{
		"approval": always(approvalEnv),
		"spent": func(_ int, subj string) []byte {
			if strings.HasSuffix(subj, ".grant") {
				return permit
			}
			b, _ := json.Marshal(denyEnv)
			return b
		},
		"unknown": always(grants.Envelope{Decision: "maybe"}),
	}
	for name, answer := range answers {
		for _, h := range []string{harness.ClaudeCode, harness.Codex} {
			t.Run(name+"/"+h, func(t *testing.T) {
				worker := "f-" + name + "-" + h
				startFake(t, url, func(n int, subj string) []byte {
					if !strings.HasPrefix(subj, "writ.api."+worker+".") {
						return nil
					}
					return answer(n, subj)
				})
				dir := t.TempDir()
				cfg := writeJSON(t, dir, "w.json", map[string]any{"worker": worker, "lane": "coordinator", "nats_url": url, "replace_prompt": true})
				in := fixture(t, "claude-code/pre_bash.json")
				if h == harness.Codex {
					in = fixture(t, "codex/pre_bash.json")
				}
				r := binRun{stdin: in}.run(t, "hook", h, "--config", cfg, "--deadline", "3s")
				if name == "unknown" {
					if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, `"maybe"`) {
						t.Fatalf("%+v", r)
					}
					return
				}
				if r.code != 0 {
					t.Fatalf("%+v", r)
				}
				if h == harness.Codex {
					checkCodexOutput(t, r.stdout, true)
				}
				d := hookDecision(t, r.stdout)
				if d["permissionDecision"] != "deny" {
					t.Fatalf("decision %v (approval must never be ask or allow)", d)
				}
				want := []string{"already_spent", "reconcile_consumption"}
				if name == "approval" {
					want = []string{"review r-9", "A person has to decide", "authority_too_low", "owner approval"}
					if strings.Contains(d["permissionDecisionReason"], "issuer approve") || !strings.Contains(r.stderr, "`issuer approve r-9`") {
						t.Errorf("the operator command belongs on stderr, not in the model's reason: reason %q stderr %q", d["permissionDecisionReason"], r.stderr)
					}
				}
				for _, s := range want {
					if !strings.Contains(d["permissionDecisionReason"], s) {
						t.Errorf("reason lacks %q: %s", s, d["permissionDecisionReason"])
					}
				}
			})
		}
	}
}

// Everything that keeps a hook from an answer is exit 2 with one line on
// stderr and nothing on stdout.
func TestHookFailsClosed(t *testing.T) {
	cleanEnv(t)
	natsOnly := startNATS(t) // NATS, but no issuer behind it
	closed := "nats://127.0.0.1:1"
	dir := t.TempDir()
	good := fixture(t, "claude-code/pre_bash.json")
	cfg := func(name string, v map[string]any) string { return writeJSON(t, dir, name, v) }
	down := cfg("down.json", map[string]any{"worker": "w1", "lane": "coordinator", "nats_url": closed})
	noIssuer := cfg("noissuer.json", map[string]any{"worker": "w1", "lane": "coordinator", "nats_url": natsOnly})
	noWorker := cfg("noworker.json", map[string]any{"lane": "coordinator", "nats_url": closed})
	noLane := cfg("nolane.json", map[string]any{"worker": "w1", "nats_url": closed})
	typo := cfg("typo.json", map[string]any{"worker": "w1", "lane": "coordinator", "subagent": map[string]string{"Explore": "isolated"}})
	caseTrick := filepath.Join(dir, "case.json")
	if err := os.WriteFile(caseTrick, []byte(`{"worker":"w1","lane":"isolated","Lane":"coordinator"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	userMismatch := cfg("user.json", map[string]any{"worker": "w1", "lane": "coordinator", "nats_user": "w2"})
	downSub := cfg("downsub.json", map[string]any{"worker": "w1", "lane": "coordinator", "nats_url": closed,
		"subagents": map[string]any{"Explore": "isolated"}})
	taskCall := func(typ string) []byte {
		return patch(t, good, map[string]any{"tool_name": "Task", "tool_input": map[string]any{"prompt": "look", "subagent_type": typ}})
	}

	tests := []struct {
		name  string
		stdin []byte
		args  []string
		want  string
		max   time.Duration
	}{
		{"issuer down", good, []string{"--config", down}, "cannot reach the writ issuer", 3 * time.Second},
		{"issuer down, codex", fixture(t, "codex/pre_bash.json"), []string{"--config", down, "--harness-codex"}, "cannot reach", 3 * time.Second},
		{"NATS without an issuer", good, []string{"--config", noIssuer, "--deadline", "1s"}, "did not answer in time", 4 * time.Second},
		{"post hook with the issuer down", fixture(t, "claude-code/post_bash.json"), []string{"--config", down}, "cannot reach", 3 * time.Second},
		{"malformed JSON", []byte(`{"hook_event_name":"PreToolUse",`), []string{"--config", down}, "malformed hook input", 3 * time.Second},
		{"empty stdin", nil, []string{"--config", down}, "empty", 3 * time.Second},
		{"tool_input not an object", patch(t, good, map[string]any{"tool_input": "ls"}), []string{"--config", down}, "tool_input", 3 * time.Second},
		{"no tool_use_id", patch(t, good, map[string]any{"tool_use_id": nil}), []string{"--config", down}, "tool_use_id", 3 * time.Second},
		{"no worker", good, []string{"--config", noWorker}, "no worker id", 3 * time.Second},
		{"no lane", good, []string{"--config", noLane}, "no lane for the main session", 3 * time.Second},
		{"unmapped subagent", patch(t, good, map[string]any{"agent_type": "Plan", "agent_id": "a1"}), []string{"--config", down}, `subagent type "Plan"`, 3 * time.Second},
		{"config typo", good, []string{"--config", typo}, `unknown field "subagent"`, 3 * time.Second},
		{"Task call with the issuer down", taskCall("Explore"), []string{"--config", downSub}, "cannot reach the writ issuer", 3 * time.Second},
		{"Task call for an unmapped type", taskCall("Plan"), []string{"--config", downSub}, `Task call for subagent type "Plan" refused: no lane`, 3 * time.Second},
		{"Agent call without a type", patch(t, taskCall("x"), map[string]any{"tool_name": "Agent", "tool_input": map[string]any{"prompt": "look"}}), []string{"--config", downSub}, `subagent type "general-purpose"`, 3 * time.Second},
		{"config key in another case", good, []string{"--config", caseTrick}, `unknown field "Lane"`, 3 * time.Second},
		{"NATS user is not the worker", good, []string{"--config", userMismatch}, "is not the worker", 3 * time.Second},
		{"missing config file", good, []string{"--config", filepath.Join(dir, "nope.json")}, "no such file", 3 * time.Second},
		{"bad flag", good, []string{"--config", down, "--bogus"}, "--bogus", 3 * time.Second},
		{"bad deadline", good, []string{"--config", down, "--deadline", "0s"}, "--deadline", 3 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := harness.ClaudeCode
			args := []string{}
			for _, a := range tc.args {
				if a == "--harness-codex" {
					h = harness.Codex
					continue
				}
				args = append(args, a)
			}
			r := binRun{stdin: tc.stdin}.run(t, append([]string{"hook", h}, args...)...)
			if r.code != 2 || r.stdout != "" {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 2 and no stdout", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("stderr %q: want one line mentioning %q", r.stderr, tc.want)
			}
			// A call not yet run that the issuer could not be asked about
			// says it was blocked rather than run unchecked; a call that
			// already ran never says so.
			transport := strings.Contains(tc.want, "cannot reach") || strings.Contains(tc.want, "did not answer")
			if post := strings.HasPrefix(tc.name, "post "); transport && strings.Contains(r.stderr, grants.KeptBlocked) == post {
				t.Fatalf("stderr %q: post hook %v, says it blocked the call %v", r.stderr, post, !post)
			}
			if r.took > tc.max {
				t.Fatalf("took %v", r.took)
			}
		})
	}

	t.Run("stdin never closes", func(t *testing.T) {
		cmd := binRun{timeout: runTimeout}.command(t, "hook", "claude-code", "--config", down, "--deadline", "500ms")
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var errb strings.Builder
		cmd.Stderr = &errb
		start := time.Now()
		if _, err := w.Write(good[:20]); err != nil {
			t.Fatal(err)
		}
		err = cmd.Run()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(errb.String(), "before the deadline") {
			t.Fatalf("exit %v stderr %q", err, errb.String())
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v with a 500ms deadline", d)
		}
	})
}

// The worker config is found in .writ/worker.json, then in the state dir.
func TestHookFindsItsConfig(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	project := t.TempDir()
	state := filepath.Join(project, "state", "writ") // $XDG_STATE_HOME/writ under binRun's HOME
	writeJSON(t, state, "worker.json", map[string]any{"worker": "from-state", "lane": "coordinator", "nats_url": env.URL})
	in := patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "cfg-state"})
	if r := (binRun{dir: project, stdin: in}).run(t, "hook", "claude-code"); r.code != 0 {
		t.Fatalf("state dir config: %+v", r)
	}
	// The project's own config wins, but may not skip the harness prompt:
	// the agent can edit that file.
	writeJSON(t, project, worker.ProjectConfig, map[string]any{"worker": "from-project", "lane": "isolated", "nats_url": env.URL, "replace_prompt": true})
	in = patch(t, fixture(t, "claude-code/pre_bash.json"), map[string]any{"session_id": "cfg-project"})
	r := binRun{dir: project, stdin: in}.run(t, "hook", "claude-code")
	if d := hookDecision(t, r.stdout); r.code != 0 || d["permissionDecision"] != "deny" {
		t.Fatalf("project config (isolated lane, Bash denied): %+v", r)
	}
	in = patch(t, fixture(t, "claude-code/pre_webfetch.json"), map[string]any{"session_id": "cfg-project"})
	if r := (binRun{dir: project, stdin: in}).run(t, "hook", "claude-code"); r.code != 0 || r.stdout != "" {
		t.Fatalf("replace_prompt from the project config must be ignored: %+v", r)
	}
	evs := receipts(t, env)
	var workers []string
	for _, e := range evs {
		if e.Kind == events.KindPermit || e.Kind == events.KindDeny {
			workers = append(workers, e.Worker+"/"+e.Lane)
		}
	}
	if !reflect.DeepEqual(workers, []string{"from-state/coordinator", "from-project/isolated", "from-project/isolated"}) {
		t.Fatalf("requests came from %v", workers)
	}
}
