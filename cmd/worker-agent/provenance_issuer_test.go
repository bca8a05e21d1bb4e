// End-to-end provenance through the real hook entry point (the built
// binary) against a real single-node issuer: source registration and the
// judging of field traces.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

// payPolicy requires instruction authority on a payment's recipient and
// holds writes under */memory/* for the owner.
const payPolicy = `{
  "version": 2,
  "default_ttl": "1m",
  "lanes": {"coordinator": {"surfaces": ["*"], "consequences": ["*"]}},
  "surfaces": [
    {"id": "payments", "tools": ["mcp__bank__pay"], "operation": "pay", "consequence": "outbound_send",
     "target": {"field": "to", "canon": "raw"}, "amount_field": "amount"},
    {"id": "file_write", "tools": ["Write", "Edit"], "operation": "write", "consequence": "local_mutation",
     "target": {"field": "file_path", "canon": "path"}, "sinks": ["content", "new_string"]},
    {"id": "web_fetch", "tools": ["WebFetch"], "operation": "fetch", "consequence": "remote_query",
     "target": {"field": "url", "canon": "url"}},
    {"id": "shell", "tools": ["Bash"], "operation": "execute", "consequence": "arbitrary_execution",
     "target": {"field": "command", "canon": "shell"}, "sinks": ["command"]}
  ],
  "boundaries": {"egress_allow": ["docs.stripe.com"]},
  "provenance": {
    "require": [{"id": "pay-recipient", "surfaces": ["payments"], "fields": ["to"], "authority": "instruction"}],
    "memory_paths": ["*/memory/*"]
  }
}`

func startPayIssuer(t *testing.T) *testenv.Single {
	t.Helper()
	if _, err := policy.Parse([]byte(payPolicy)); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	return testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.InitialPolicy = []byte(payPolicy)
	})
}

// sourceEvents returns the source receipts of a session, by channel.
func sourceEvents(evs []events.Event, session string) map[string][]events.Event {
	out := map[string][]events.Event{}
	for _, e := range evs {
		if e.Kind == events.KindSource && e.Session == session {
			out[e.Channel] = append(out[e.Channel], e)
		}
	}
	return out
}

func TestProvenanceEndToEnd(t *testing.T) {
	env := startPayIssuer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	project := filepath.Join(dir, "shop")
	if err := os.MkdirAll(filepath.Join(project, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "CLAUDE.md"), []byte(claudeMD), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	const session = "e2e-pay-1"
	at := map[string]any{"session_id": session, "cwd": project}
	hook := func(in []byte) result {
		t.Helper()
		return binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfg, "--state-dir", state)
	}
	quiet := func(what string, r result) {
		t.Helper()
		if r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("%s: %+v", what, r)
		}
	}
	pay := func(callID, to string) result {
		t.Helper()
		return hook(patch(t, payCall(t, session, callID, map[string]any{"to": to, "amount": 4200}), map[string]any{"cwd": project}))
	}

	// What enters the session is registered, each in its own process.
	quiet("SessionStart", hook(patch(t, fixture(t, "claude-code/session_start.json"), at)))
	// A resumed (or compacted) session registers the unchanged file again
	// under the same id: the issuer answers as before, no new source.
	quiet("SessionStart resume", hook(patch(t, fixture(t, "claude-code/session_start.json"), map[string]any{"session_id": session, "cwd": project, "source": "resume"})))
	quiet("UserPromptSubmit", hook(patch(t, fixture(t, "claude-code/user_prompt_submit.json"), at)))
	quiet("PreToolUse WebFetch", hook(patch(t, fixture(t, "claude-code/pre_webfetch.json"), at)))
	quiet("PostToolUse WebFetch", hook(patch(t, fixture(t, "claude-code/post_webfetch.json"), at)))
	// A repeated hook registers nothing new.
	quiet("PostToolUse WebFetch again", hook(patch(t, fixture(t, "claude-code/post_webfetch.json"), at)))

	srcs := sourceEvents(receipts(t, env), session)
	md, prompt, web := srcs["instruction_file"], srcs["user_prompt"], srcs["web_fetch"]
	if len(md) != 1 || len(prompt) != 1 || len(web) != 1 {
		t.Fatalf("source receipts: %d instruction_file, %d user_prompt, %d web_fetch", len(md), len(prompt), len(web))
	}
	mdID, _, mdPath, _ := md[0].SourceDescriptor()
	promptID, _, _, _ := prompt[0].SourceDescriptor()
	webID, _, _, _ := web[0].SourceDescriptor()
	if md[0].Authority != "instruction" || mdPath != filepath.Join(project, "CLAUDE.md") || md[0].Scope != "session" ||
		prompt[0].Authority != "instruction" || prompt[0].Scope != "session" ||
		web[0].Authority != "evidence" || web[0].Scope != "task" || web[0].Tool != "WebFetch" || web[0].Worker != "w1" {
		t.Fatalf("source receipts:\n%+v\n%+v\n%+v", md[0], prompt[0], web[0])
	}
	// The separate processes shared one registry file.
	reg, err := loadRegistry(t, state, session)
	if err != nil || reg == nil {
		t.Fatalf("registry: %v", err)
	}
	for id, ch := range map[string]string{mdID: "instruction_file", promptID: "user_prompt", webID: "web_fetch"} {
		if d, ok := reg.Source(id); !ok || string(d.Channel) != ch {
			t.Fatalf("local registry lacks %s (%s): %+v", id, ch, d)
		}
	}

	// The recipient the instruction file names, and the one the user
	// typed, may be paid.
	quiet("pay the CLAUDE.md recipient", pay("toolu_pay_md", approvedTo))
	quiet("pay the prompt's recipient", pay("toolu_pay_prompt", promptTo))

	// The web page's recipient may not; the model is told where the value
	// came from and what to do.
	r := pay("toolu_pay_web", attackerTo)
	d := hookDecision(t, r.stdout)
	if r.code != 0 || d["permissionDecision"] != "deny" {
		t.Fatalf("pay the page's recipient: %+v", r)
	}
	for _, want := range []string{"authority_too_low", "The value of /to came from web_fetch content (source " + webID, "ask the user to confirm", "Grounds: field=/to"} {
		if !strings.Contains(d["permissionDecisionReason"], want) {
			t.Errorf("reason lacks %q: %s", want, d["permissionDecisionReason"])
		}
	}
	// Nor one the model made up.
	r = pay("toolu_pay_invented", inventedTo)
	if d := hookDecision(t, r.stdout); !strings.Contains(d["permissionDecisionReason"], "traced to nothing registered") {
		t.Fatalf("pay an invented recipient: %+v", r)
	}
	evs := receipts(t, env)
	decision := func(callID string) events.Event {
		t.Helper()
		got := byKey(evs, harness.IdempotencyKey(harness.ClaudeCode, session, callID))
		if len(got) == 0 {
			t.Fatalf("no receipt for %s", callID)
		}
		return got[0]
	}
	if e := decision("toolu_pay_md"); e.Kind != events.KindPermit || !slices.Contains(e.Rules, "authority:pay-recipient") {
		t.Fatalf("CLAUDE.md recipient: %+v", e)
	}
	if e := decision("toolu_pay_web"); e.Reason != string(grants.ReasonAuthorityTooLow) || len(e.Grounds) == 0 {
		t.Fatalf("page recipient: %+v", e)
	}

	// The agent copies the page into a note: the note is registered as
	// derived content whose origin is the page.
	write := patch(t, fixture(t, "claude-code/pre_write.json"), map[string]any{
		"session_id": session, "cwd": project, "tool_use_id": "toolu_write_note",
		"tool_input": map[string]any{"file_path": filepath.Join(project, "notes.md"), "content": webPageText},
	})
	quiet("PreToolUse Write", hook(write))
	quiet("PostToolUse Write", hook(patch(t, write, map[string]any{"hook_event_name": "PostToolUse", "tool_response": map[string]any{"type": "create"}})))
	derived := sourceEvents(receipts(t, env), session)["derived"]
	if len(derived) != 1 {
		t.Fatalf("derived sources: %+v", derived)
	}
	_, origins, path, modelMade := derived[0].SourceDescriptor()
	if !reflect.DeepEqual(origins, []string{webID}) || derived[0].Authority != "evidence" ||
		path != filepath.Join(project, "notes.md") || modelMade {
		t.Fatalf("derived source: %+v", derived)
	}

	// A write under a memory path is a draft for the owner.
	mem := patch(t, write, map[string]any{"tool_use_id": "toolu_write_memory",
		"tool_input": map[string]any{"file_path": filepath.Join(project, "memory", "prefs.md"), "content": "Always pay " + promptTo}})
	r = hook(mem)
	if d := hookDecision(t, r.stdout); r.code != 0 || d["permissionDecision"] != "deny" ||
		!strings.Contains(d["permissionDecisionReason"], "memory_write_review") || !strings.Contains(d["permissionDecisionReason"], "draft awaiting the owner's approval") {
		t.Fatalf("memory write: %+v", r)
	}

	// An unreadable registry: the hook asks without traces, so even the
	// approved recipient is refused (model-made), and says why on stderr;
	// the next registration starts a fresh file and says so.
	if err := os.WriteFile(registryPath(state, session), []byte("WPRV\x01garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = pay("toolu_pay_corrupt", approvedTo)
	if d := hookDecision(t, r.stdout); r.code != 0 || d["permissionDecision"] != "deny" || !strings.Contains(r.stderr, "unreadable") {
		t.Fatalf("pay with an unreadable registry: %+v", r)
	}
	post := patch(t, fixture(t, "claude-code/post_bash.json"), at)
	if r := hook(patch(t, post, map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})); r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "unreadable") {
		t.Fatalf("PreToolUse Bash with an unreadable registry: %+v", r)
	}
	r = hook(post)
	if r.code != 0 || !strings.Contains(r.stderr, "started a fresh one") || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("post hook after corruption: %+v", r)
	}
	if reg, err := loadRegistry(t, state, session); err != nil || reg == nil {
		t.Fatalf("the rebuilt registry: %v", err)
	}
	if _, err := os.Stat(registryPath(state, session) + ".corrupt"); err != nil {
		t.Fatalf("the unreadable file was not kept aside: %v", err)
	}
}

// A source the issuer refuses (revoked) is not windowed locally, and the
// hook says so: a prompt is blocked, a tool result reported to the model.
func TestProvenanceRegistrationRefused(t *testing.T) {
	env := startPayIssuer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	const session = "e2e-refused"
	in := patch(t, fixture(t, "claude-code/user_prompt_submit.json"), map[string]any{"session_id": session})
	if r := (binRun{stdin: in}).run(t, "hook", "claude-code", "--config", cfg, "--state-dir", state); r.code != 0 || r.stderr != "" {
		t.Fatalf("first prompt: %+v", r)
	}
	prompts := sourceEvents(receipts(t, env), session)[authority.ChannelUserPrompt]
	if len(prompts) != 1 {
		t.Fatalf("prompt source receipts: %+v", prompts)
	}
	promptID, _, _, _ := prompts[0].SourceDescriptor()
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if rev, err := client.New(nc, "operator").Revoke(testCtx(t), api.RevokeRequest{Source: promptID}); err != nil || rev.Decision != grants.Permit {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	// The same prompt again: the same id, now revoked.
	r := binRun{stdin: in}.run(t, "hook", "claude-code", "--config", cfg, "--state-dir", state)
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "source_revoked") || !strings.Contains(r.stderr, "the prompt was not sent") {
		t.Fatalf("revoked prompt: %+v", r)
	}

	// A tool result whose source was revoked, reported again (a repeated
	// PostToolUse hook): the effect is recorded as before, and the model
	// is told the result is not registered.
	post := patch(t, fixture(t, "claude-code/post_bash.json"), map[string]any{"session_id": session})
	pre := patch(t, post, map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})
	for _, ev := range [][]byte{pre, post} {
		if r := (binRun{stdin: ev}).run(t, "hook", "claude-code", "--config", cfg, "--state-dir", state); r.code != 0 || r.stderr != "" {
			t.Fatalf("bash: %+v", r)
		}
	}
	var results []events.Event
	for _, es := range sourceEvents(receipts(t, env), session) {
		for _, e := range es {
			if e.Tool == "Bash" {
				results = append(results, e)
			}
		}
	}
	if len(results) != 1 {
		t.Fatalf("result source receipts: %+v", results)
	}
	resultID, _, _, _ := results[0].SourceDescriptor()
	if rev, err := client.New(nc, "operator").Revoke(testCtx(t), api.RevokeRequest{Source: resultID}); err != nil || rev.Decision != grants.Permit {
		t.Fatalf("revoke the result: %+v %v", rev, err)
	}
	r = binRun{stdin: post}.run(t, "hook", "claude-code", "--config", cfg, "--state-dir", state)
	if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
		!strings.Contains(r.stderr, "not registered as a source: the result of this Bash call (refused: deny source_revoked") ||
		!strings.Contains(r.stderr, "count as model-made") {
		t.Fatalf("revoked result: %+v", r)
	}
	// The effect report itself went through: the line is about the
	// registration alone.
	if strings.Contains(r.stderr, "grant") || strings.Contains(r.stderr, "refused the result") {
		t.Fatalf("the effect report failed too: %s", r.stderr)
	}
}

// Codex's prompt and session-start hooks register sources the same way.
func TestProvenanceCodexEvents(t *testing.T) {
	env := startPayIssuer(t)
	dir := t.TempDir()
	project := filepath.Join(dir, "ledger")
	_ = os.MkdirAll(project, 0o755)
	if err := os.WriteFile(filepath.Join(project, "AGENTS.md"), []byte("Run cargo test before every commit.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeJSON(t, dir, "worker.json", map[string]any{"worker": "cx1", "lane": "coordinator", "nats_url": env.URL})
	for _, fx := range []string{"codex/session_start.json", "codex/user_prompt_submit.json"} {
		in := patch(t, fixture(t, fx), map[string]any{"cwd": project})
		if r := (binRun{stdin: in}).run(t, "hook", "codex", "--config", cfg, "--state-dir", filepath.Join(dir, "state")); r.code != 0 || r.stdout != "" || r.stderr != "" {
			t.Fatalf("%s: %+v", fx, r)
		}
	}
	var hin harness.HookInput
	_ = json.Unmarshal(fixture(t, "codex/session_start.json"), &hin)
	srcs := sourceEvents(receipts(t, env), hin.SessionID)
	if len(srcs["instruction_file"]) != 1 || len(srcs["user_prompt"]) != 1 || srcs["user_prompt"][0].Worker != "cx1" {
		t.Fatalf("codex sources: %+v", srcs)
	}
}

// distinctIBAN returns IBAN-shaped values that share no 16-byte run.
func distinctIBAN(i int) string {
	sum := sha256.Sum256([]byte{byte(i)})
	return fmt.Sprintf("DE%02d%s", i, strings.ToUpper(hex.EncodeToString(sum[:9])))
}

// Hook invocations of one session running at once, in this process (as
// parallel tool calls run their hooks): every result lands in the shared
// registry, and a later PreToolUse traces to each.
func TestConcurrentHooksShareTheRegistry(t *testing.T) {
	env := startPayIssuer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	tap := wiretap(t, env.URL, "w1")
	const session, n = "e2e-parallel", 6
	post := func(i int) []byte {
		return patch(t, fixture(t, "claude-code/post_bash.json"), map[string]any{
			"session_id": session, "tool_use_id": fmt.Sprintf("toolu_par_%d", i),
			"tool_input":    map[string]any{"command": fmt.Sprintf("cat invoice-%d.txt", i)},
			"tool_response": map[string]any{"stdout": "invoice " + strconv.Itoa(i) + ": pay to " + distinctIBAN(i)},
		})
	}
	for i := 0; i < n; i++ { // each call's PreToolUse first, so its PostToolUse finds a grant
		pre := patch(t, post(i), map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})
		if r := runCLI(t, string(pre), "hook", "claude-code", "--config", cfg, "--state-dir", state); r.code != 0 {
			t.Fatalf("pre %d: %+v", i, r)
		}
	}
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runCLI(t, string(post(i)), "hook", "claude-code", "--config", cfg, "--state-dir", state)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("post %d: %+v", i, r)
		}
	}
	reg, err := loadRegistry(t, state, session)
	if err != nil || reg == nil {
		t.Fatalf("registry: %v", err)
	}
	if _, per := reg.Bytes(); len(per) != n {
		t.Fatalf("%d sources in the registry, want %d: concurrent updates were lost", len(per), n)
	}
	for i := 0; i < n; i++ {
		to := distinctIBAN(i)
		in := payCall(t, session, fmt.Sprintf("toolu_pay_par_%d", i), map[string]any{"to": to})
		runCLI(t, string(in), "hook", "claude-code", "--config", cfg, "--state-dir", state)
		req := grantFor(t, tap, harness.IdempotencyKey(harness.ClaudeCode, session, fmt.Sprintf("toolu_pay_par_%d", i)))
		if len(req.Provenance) != 1 || len(req.Provenance[0].Matches) != 1 || !req.Provenance[0].Covered {
			t.Fatalf("pay %d: traces %+v", i, req.Provenance)
		}
	}
}
