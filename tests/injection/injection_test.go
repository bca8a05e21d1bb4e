package injection

// Scenario format (testdata/scenarios/*.txt), one step per line; blank
// lines and lines starting with # are ignored. {ws} in any step stands for
// the session's workspace directory (the hook's cwd).
//
//	session NAME                  start a new harness session (fresh workspace)
//	file REL TEXT                 write TEXT to the workspace file REL
//	start                         SessionStart hook (instruction files are read here)
//	prompt TEXT                   UserPromptSubmit hook with TEXT as the prompt
//	run TOOL ARGS -> RESPONSE     PreToolUse (must be permitted), then PostToolUse
//	                              with RESPONSE (JSON, else a string) as tool_response
//	call TOOL ARGS => DECISION [REASON] [grounds~TEXT | text~TEXT]
//	                              PreToolUse; the decision receipt must carry DECISION
//	                              and REASON, and one grounds line (grounds~) or the
//	                              hook's answer to the harness (text~) must contain
//	                              TEXT; a permitted call then gets its PostToolUse
//	harness claude-code|codex|mcp the hook the following events run through (before
//	                              the first session line; claude-code by default).
//	                              mcp: tool calls named mcp__SERVER__TOOL go through
//	                              a `worker-agent mcp --server SERVER --session S`
//	                              proxy in front of a scripted MCP server (RESPONSE
//	                              is the text of its result), everything else through
//	                              the claude-code hook of the same session
//	agent TYPE ID | agent -       the following tool calls come from a subagent of
//	                              TYPE with agent id ID (the worker config maps
//	                              Explore to isolated, general-purpose to specialist,
//	                              * to isolated); "-" returns to the main session
//	quiet                         no call of this session so far was refused or
//	                              held for review
//	save-registry                 copy the worker's local provenance state aside
//	restore-registry              put the copy back (after a revocation, say)
//	revoke-source CHANNEL [TOOL]  the operator revokes the session's latest source
//	                              registered on CHANNEL (by TOOL, when given: an
//	                              MCP proxy also registers the results of the
//	                              calls it forwards) (issuer revoke --source)
//
// Checkpoints (a restored session must hold nothing spendable):
//
//	hold TOOL ARGS                ask for a grant for the call through the API and
//	                              keep it unspent (it must be permitted)
//	stage TOOL DESTINATION        remember an outbound message prepared for later
//	approve-last                  the operator approves the session's latest review
//	checkpoint save               worker-agent checkpoint save: the held grant (as
//	                              history), the latest review caption, the staged
//	                              message and the session's provenance descriptors
//	checkpoint restore            worker-agent checkpoint restore: a new incarnation
//	revoke-dest TARGET            the operator revokes a destination: a policy with
//	                              a deny rule for the canonical TARGET
//	replay-held => DECISION [REASON] [text~TEXT]
//	                              spend the grant id read back from the bundle
//	resend-staged BODY => DECISION [REASON]
//	                              PreToolUse for the bundle's staged message
//	                              ({"to":DESTINATION,"subject":"staged","body":BODY})
//
// Fleets (a subagent is a spawned child worker of the session's worker):
//
//	expect-spawn AGENT_ID LANE    a spawn receipt names the subagent's child worker,
//	                              its parent (the session's worker) and LANE
//	revoke-worker                 the operator revokes the session's worker
//	                              (issuer revoke --worker), subtree included
//
//	claim-review => DECISION [REASON]
//	                              relay the keep token of the bundle's review caption
//	                              as a person's chat reply

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/gobuild"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy/policyfile"
)

const (
	worker = "w1"
	lane   = "coordinator"
	// stepTimeout bounds one hook run and the wait for its receipt.
	stepTimeout = 20 * time.Second
)

// bins holds the worker-agent binary the scenarios run, built once.
var bins gobuild.Cache

// workerAgent builds cmd/worker-agent once per test binary run.
func workerAgent(t *testing.T) string {
	t.Helper()
	p, err := bins.Path("github.com/writ-dev/writ/cmd/worker-agent")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// envFakeMCP names the directory a scripted MCP server reads its answers
// from; when it is set the test binary is that server (see fakeMCP).
const envFakeMCP = "INJECTION_FAKE_MCP_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envFakeMCP); dir != "" {
		fakeMCP(dir)
		os.Exit(0)
	}
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// step is one parsed scenario line.
type step struct {
	line     int
	verb     string
	a, b     string // verb-specific: tool and args, file and text, ...
	response string // run: the tool_response
	decision grants.Decision
	reason   grants.Reason
	grounds  string
	text     string // call: the hook's answer must contain it
}

func parseScenario(path string) ([]step, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []step
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		s := step{line: n, verb: verb}
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s: %q", filepath.Base(path), n, why, line) }
		switch verb {
		case "session", "prompt", "revoke-source", "harness":
			if rest == "" {
				return nil, bad(verb + " needs an argument")
			}
			s.a = rest
		case "start", "save-registry", "restore-registry", "quiet", "approve-last", "revoke-worker":
		case "expect-spawn":
			s.a, s.b, _ = strings.Cut(rest, " ")
			if s.a == "" || s.b == "" {
				return nil, bad("want: expect-spawn AGENT_ID LANE")
			}
		case "checkpoint", "revoke-dest":
			if rest == "" {
				return nil, bad(verb + " needs an argument")
			}
			s.a = rest
		case "stage":
			s.a, s.b, _ = strings.Cut(rest, " ")
			if s.a == "" || s.b == "" {
				return nil, bad("want: stage TOOL DESTINATION")
			}
		case "hold":
			s.a, s.b, _ = strings.Cut(rest, " ")
		case "replay-held", "resend-staged", "claim-review":
			call, want, ok := strings.Cut(rest, "=> ")
			if !ok {
				return nil, bad("want: " + verb + " ... => DECISION [REASON]")
			}
			call = strings.TrimSpace(call)
			s.b = call
			if w, text, ok := strings.Cut(want, "text~"); ok {
				want, s.text = w, text
			}
			words := strings.Fields(want)
			if len(words) == 0 || len(words) > 2 {
				return nil, bad("want: DECISION [REASON]")
			}
			s.decision = grants.Decision(words[0])
			if len(words) == 2 {
				s.reason = grants.Reason(words[1])
			}
		case "agent":
			s.a, s.b, _ = strings.Cut(rest, " ")
			if s.a == "" || (s.a != "-" && s.b == "") {
				return nil, bad("want: agent TYPE ID, or agent -")
			}
		case "file":
			s.a, s.b, _ = strings.Cut(rest, " ")
			if s.a == "" || s.b == "" {
				return nil, bad("want: file REL TEXT")
			}
		case "run":
			call, resp, ok := strings.Cut(rest, " -> ")
			if !ok {
				return nil, bad("want: run TOOL ARGS -> RESPONSE")
			}
			s.a, s.b, _ = strings.Cut(call, " ")
			s.response = resp
		case "call":
			call, want, ok := strings.Cut(rest, " => ")
			if !ok {
				return nil, bad("want: call TOOL ARGS => DECISION [REASON] [grounds~TEXT]")
			}
			s.a, s.b, _ = strings.Cut(call, " ")
			var words []string
			if g, text, ok := strings.Cut(want, "grounds~"); ok {
				want, s.grounds = g, text
			} else if g, text, ok := strings.Cut(want, "text~"); ok {
				want, s.text = g, text
			}
			words = strings.Fields(want)
			if len(words) == 0 || len(words) > 2 {
				return nil, bad("want: DECISION [REASON]")
			}
			s.decision = grants.Decision(words[0])
			if len(words) == 2 {
				s.reason = grants.Reason(words[1])
			}
			switch s.decision {
			case grants.Permit, grants.Deny, grants.ApprovalRequired:
			default:
				return nil, bad("unknown decision " + words[0])
			}
		default:
			return nil, bad("unknown step " + verb)
		}
		if s.verb == "run" || s.verb == "call" || s.verb == "hold" {
			if !json.Valid([]byte(s.b)) {
				return nil, bad("tool arguments are not JSON")
			}
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// TestScenarios runs every scenario file against its own issuer.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runScenarios(t, files, doc, "")
}

// runScenarios plays each scenario file, in parallel, each against its
// own issuer running doc (YAML or JSON; nil: the issuer's built-in
// default). prefix goes before each subtest's name.
func runScenarios(t *testing.T, files []string, doc []byte, prefix string) {
	t.Helper()
	runScenariosAs(t, files, doc, prefix, "")
}

// runScenariosAs is runScenarios with every file's events going through
// mode (a harness name) unless the file names its own; "" for the files'
// own choice.
func runScenariosAs(t *testing.T, files []string, doc []byte, prefix, mode string) {
	t.Helper()
	bin := workerAgent(t)
	for _, f := range files {
		steps, err := parseScenario(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(prefix+name, func(t *testing.T) {
			t.Parallel()
			r := newRunner(t, bin, doc, name)
			if mode != "" {
				r.harness = mode
			}
			for _, s := range steps {
				if mode != "" && s.verb == "harness" {
					continue // the mode decides
				}
				r.do(t, s)
			}
			r.closeProxies(t)
		})
	}
}

// runner plays one scenario file.
type runner struct {
	bin     string
	name    string
	env     *testenv.Single
	nc      *nats.Conn
	stream  jetstream.Stream
	home    string
	state   string
	config  string
	session string
	ws      string
	harness string               // harness.ClaudeCode, harness.Codex or harness.MCP
	agent   [2]string            // agent_type, agent_id of a subagent's calls
	proxies map[string]*mcpProxy // harness mcp: by server, for the current session
	calls   int
	nextSeq uint64 // first stream seq not yet read
	seen    []events.Event
	saved   string
	policy  json.RawMessage // the policy in force (JSON)
	// Checkpoints: the held grant, the staged message, the bundle file.
	held    string
	staged  [2]string
	bundle  string
	replies int
}

func newRunner(t *testing.T, bin string, doc []byte, name string) (r *runner) {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	env := testenv.StartSingle(t, filepath.Join(root, "issuer"), nil)
	// The scenario policy declares result schemas, which the state
	// machine judges from receipt format 10: wait for the node's raise.
	testenv.WaitFor(t, testenv.SetupTimeout, "receipt format 10", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatResultFields
	})
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	op := client.New(nc, "operator")
	if doc != nil {
		// The policy's workspace is this run's temporary home.
		pol, err := policyfile.ToJSON(bytes.ReplaceAll(doc, []byte("{home}"), []byte(home)))
		if err != nil {
			t.Fatalf("policy document: %v", err)
		}
		env2, err := op.SetPolicy(ctx, pol)
		if err != nil || env2.Decision != grants.Permit {
			t.Fatalf("applying the policy document: %v %+v", err, env2)
		}
		defer func(p json.RawMessage) { r.policy = p }(pol)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	r = &runner{bin: bin, name: name, env: env, nc: nc, stream: st, home: home, nextSeq: 1, harness: harness.ClaudeCode}
	r.state = filepath.Join(r.home, "state", "writ")
	if err := os.MkdirAll(r.state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"worker": worker, "lane": lane, "nats_url": env.URL,
		"subagents": map[string]string{"Explore": "isolated", "general-purpose": "specialist", "*": "isolated"}})
	r.config = filepath.Join(root, "worker.json")
	if err := os.WriteFile(r.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *runner) where(s step) string { return fmt.Sprintf("%s.txt:%d %s", r.name, s.line, s.verb) }

func (r *runner) expand(s string) string { return strings.ReplaceAll(s, "{ws}", r.ws) }

func (r *runner) do(t *testing.T, s step) {
	t.Helper()
	if r.session == "" && s.verb != "session" && s.verb != "harness" {
		t.Fatalf("%s: a scenario starts with a session line", r.where(s))
	}
	switch s.verb {
	case "harness":
		if r.session != "" || (s.a != harness.ClaudeCode && s.a != harness.Codex && s.a != harness.MCP) {
			t.Fatalf("%s: want harness claude-code, codex or mcp before the first session", r.where(s))
		}
		r.harness = s.a
	case "agent":
		r.agent = [2]string{}
		if s.a != "-" {
			r.agent = [2]string{s.a, s.b}
		}
	case "quiet":
		ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		if err := r.readStream(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range r.seen {
			if (e.Kind == events.KindDeny || e.Kind == events.KindApprovalRequired) &&
				(e.Session == r.session || strings.HasPrefix(e.Session, r.session+"/")) {
				t.Errorf("%s: %s %s was refused: %s %s (missing %q, rules %v)", r.where(s), e.Tool, e.IdemKey, e.Decision, e.Reason, e.Missing, e.Rules)
			}
		}
	case "session":
		r.closeProxies(t)
		r.session = "sess-" + r.name + "-" + s.a
		r.ws = filepath.Join(r.home, "work", s.a)
		if err := os.MkdirAll(r.ws, 0o755); err != nil {
			t.Fatal(err)
		}
	case "file":
		p := filepath.Join(r.ws, s.a)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(r.expand(s.b)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	case "start":
		r.hook(t, s, map[string]any{"hook_event_name": "SessionStart", "source": "startup"})
	case "prompt":
		r.hook(t, s, map[string]any{"hook_event_name": "UserPromptSubmit", "prompt": r.expand(s.a)})
	case "run":
		if p := r.proxyFor(t, s); p != nil {
			id := r.callID()
			from := r.mark(t)
			text, isErr := p.call(t, r, s, r.expand(s.response))
			ev := r.decisionAfter(t, s, from)
			if ev.Decision != string(grants.Permit) || isErr {
				t.Fatalf("%s %s (%s): the tool a scenario reads with must be permitted, got %s %s (%s)", r.where(s), s.a, id, ev.Decision, ev.Reason, text)
			}
			return
		}
		id := r.callID()
		out := r.hook(t, s, r.toolEvent("PreToolUse", s, id))
		ev := r.decision(t, s, id)
		if ev.Decision != string(grants.Permit) {
			t.Fatalf("%s %s: the tool a scenario reads with must be permitted, got %s %s (%s)", r.where(s), s.a, ev.Decision, ev.Reason, out)
		}
		post := r.toolEvent("PostToolUse", s, id)
		post["tool_response"] = response(r.expand(s.response))
		r.hook(t, s, post)
	case "call":
		if p := r.proxyFor(t, s); p != nil {
			r.callID()
			from := r.mark(t)
			text, isErr := p.call(t, r, s, `{"success":true}`)
			ev := r.decisionAfter(t, s, from)
			r.checkCall(t, s, ev, text)
			// The model saw the same answer: a refusal is an isError result.
			if isErr != (s.decision != grants.Permit) {
				t.Errorf("%s %s: proxy answered %q (isError %v) for a %s", r.where(s), s.a, text, isErr, s.decision)
			}
			return
		}
		id := r.callID()
		out := r.hook(t, s, r.toolEvent("PreToolUse", s, id))
		ev := r.decision(t, s, id)
		r.checkCall(t, s, ev, out)
		// The harness saw the same answer: a refusal is a deny decision
		// on stdout, a permit is silence.
		if denied := strings.Contains(out, `"deny"`); denied != (s.decision != grants.Permit) {
			t.Errorf("%s %s: hook answered %q for a %s", r.where(s), s.a, out, s.decision)
		}
		if grants.Decision(ev.Decision) == grants.Permit {
			post := r.toolEvent("PostToolUse", s, id)
			post["tool_response"] = map[string]any{"success": true}
			r.hook(t, s, post)
		}
	case "save-registry":
		r.saved = filepath.Join(t.TempDir(), "saved")
		if err := copyTree(r.state, r.saved); err != nil {
			t.Fatalf("%s: %v", r.where(s), err)
		}
	case "restore-registry":
		if r.saved == "" {
			t.Fatalf("%s: nothing saved", r.where(s))
		}
		if err := copyTree(r.saved, r.state); err != nil {
			t.Fatalf("%s: %v", r.where(s), err)
		}
	case "revoke-source":
		r.revokeSource(t, s)
	default:
		r.checkpointStep(t, s)
	}
}

// checkCall checks a call's decision receipt and the answer the model
// saw (out) against the step.
func (r *runner) checkCall(t *testing.T, s step, ev events.Event, out string) {
	t.Helper()
	if got := grants.Decision(ev.Decision); got != s.decision || (s.reason != "" && grants.Reason(ev.Reason) != s.reason) {
		t.Errorf("%s %s %s: got %s %s (missing %q, detail %q, grounds %q), want %s %s",
			r.where(s), s.a, s.b, ev.Decision, ev.Reason, ev.Missing, ev.Detail, ev.Grounds, s.decision, s.reason)
	}
	if s.grounds != "" && !containsLine(ev.Grounds, s.grounds) {
		t.Errorf("%s %s: no grounds line contains %q: %q", r.where(s), s.a, s.grounds, ev.Grounds)
	}
	if s.text != "" && !strings.Contains(out, s.text) {
		t.Errorf("%s %s: the answer the model saw does not contain %q: %s", r.where(s), s.a, s.text, out)
	}
}

func (r *runner) callID() string {
	r.calls++
	return fmt.Sprintf("toolu_%s_%03d", strings.ReplaceAll(r.name, "-", "_"), r.calls)
}

func (r *runner) toolEvent(event string, s step, id string) map[string]any {
	ev := map[string]any{
		"hook_event_name": event, "tool_name": s.a,
		"tool_input": json.RawMessage(r.expand(s.b)), "tool_use_id": id,
	}
	if r.agent[0] != "" {
		ev["agent_type"], ev["agent_id"] = r.agent[0], r.agent[1]
	}
	return ev
}

// response is a tool_response as Claude Code sends it: JSON when the
// text is JSON, else the text itself.
func response(text string) any {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	return text
}

// hook runs the worker-agent binary on one hook event and returns its
// stdout. Every hook event of these scenarios must exit 0.
func (r *runner) hook(t *testing.T, s step, ev map[string]any) string {
	t.Helper()
	ev["session_id"] = r.session
	ev["cwd"] = r.ws
	ev["transcript_path"] = filepath.Join(r.home, "transcript.jsonl")
	in, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, "--config", r.config, "hook", r.hookHarness())
	cmd.Dir = r.ws
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(cleanEnv(), "HOME="+r.home, "XDG_STATE_HOME="+filepath.Join(r.home, "state"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: worker-agent hook %s (%s): %v\nstdout: %s\nstderr: %s", r.where(s), r.hookHarness(), ev["hook_event_name"], err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// cleanEnv is the caller's environment without WRIT_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "WRIT_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// readStream appends every receipt published since the last read.
func (r *runner) readStream(ctx context.Context) error {
	info, err := r.stream.Info(ctx)
	if err != nil {
		return err
	}
	for ; r.nextSeq <= info.State.LastSeq; r.nextSeq++ {
		m, err := r.stream.GetMsg(ctx, r.nextSeq)
		if err != nil {
			return err
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			return fmt.Errorf("receipt %d: %w", r.nextSeq, err)
		}
		r.seen = append(r.seen, ev)
	}
	return nil
}

// decision waits for the decision receipt (permit, deny or
// approval_required) of the call with tool_use_id id.
func (r *runner) decision(t *testing.T, s step, id string) events.Event {
	t.Helper()
	return r.decisionOf(t, s, harness.IdempotencyKey(r.hookHarness(), r.session, id))
}

// hookHarness is the harness whose hook runs the events: claude-code for
// everything but MCP tool calls in mcp mode.
func (r *runner) hookHarness() string {
	if r.harness == harness.MCP {
		return harness.ClaudeCode
	}
	return r.harness
}

// mark reads the receipts published so far and returns how many there
// are: decisionAfter looks at those after it.
func (r *runner) mark(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := r.readStream(ctx); err != nil {
		t.Fatal(err)
	}
	return len(r.seen)
}

// decisionAfter waits for the first decision receipt after receipt from
// of a call of the step's tool in the session (through the MCP proxy,
// whose idempotency keys name its run).
func (r *runner) decisionAfter(t *testing.T, s step, from int) events.Event {
	t.Helper()
	var found *events.Event
	var lastErr error
	testenv.WaitFor(t, stepTimeout, r.where(s)+" decision receipt of "+s.a, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if lastErr = r.readStream(ctx); lastErr != nil {
			return false
		}
		for i := from; i < len(r.seen); i++ {
			e := r.seen[i]
			switch e.Kind {
			case events.KindPermit, events.KindDeny, events.KindApprovalRequired:
				if e.Tool == s.a && e.Session == r.session && strings.HasPrefix(e.IdemKey, harness.MCP+":") {
					found = &r.seen[i]
					return true
				}
			}
		}
		return false
	})
	return *found
}

// decisionOf waits for the decision receipt of the call with idempotency
// key key.
func (r *runner) decisionOf(t *testing.T, s step, key string) events.Event {
	t.Helper()
	var found *events.Event
	var lastErr error
	testenv.WaitFor(t, stepTimeout, r.where(s)+" decision receipt of "+s.a, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if lastErr = r.readStream(ctx); lastErr != nil {
			return false
		}
		for i := len(r.seen) - 1; i >= 0; i-- {
			e := r.seen[i]
			switch e.Kind {
			case events.KindPermit, events.KindDeny, events.KindApprovalRequired:
				if e.IdemKey == key {
					found = &r.seen[i]
					return true
				}
			}
		}
		return false
	})
	return *found
}

// revokeSource revokes the session's latest source registered on channel.
func (r *runner) revokeSource(t *testing.T, s step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := r.readStream(ctx); err != nil {
		t.Fatal(err)
	}
	id := ""
	channel, tool, _ := strings.Cut(s.a, " ")
	for _, e := range r.seen {
		if e.Kind == events.KindSource && e.Session == r.session && e.Channel == channel && (tool == "" || e.Tool == tool) {
			if sid, _, _, _ := e.SourceDescriptor(); sid != "" {
				id = sid
			}
		}
	}
	if id == "" {
		t.Fatalf("%s: no %s source was registered in session %s", r.where(s), s.a, r.session)
	}
	env, err := client.New(r.nc, "operator").Revoke(ctx, api.RevokeRequest{Source: id})
	if err != nil || env.Decision != grants.Permit {
		t.Fatalf("%s: revoking source %s: %v %+v", r.where(s), id, err, env)
	}
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// copyTree replaces dst with a copy of src (regular files and
// directories only).
func copyTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o600)
		}
		return errors.New("unexpected file type at " + p)
	})
}
