package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// DefaultHookDeadline is how long a hook may take in all, well under the
// harnesses' hook timeouts (Claude Code 60s, Codex 600s by default; writ's
// installer sets 30s): a hook the harness kills for running too long lets
// the call run, so the hook must give up, and block, first.
const DefaultHookDeadline = 5 * time.Second

// Hook answers one hook event of the harness name read from g.Stdin:
// the answer on g.Stdout or g.Stderr and its exit code as an *ExitError.
// flags are the command's, to tell flags given from the config's values.
func (g *Agent) Hook(ctx context.Context, flags *pflag.FlagSet, name string, af *AdapterFlags, deadline time.Duration) error {
	g.hosted = hostedFrom(ctx)
	var rec *callRecord
	a := g.runHook(ctx, flags, name, af, deadline, &rec)
	err := g.answer(a)
	// A permit is exit 0: an error here is the answer not written.
	rec.close(err == nil)
	return err
}

// HookExample is the --help example of a harness's hook: the settings
// entry install writes (its fail-closed wrapper shortened to "...") and a
// dry run by hand.
func HookExample(name string) string {
	if name == harness.Codex {
		return `  # ~/.codex/hooks.json or <repo>/.codex/hooks.json ('worker-agent install
  # codex' writes this, and the same entry for PostToolUse, UserPromptSubmit
  # and SessionStart; no matcher: every tool). The command runs the hook
  # through a /bin/sh wrapper that blocks the call if the binary is missing
  # or crashes:
  {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "timeout": 30,
    "command": "/bin/sh -c '...' writ-hook /usr/local/bin/worker-agent hook codex --config /etc/writ/w1.json"}]}]}}

  # Try it by hand with a Codex shell call:
  echo '{"session_id":"s1","turn_id":"t1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"c1","tool_input":{"command":"ls"},"cwd":"/tmp"}' |
    worker-agent hook codex --config /etc/writ/w1.json; echo "exit $?"`
	}
	return `  # .claude/settings.json ('worker-agent install claude-code' writes this,
  # and the same entry for PostToolUse and PostToolUseFailure; UserPromptSubmit
  # and SessionStart get it without a matcher). The command runs the hook
  # inside a sh script that blocks the call if the binary is missing or
  # crashes:
  {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "timeout": 30,
    "command": "b=/usr/local/bin/worker-agent; ... \"$b\" hook claude-code --config /etc/writ/w1.json; ..."}]}]}}

  # Try it by hand with a Claude Code Bash call:
  echo '{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"ls"},"cwd":"/tmp"}' |
    worker-agent hook claude-code --config /etc/writ/w1.json; echo "exit $?"`
}

// answer carries out a hook's answer.
func (g *Agent) answer(a harness.Answer) error {
	if len(a.Stdout) > 0 {
		if _, err := g.Stdout.Write(a.Stdout); err != nil {
			fmt.Fprintf(g.Stderr, "writ: writing the hook answer: %v — the call is blocked\n", err)
			return &ExitError{Code: harness.ExitBlock}
		}
	}
	if a.Stderr != "" {
		fmt.Fprintln(g.Stderr, a.Stderr)
	}
	if a.Exit != 0 {
		return &ExitError{Code: a.Exit}
	}
	return nil
}

// runHook decides one hook event. Every failure is exit 2: both harnesses
// let the call run on any other exit code.
//
// A PreToolUse leaves in *rec the call's record (see replay.go), locked
// until the caller has written the answer and closed it.
func (g *Agent) runHook(ctx context.Context, flags *pflag.FlagSet, name string, af *AdapterFlags, deadline time.Duration, rec **callRecord) harness.Answer {
	if deadline <= 0 {
		return harness.Fail(fmt.Errorf("--deadline must be positive, got %v", deadline))
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	if g.HardExit != nil {
		// The deadline bounds every step below; this catches whatever does
		// not honour it.
		t := time.AfterFunc(deadline+500*time.Millisecond, func() {
			fmt.Fprintf(os.Stderr, "writ: the hook overran its %v deadline; %s — the call is blocked\n", deadline, grants.KeptBlocked)
			g.HardExit(harness.ExitBlock)
		})
		defer t.Stop()
	}

	in, err := readHookInput(ctx, g.Stdin)
	if err != nil {
		return harness.Fail(err)
	}
	if in.IsSourceEvent() {
		return g.sourceHook(ctx, flags, af, in)
	}
	if !in.IsToolEvent() {
		return harness.Answer{} // nothing to gate, record or register
	}
	pre := in.HookEventName == harness.EventPreToolUse
	fail := harness.Fail
	if !pre {
		fail = harness.FailAfter
	}
	call, err := in.Call(name)
	if err != nil {
		return fail(err)
	}
	cfg, err := af.resolve(flags, g)
	if err != nil {
		return fail(err)
	}
	lane, err := cfg.laneFor(call.AgentType)
	if err != nil {
		return fail(err)
	}
	if err := g.hostBegin(af); err != nil {
		return fail(err) // declined: the sidecar sends the client to run it itself
	}
	if dl, ok := ctx.Deadline(); ok {
		g.Conn.Timeout = time.Until(dl)
	}
	socket := af.socket
	if pre && name == harness.ClaudeCode && IsSubagentCall(call) {
		// The Task call is judged as the spawn of the subagent it
		// would start, before the subagent exists (subagent.go).
		refusal, err := g.taskSpawn(ctx, cfg, af.stateDir, in.SessionID, call)
		switch {
		case err != nil && isTransport(err):
			return fail(blocked(err))
		case err != nil:
			return fail(err)
		case refusal != nil:
			return harness.PreToolUse(name, call.Tool, *refusal, harness.Options{ReplacePrompt: cfg.replacePrompt()})
		}
	}
	if call.AgentID != "" && cfg.subagentsAsWorkers() {
		// A subagent is a child worker of its own (subagent.go). The
		// sidecar serves this worker only: the child's calls go direct.
		mainLane, err := cfg.laneFor("")
		if err != nil {
			return fail(err)
		}
		sp, err := cfg.subagent(call.AgentType)
		if err != nil {
			return fail(err)
		}
		if pre {
			child, refusal, err := g.subagentChild(ctx, af.stateDir, in.SessionID, call, mainLane, sp)
			switch {
			case errors.Is(err, errNoSpawns):
				// As before fleets: the subagent acts in this worker's name.
			case err != nil:
				return fail(blocked(err))
			case refusal != nil:
				return harness.PreToolUse(name, call.Tool, *refusal, harness.Options{ReplacePrompt: cfg.replacePrompt()})
			default:
				g.actAsSubagent(af.stateDir, child)
				socket = ""
			}
		} else if child, ok := claimedChild(af.stateDir, in.SessionID, call.AgentID); ok {
			// The call was asked for as the child its subagent claimed:
			// its outcome is the child's to report.
			g.actAsSubagent(af.stateDir, child)
			socket = ""
		} else if child := SubagentChildID(g.Worker, in.SessionID, call.AgentID); fileExists(filepath.Join(af.stateDir, "fleet", child)) {
			// The call was asked for as the child: its outcome is the
			// child's to report.
			g.actAsSubagent(af.stateDir, child)
			socket = ""
		} else {
			// No marker (another state directory): the spawn is
			// idempotent, so asking again says whether the subagent is a
			// child. A refused spawn is still the child's call: its
			// request replays the child's refusal.
			_, _, err := g.spawnChild(ctx, af.stateDir, child, mainLane, sp)
			switch {
			case errors.Is(err, errNoSpawns):
			case err != nil:
				return fail(unreachable(err))
			default:
				g.actAsSubagent(af.stateDir, child)
				socket = ""
			}
		}
	}
	auth := g.openAuthority(socket)
	defer auth.Close()
	store := newSessionStore(af.stateDir, in.SessionID, cfg.Provenance.maxBytes())

	if pre {
		// A repeated event for a call already permitted is not a second
		// permit (replay.go). A duplicate waits for the first one's
		// answer, within half the deadline: its own must still fit.
		rctx, rcancel := context.WithTimeout(ctx, time.Until(deadlineOf(ctx))/2)
		cr, err := openCallRecord(rctx, af.stateDir, call)
		rcancel()
		if err != nil {
			return fail(err)
		}
		*rec = cr
		if cr.replayed() {
			return fail(cr.replayError(call))
		}
		// From here a permit may be delivered: the record says so,
		// durably, by the time the issuer answers.
		cr.begin()
		gc := grantContext{Cwd: in.WorkDir(), Route: cfg.Route}
		// Waiting for a registering hook's lock may take part of the
		// deadline, not all of it: the grant request must still fit.
		lctx, lcancel := context.WithTimeout(ctx, time.Until(deadlineOf(ctx))/2)
		reg, lerr := store.load(lctx)
		lcancel()
		var warn string
		if lerr != nil {
			// Not failing open: without traces every field is model-made.
			warn = "writ: " + harness.OneLine(lerr.Error()) + " — asking without field traces, so every field counts as model-made"
		}
		gc.Provenance = traceArgs(reg, call.Args)
		env, err := authorize(ctx, auth, call, lane, gc)
		if err != nil {
			return fail(blocked(err))
		}
		a := harness.PreToolUse(name, call.Tool, env, harness.Options{ReplacePrompt: cfg.replacePrompt(), Sources: sourceChannels(reg)})
		if a.Exit == harness.ExitOK && env.Decision == grants.Permit {
			if err := cr.answered(env); err != nil {
				return fail(err)
			}
		}
		switch {
		case a.Stderr == "":
			a.Stderr = warn
		case warn != "" && a.Exit == harness.ExitOK:
			a.Stderr = warn + "; " + a.Stderr // a note for the person: keep both on one line
		} // a failed answer's one line comes first
		return a
	}
	outcome, _ := harness.PostOutcome(in.HookEventName)
	var (
		notes          []string
		recErr, regErr error
	)
	// report reports the outcome against the grant sc names and, for a
	// PostToolUse, registers the result with it: one request.
	report := func(sc spentCall) {
		var src *pendingSource
		if in.HookEventName == harness.EventPostToolUse {
			if s, n, ok := resultSource(ctx, store, in, call); ok {
				s = withResource(s, sc.target, in.SessionID, call.CallID)
				src, notes = &s, n
			}
		}
		var more []string
		_, more, recErr, regErr = reportSpent(ctx, auth, store, call, sc, outcome, harness.Verifier(name), src)
		notes = append(notes, more...)
	}
	if sc, ok := readSpentCall(af.stateDir, call); ok {
		// The grant the PreToolUse spent, as the call's record names it:
		// no request to find it again.
		report(sc)
	} else {
		// No record (another state directory, a record of an earlier
		// build, a call writ refused): the grant is found by repeating
		// the grant request with the same idempotency key and arguments,
		// which returns the original permit.
		permit, err := auth.Grant(ctx, grantRequest(call, lane, grantContext{Cwd: in.WorkDir()}))
		if err == nil && permit.Decision == grants.Permit && permit.GrantID != "" && !permit.Digest.IsZero() {
			report(spentCall{grant: permit.GrantID, digest: permit.Digest, target: permit.Target})
		} else {
			recErr = err
			if err == nil {
				_, recErr = recordPermit(ctx, auth, call, permit, outcome, harness.Verifier(name))
			}
			if in.HookEventName == harness.EventPostToolUse {
				if ctx.Err() != nil || isTransport(recErr) {
					// The registration would wait for the same issuer.
					if _, _, ok := resultSource(ctx, nil, in, call); ok && recErr != nil {
						return fail(fmt.Errorf("%v; its result was not registered as a source either", unreachable(recErr)))
					}
				} else if src, n, ok := resultSource(ctx, store, in, call); ok {
					src = withResource(src, "", in.SessionID, call.CallID)
					notes = n
					more, err := registerSources(ctx, auth, store, []pendingSource{src})
					notes, regErr = append(notes, more...), err
				}
			}
		}
	}
	switch {
	case recErr != nil && regErr != nil:
		return fail(fmt.Errorf("%v; %v", unreachable(recErr), regErr))
	case recErr != nil:
		return fail(unreachable(recErr))
	case regErr != nil:
		return fail(regErr)
	}
	return notesAnswer(notes)
}

// sourceHook registers the content a UserPromptSubmit (the prompt) or
// SessionStart (the working directory's instruction files) event brings
// into the session. Nothing to register: exit 0 without reading the
// config or dialing. A prompt the issuer could not be asked about (not
// reachable, no answer in time) goes through with a warning for the user:
// unregistered, every value taken from it counts as model-made, which
// only makes later calls stricter, and those calls are blocked anyway
// until the issuer answers. Any other registration failure (the issuer
// refused the prompt, a bad config) is exit 2 with one line: both
// harnesses then drop the prompt and tell the user; for a session start
// they show the line to the user.
func (g *Agent) sourceHook(ctx context.Context, flags *pflag.FlagSet, af *AdapterFlags, in harness.HookInput) harness.Answer {
	fail := harness.FailAfter
	if in.HookEventName == harness.EventUserPromptSubmit {
		fail = harness.FailPrompt
	}
	if err := in.CheckSession(); err != nil {
		return fail(err)
	}
	var (
		srcs  []pendingSource
		notes []string
	)
	switch in.HookEventName {
	case harness.EventUserPromptSubmit:
		if p, ok := promptSource(in); ok {
			srcs = append(srcs, p)
		}
	case harness.EventSessionStart:
		srcs, notes = instructionSources(in.SessionID, in.WorkDir())
	}
	if len(srcs) == 0 {
		return notesAnswer(notes)
	}
	cfg, err := af.resolve(flags, g)
	if err != nil {
		return fail(err)
	}
	if err := g.hostBegin(af); err != nil {
		return fail(err) // declined: the sidecar sends the client to run it itself
	}
	if dl, ok := ctx.Deadline(); ok {
		g.Conn.Timeout = time.Until(dl)
	}
	auth := g.openAuthority(af.socket)
	defer auth.Close()
	store := newSessionStore(af.stateDir, in.SessionID, cfg.Provenance.maxBytes())
	more, rerr := registerSources(ctx, auth, store, srcs)
	notes = append(notes, more...)
	if rerr != nil {
		err := errors.New(joinNotes(append([]string{rerr.Error()}, notes...)))
		if in.HookEventName == harness.EventUserPromptSubmit && isTransport(rerr) {
			// Unregistered, the prompt can only make calls stricter
			// (see harness.PromptUnregistered); the calls themselves
			// stay blocked while the issuer cannot be asked.
			return harness.PromptUnregistered(err)
		}
		return fail(err)
	}
	return notesAnswer(notes)
}

// isTransport reports whether err says the issuer could not be asked or
// did not answer in time.
func isTransport(err error) bool {
	return err != nil && (errors.Is(err, connect.ErrConnect) || errors.Is(err, client.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errSidecar))
}

// deadlineOf is ctx's deadline (the hook always has one).
func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(DefaultHookDeadline)
}

// notesAnswer is exit 0 with the notes, if any, on one stderr line.
func notesAnswer(notes []string) harness.Answer {
	if len(notes) == 0 {
		return harness.Answer{}
	}
	return harness.Answer{Stderr: "writ: " + harness.OneLine(joinNotes(notes))}
}

func joinNotes(notes []string) string { return strings.Join(notes, "; ") }

// readHookInput decodes stdin, giving up at ctx's deadline: a harness that
// never closes stdin must not hold the hook past it.
func readHookInput(ctx context.Context, r io.Reader) (harness.HookInput, error) {
	type decoded struct {
		in  harness.HookInput
		err error
	}
	ch := make(chan decoded, 1)
	go func() {
		in, err := harness.Decode(r)
		ch <- decoded{in, err}
	}()
	select {
	case d := <-ch:
		return d.in, d.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return harness.HookInput{}, fmt.Errorf("%w: no complete event on stdin before the deadline", harness.ErrMalformed)
		}
		return harness.HookInput{}, ctx.Err()
	}
}
