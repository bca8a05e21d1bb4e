// Package harness decodes and answers agent-harness hook protocols —
// Claude Code command hooks, Codex hooks and MCP tool calls over stdio, and
// the calls an OpenClaw gateway plugin relays — so
// the worker-agent can put one writ grant in front of every tool call a
// harness makes.
//
// The package knows the wire formats and their failure semantics, and
// nothing about NATS or the issuer:
//
//   - Decode reads one hook event from a harness (bounded, strict about the
//     fields writ relies on, tolerant of fields it does not use) and Call
//     turns a tool event into the exact request a grant binds: tool name,
//     canonical arguments and a stable idempotency key.
//   - For provenance, ClassifyTool, ResponseText and Written say what a
//     finished call brought into the session (its result, by channel, or
//     what a writing tool wrote), and the UserPromptSubmit and
//     SessionStart events carry the prompt and the working directory whose
//     instruction files are registered.
//   - PreToolUse renders an issuer decision as the answer each harness
//     honours. Both harnesses fail open — Claude Code proceeds on any exit
//     code but 2 and on a hook timeout; Codex runs the call when a hook
//     prints anything it does not recognise — so only three answers are
//     ever produced: nothing (exit 0), a deny with a non-empty reason
//     (exit 0), or a one-line error (exit 2). A provenance refusal's reason
//     also says where the refused value came from and what to do next.
//   - InstallHooks and UninstallHooks merge writ's hook entries into a
//     harness settings file, keeping every other key in its order.
//   - Proxy is an MCP stdio proxy that passes every message through and
//     gates only tools/call requests.
//   - For the OpenClaw gateway plugin, OpenClawCall maps an OpenClaw tool
//     call onto the writ tool and argument names the default policy
//     declares, and InstallOpenClawPlugin and UninstallOpenClawPlugin
//     merge the plugin's entry into an OpenClaw config.
package harness
