package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/worker"
)

func newMCPCmd(g *globals) *cobra.Command {
	var (
		af       worker.AdapterFlags
		server   string
		session  string
		deadline time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp --lane L [--server NAME] -- COMMAND [ARG...]",
		Short: "Run an MCP server over stdio behind writ: every tools/call needs a grant",
		Long: `Start the MCP server COMMAND and proxy its stdio (newline-delimited
JSON-RPC). Everything passes through unchanged except tools/call requests:
each is granted as tool mcp__<server>__<name> with params.arguments, spent,
and only then forwarded. A refused call is answered by the proxy with a
normal result, isError true and the reason text, so the model sees why; the
server never sees it. The server's answer is reported as the call's effect
(confirmed, or failed for an isError result or a JSON-RPC error; verifier
mcp-server:<server>, the server's own account). Requests are independent:
one call waiting for its grant holds up nothing else.

Provenance works as with the hooks: each call's arguments are traced
against the session's provenance registry, and each confirmed result is
registered with the issuer as a source (channel tool_result, the tool's
name, and the resource it came from when the call's surface declares
result_from: target in the policy, so path and resource levels apply to
it). A value a later call copies from a result then traces to it and its
level. --session joins the registry of a harness session (its session_id)
so that the prompt and results its hooks registered count here too; by
default each run starts a fresh session.

--server names the server in tool names (default: the command's base
name); set it when the command is a launcher such as npx or uvx. If the
issuer cannot be reached within --deadline the call is refused, never
forwarded. The proxy exits with the server's exit status.`,
		Example: `  worker-agent mcp --lane specialist --server github -- github-mcp-server stdio

  # Share provenance with a Claude Code session, so a recipient the user
  # typed (registered by the UserPromptSubmit hook) traces to the prompt:
  worker-agent mcp --lane coordinator --server gmail --session "$SESSION_ID" -- gmail-mcp`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return usageErr("give the MCP server command after --, e.g. worker-agent mcp --lane L -- my-server --stdio")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.MCP(cmd.Context(), cmd.Flags(), &af, server, session, deadline, args)
		},
	}
	af.Add(cmd.Flags(), "lane of every call through this proxy (default: the config's \"lane\")", false)
	cmd.Flags().StringVar(&server, "server", "", "the server's name in tool names mcp__<server>__<tool> (default: the command's base name)")
	cmd.Flags().StringVar(&session, "session", "", "provenance session to join: a harness session_id whose registry the calls are traced against and results registered into (default: a fresh one per run)")
	cmd.Flags().DurationVar(&deadline, "deadline", worker.DefaultMCPDeadline, "refuse a tools/call the issuer has not permitted within this long")
	return cmd
}
