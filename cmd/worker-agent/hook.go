package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/worker"
)

func newHookCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook claude-code|codex",
		Short: "Answer an agent harness's tool hook (reads the event on stdin)",
		Long: `Answer one hook event of an agent harness, read as JSON on stdin.

PreToolUse asks the issuer for a grant for the exact call (tool name and
canonical tool_input; idempotency key from session_id and tool_use_id, so a
repeated hook gets the same answer; the session's cwd as the resolution
context of path targets; and the field traces described below), spends it,
and answers:
  permit             exit 0, no output (Claude Code with "replace_prompt":
                     permissionDecision "allow")
  deny               exit 0, permissionDecision "deny" with the reason code,
                     the missing fact and the recovery; for a provenance
                     refusal also where the value came from and what to do
  approval_required  exit 0, permissionDecision "deny" naming the review and
                     the operator command that approves it (never "ask")
  anything else      exit 2 and one line on stderr: the issuer could not be
                     reached in time (--deadline), the input is malformed, or
                     the configuration is incomplete. The call is blocked.
PostToolUse / PostToolUseFailure report the call's result against the spent
grant as outcome confirmed / failed, verifier harness:<name> (the harness's
own account, never a destination-confirmed effect).

Round trips. PreToolUse asks for the grant and spends it in one request
(one log entry), and PostToolUse reports the outcome with the result's
source registration in one request, against the grant named in the call's
record (<state dir>/calls/): two round trips per call, each one log entry
from receipt format 11 (below it the issuer writes each in two). An issuer
of an earlier build refuses them, and the hook sends the separate ones.

Provenance. What enters the session is registered with the issuer as a
source (channel, scope, digest — never the content), then kept in the
session's registry of content windows, a file shared by the session's hook
processes (<state dir>/provenance/<hash of session_id>.reg, locked while it
changes; bounded by "provenance": {"max_bytes": N} in the worker config,
default 10 MiB, oldest content evicted first):
  SessionStart       CLAUDE.md, CLAUDE.local.md, .claude/CLAUDE.md and
                     AGENTS.md of cwd (up to 1 MiB each): instruction_file
  UserPromptSubmit   the prompt: user_prompt
  PostToolUse        the tool's result (up to 1 MiB): web_fetch (WebFetch,
                     WebSearch), file_read (Read, Grep, Glob, NotebookRead),
                     peer_message (Task, Agent) or tool_result (the rest);
                     for Write, Edit, MultiEdit, NotebookEdit and apply_patch
                     what was written, as derived content tied to the sources
                     it was copied from
Before each call, every string and number of tool_input is traced against
the registry (raw, and base64/hex/percent decoded); the issuer judges each
field's authority from the sources it matched, and a field that matched
nothing counts as model-made. A prompt the issuer cannot be asked about
(unreachable, no answer in time) is let through with a warning to the user
(systemMessage): unregistered, values copied from it count as model-made,
which only makes calls stricter, and tool calls stay blocked until the
issuer answers. Any other failed registration is exit 2 with one line: for
a prompt the issuer refused, both harnesses drop it; after a tool call, the
model is told values from that result count as model-made. An
unreadable registry file never opens anything: PreToolUse asks without
traces (and says so on stderr), the next registration starts a fresh file.
Other events: exit 0.

The worker id, the lanes of the main session and of each subagent type, and
the NATS connection come from the worker config (--config, else
` + worker.ProjectConfig + ` here, else worker.json in the state dir). The hook uses
the sidecar (worker-agent run) when its socket answers, else connects
directly. writ-hook, the thin client install writes when it sits beside
worker-agent, has the sidecar run this same command in its own process
(same arguments, stdin and environment, same answer) and runs it here
when the sidecar declines or is not running.`,
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
		af       worker.AdapterFlags
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:     name,
		Short:   "Answer one " + name + " hook event read from stdin",
		Example: worker.HookExample(name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.Hook(cmd.Context(), cmd.Flags(), name, &af, deadline)
		},
	}
	af.Add(cmd.Flags(), "lane of the main session (overrides the config's \"lane\"; subagents keep theirs)", true)
	cmd.Flags().DurationVar(&deadline, "deadline", worker.DefaultHookDeadline, "give up, and block the call, after this long")
	return cmd
}
