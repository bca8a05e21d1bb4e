package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/api/client"
	authlevel "github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/provenance"
)

// DefaultMCPDeadline bounds the decision on one tools/call.
const DefaultMCPDeadline = 10 * time.Second

// MCP runs the MCP server argv behind writ: every tools/call it is sent
// needs a grant in the config's lane (or af's --lane) within deadline.
// server names it in tool names; "" for argv[0]'s base name.
//
// The proxy keeps a provenance session as the hooks do: each call's
// arguments are traced against the session's registry, and each
// confirmed result is registered as a source (channel tool_result, scope
// task, the tool's name, and the resource it came from when the grant
// named one; see resultResource). session joins the registry of a harness
// session (its session_id) so that a prompt its hooks registered counts;
// "" starts a fresh one for this run.
func (g *Agent) MCP(ctx context.Context, flags *pflag.FlagSet, af *AdapterFlags, server, session string, deadline time.Duration, argv []string) error {
	cfg, err := af.resolve(flags, g)
	if err != nil {
		return Usagef("%v", err)
	}
	lane, err := cfg.laneFor("")
	if err != nil {
		return Usagef("%v", err)
	}
	if deadline <= 0 {
		return Usagef("--deadline must be positive, got %v", deadline)
	}
	if !flags.Changed("timeout") {
		g.Conn.Timeout = deadline
	}
	if server == "" {
		server = filepath.Base(argv[0])
	}
	server = sanitizeServer(server)
	if server == "" {
		return Usagef("--server: give the MCP server a name of letters, digits, - and _")
	}
	if session == "" {
		session = client.NewKey()
	} else if err := (harness.HookInput{SessionID: session}).CheckSession(); err != nil {
		return Usagef("--session: %v", err)
	}
	return g.runMCP(ctx, argv, &mcpGate{
		g: g, lane: lane, route: cfg.Route, server: server, session: session, run: client.NewKey(), deadline: deadline,
		store: newSessionStore(af.stateDir, session, cfg.Provenance.maxBytes()),
	})
}

// sanitizeServer keeps letters, digits, - and _ (a server name ends up in
// a tool name the policy matches on).
func sanitizeServer(s string) string {
	s = strings.TrimSuffix(s, filepath.Ext(s))
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return -1
	}, s)
}

// runMCP starts the server and proxies until it exits.
func (g *Agent) runMCP(ctx context.Context, argv []string, gate *mcpGate) error {
	defer gate.close()
	// The proxy, the gate and the server all write diagnostics.
	g.Stderr = &syncWriter{w: g.Stderr}
	up := exec.Command(argv[0], argv[1:]...)
	up.Stderr = g.Stderr
	up.WaitDelay = 3 * time.Second // a grandchild holding stderr must not hold us
	toUp, err := up.StdinPipe()
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	fromUp, err := up.StdoutPipe()
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if err := up.Start(); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("starting the MCP server: %v", err)}
	}
	// An interrupt goes to the server; the proxy ends when it does.
	stop := context.AfterFunc(ctx, func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		time.AfterFunc(3*time.Second, func() { _ = up.Process.Kill() })
	})
	defer stop()

	p := &harness.Proxy{Gate: gate, Logf: func(format string, a ...any) {
		fmt.Fprintf(g.Stderr, "worker-agent mcp: "+format+"\n", a...)
	}}
	// The Gate's requests outlive an interrupt long enough to record what
	// the server answered.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	perr := p.Run(rctx, g.Stdin, g.Stdout, fromUp, toUp)

	werr := up.Wait()
	if perr != nil {
		fmt.Fprintf(g.Stderr, "worker-agent mcp: %v\n", perr)
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if code := ee.ExitCode(); code > 0 {
			return &ExitError{Code: code}
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("the MCP server ended: %v", werr)}
	}
	return nil
}

// mcpGate decides tools/call requests with grants and reports their
// effects. It holds one NATS connection for the proxy's life, dialled on
// the first call and kept (the client reconnects by itself).
type mcpGate struct {
	g        *Agent
	lane     string
	route    string // the config's route (see grantContext.Route)
	server   string
	session  string // the idempotency keys' and the provenance registry's session
	run      string // a fresh id per proxy run (see callID)
	deadline time.Duration
	store    *sessionStore

	mu   sync.Mutex
	auth authority
	// calls holds the JSON-RPC ids of tools/call requests being decided
	// or permitted in this run: a repeated id is not a second permit
	// (the rule of replay.go, where delivery is in-process).
	calls map[string]bool
}

// claim reserves a call id; false if it is being decided or was
// permitted already.
func (m *mcpGate) claim(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls[id] {
		return false
	}
	if m.calls == nil {
		m.calls = map[string]bool{}
	}
	m.calls[id] = true
	return true
}

// unclaim releases a call id that was not permitted.
func (m *mcpGate) unclaim(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.calls, id)
}

func (m *mcpGate) authority(ctx context.Context) (authority, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.auth != nil {
		return m.auth, nil
	}
	a, err := m.g.dialDirect(ctx)
	if err != nil {
		return nil, err
	}
	m.auth = a
	return a, nil
}

func (m *mcpGate) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.auth != nil {
		m.auth.Close()
	}
}

func (m *mcpGate) Check(ctx context.Context, tc harness.ToolCall) harness.Verdict {
	tool := harness.MCPToolName(m.server, tc.Name)
	refuse := func(err error) harness.Verdict {
		return harness.Verdict{Refusal: "writ did not run this " + tool + " call: " + harness.OneLine(err.Error())}
	}
	if len(tool) > harness.MaxToolLen || strings.ContainsFunc(tool, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return refuse(errors.New("the tool name is too long or contains control characters"))
	}
	args, err := harness.CanonicalArgs(tc.Args)
	if err != nil {
		return refuse(err)
	}
	call := harness.Call{Harness: harness.MCP, Session: m.session, CallID: m.callID(tc), Tool: tool, Args: args}
	if !m.claim(call.CallID) {
		return refuse(fmt.Errorf("%w (request id %s): the same call is not permitted twice; send it again with a new id", errReplayed, call.CallID))
	}
	permitted := false
	defer func() {
		if !permitted {
			m.unclaim(call.CallID)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, m.deadline)
	defer cancel()
	a, err := m.authority(ctx)
	if err != nil {
		return refuse(blocked(err))
	}
	gc := grantContext{Route: m.route}
	// Trace the arguments as the PreToolUse hook does. Waiting for a
	// registering result's lock may take half the deadline, not all of
	// it; an unreadable registry traces nothing (every field model-made).
	lctx, lcancel := context.WithTimeout(ctx, time.Until(deadlineOf(ctx))/2)
	reg, lerr := m.store.load(lctx)
	lcancel()
	if lerr != nil {
		fmt.Fprintf(m.g.Stderr, "worker-agent mcp: %s — asking without field traces, so every field counts as model-made\n", harness.OneLine(lerr.Error()))
	}
	gc.Provenance = traceArgs(reg, call.Args)
	env, err := authorize(ctx, a, call, m.lane, gc)
	if err != nil {
		return refuse(blocked(err))
	}
	if env.Decision != grants.Permit {
		// The refusal goes to the model; the operator command that
		// approves a held call, or the rule that denied it, only to the
		// proxy's stderr, which the harness shows to the person.
		if note := harness.OperatorNote(tool, env); note != "" {
			fmt.Fprintf(m.g.Stderr, "worker-agent mcp: %s\n", note)
		} else if rule := harness.DecidingRule(env); rule != "" {
			fmt.Fprintf(m.g.Stderr, "worker-agent mcp: denied %s: %s by rule %s\n", harness.OneLine(tool), env.Reason, rule)
		}
		return harness.Verdict{Refusal: harness.RefusalReason(tool, env)}
	}
	permitted = true
	return harness.Verdict{Allow: true, Ref: mcpRef{grant: env.GrantID, target: env.Target}}
}

// callID is the call id a tools/call's idempotency key is made of: the
// proxy run and the JSON-RPC id. JSON-RPC ids start over with every
// client connection, and several proxies (or one restarted) may join one
// session: the run keeps one call's key from naming another's grant.
func (m *mcpGate) callID(tc harness.ToolCall) string { return m.run + "/" + tc.IDKey() }

// mcpRef is what a permitted call hands to Done: its grant and the
// grant's canonical target.
type mcpRef struct{ grant, target string }

// MCPVerifier names an MCP server as the verifier of its own answer.
func MCPVerifier(server string) string { return "mcp-server:" + server }

func (m *mcpGate) Done(ctx context.Context, tc harness.ToolCall, ref any, outcome string, result json.RawMessage) {
	r, _ := ref.(mcpRef)
	tool := harness.MCPToolName(m.server, tc.Name)
	ctx, cancel := context.WithTimeout(ctx, m.deadline)
	defer cancel()
	a, err := m.authority(ctx)
	if err != nil {
		fmt.Fprintf(m.g.Stderr, "worker-agent mcp: recording the %s result of %s (grant %s): %v\n", outcome, tool, r.grant, err)
		return
	}
	// Register what the call brought into the session, so that a value
	// copied from it later traces to it (and to its level): with the
	// outcome, in one request.
	var src *pendingSource
	if text := harness.MCPResultText(result, harness.MaxSourceContent); outcome == grants.OutcomeConfirmed && len(text) > 0 {
		s := newSource(m.session, m.callID(tc), authlevel.ChannelToolResult, scopeTask, harness.ResultResource(r.target), tool,
			"the result of this "+tool+" call", text)
		// A structured result keeps its leaves by JSON pointer, as the
		// hook's do, so that a policy's result schema can attest some
		// of its fields.
		s.leaves, _ = provenance.ResultLeaves(result)
		src = &s
	}
	_, notes, recErr, regErr := reportSpent(ctx, a, m.store, harness.Call{Tool: tool}, spentCall{grant: r.grant, target: r.target},
		outcome, MCPVerifier(m.server), src)
	if recErr != nil {
		fmt.Fprintf(m.g.Stderr, "worker-agent mcp: recording the %s result of %s (grant %s): %v\n", outcome, tool, r.grant, recErr)
	}
	for _, n := range notes {
		fmt.Fprintf(m.g.Stderr, "worker-agent mcp: %s\n", harness.OneLine(n))
	}
	if regErr != nil {
		fmt.Fprintf(m.g.Stderr, "worker-agent mcp: %s\n", harness.OneLine(regErr.Error()))
	}
}

// syncWriter serialises writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
