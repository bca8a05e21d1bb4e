package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/harness"
)

// DefaultHookDeadline is how long a hook may take in all, well under the
// harnesses' hook timeouts (Claude Code 60s, Codex 600s by default; writ's
// installer sets 30s): a hook the harness kills for running too long lets
// the call run, so the hook must give up, and block, first.
const DefaultHookDeadline = 5 * time.Second

// hardExit ends the process when a hook overruns its deadline however it
// got stuck. main sets it; in-process tests leave it nil.
var hardExit func(code int)

func newHookCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook claude-code|codex",
		Short: "Answer an agent harness's tool hook (reads the event on stdin)",
		Long: `Answer one hook event of an agent harness, read as JSON on stdin.

PreToolUse asks the issuer for a grant for the exact call (tool name and
canonical tool_input; idempotency key from session_id and tool_use_id, so a
repeated hook gets the same answer), spends it, and answers:
  permit             exit 0, no output (Claude Code with "replace_prompt":
                     permissionDecision "allow")
  deny               exit 0, permissionDecision "deny" with the reason code,
                     the missing fact and the recovery
  approval_required  exit 0, permissionDecision "deny" naming the review and
                     the operator command that approves it (never "ask")
  anything else      exit 2 and one line on stderr: the issuer could not be
                     reached in time (--deadline), the input is malformed, or
                     the configuration is incomplete. The call is blocked.
PostToolUse / PostToolUseFailure report the call's result against the spent
grant as outcome confirmed / failed, verifier harness:<name> (the harness's
own account, never a destination-confirmed effect). Other events: exit 0.

The worker id, the lanes of the main session and of each subagent type, and
the NATS connection come from the worker config (--config, else
` + ProjectConfig + ` here, else worker.json in the state dir). The hook uses
the sidecar (worker-agent run) when its socket answers, else connects
directly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// One line: a misconfigured hook's stderr goes to the model.
			return usageErr("name the harness: hook claude-code or hook codex")
		},
	}
	cmd.AddCommand(newHarnessHookCmd(g, harness.ClaudeCode), newHarnessHookCmd(g, harness.Codex))
	return cmd
}

func newHarnessHookCmd(g *globals, name string) *cobra.Command {
	var (
		af       adapterFlags
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:   name,
		Short: "Answer one " + name + " hook event read from stdin",
		Example: `  # .claude/settings.json (worker-agent install claude-code writes this):
  {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
    "command": "/usr/local/bin/worker-agent hook claude-code", "timeout": 30}]}]}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.answer(g.runHook(cmd, name, &af, deadline))
		},
	}
	af.add(cmd, "lane of the main session (overrides the config's \"lane\"; subagents keep theirs)", true)
	cmd.Flags().DurationVar(&deadline, "deadline", DefaultHookDeadline, "give up, and block the call, after this long")
	return cmd
}

// answer carries out a hook's answer.
func (g *globals) answer(a harness.Answer) error {
	if len(a.Stdout) > 0 {
		if _, err := g.stdout.Write(a.Stdout); err != nil {
			fmt.Fprintf(g.stderr, "writ: writing the hook answer: %v — the call is blocked\n", err)
			return &exitError{code: harness.ExitBlock}
		}
	}
	if a.Stderr != "" {
		fmt.Fprintln(g.stderr, a.Stderr)
	}
	if a.Exit != 0 {
		return &exitError{code: a.Exit}
	}
	return nil
}

// runHook decides one hook event. Every failure is exit 2: both harnesses
// let the call run on any other exit code.
func (g *globals) runHook(cmd *cobra.Command, name string, af *adapterFlags, deadline time.Duration) harness.Answer {
	if deadline <= 0 {
		return harness.Fail(fmt.Errorf("--deadline must be positive, got %v", deadline))
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), deadline)
	defer cancel()
	if hardExit != nil {
		// The deadline bounds every step below; this catches whatever does
		// not honour it.
		t := time.AfterFunc(deadline+500*time.Millisecond, func() {
			fmt.Fprintf(os.Stderr, "writ: the hook overran its %v deadline — the call is blocked\n", deadline)
			hardExit(harness.ExitBlock)
		})
		defer t.Stop()
	}

	in, err := readHookInput(ctx, g.stdin)
	if err != nil {
		return harness.Fail(err)
	}
	if !in.IsToolEvent() {
		return harness.Answer{} // nothing to gate or record
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
	cfg, err := af.resolve(cmd, g)
	if err != nil {
		return fail(err)
	}
	lane, err := cfg.laneFor(call.AgentType)
	if err != nil {
		return fail(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		g.conn.Timeout = time.Until(dl)
	}
	auth := g.openAuthority(af.socket)
	defer auth.Close()

	if pre {
		env, err := authorize(ctx, auth, call, lane)
		if err != nil {
			return fail(unreachable(err))
		}
		return harness.PreToolUse(name, call.Tool, env, harness.Options{ReplacePrompt: cfg.replacePrompt()})
	}
	outcome, _ := harness.PostOutcome(in.HookEventName)
	if _, err := record(ctx, auth, call, lane, outcome, harness.Verifier(name)); err != nil {
		return fail(unreachable(err))
	}
	return harness.Answer{}
}

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
