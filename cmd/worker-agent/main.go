// Command worker-agent sits beside one agent runtime and asks writ's issuer
// for authority before each consequential tool call:
//
//	worker-agent request --worker W --lane L --tool T --args JSON   # ask for a grant
//	worker-agent spend GRANT --worker W --args JSON                  # the call starts: spend it
//	worker-agent effect GRANT --worker W --outcome confirmed --verifier V
//
// and plugs into agent harnesses through their own protocols (see
// docs/harnesses.md and package harness):
//
//	worker-agent hook claude-code|codex     # a command hook: event on stdin
//	                                        # (tool calls gated; prompts,
//	                                        # instruction files and results
//	                                        # registered as sources)
//	worker-agent install claude-code|codex  # merge the hooks into settings
//	worker-agent doctor                     # check config, credentials,
//	                                        # NATS, issuer and installed hooks
//	worker-agent mcp --lane L -- SERVER...  # stdio MCP proxy gating tools/call
//	worker-agent run                        # warm sidecar on a unix socket
//	worker-agent spawn --lane L -- CMD...   # a narrower child worker runs CMD
//	worker-agent checkpoint save|restore    # context across a restart, never authority
//
// The hook commands have their own exit contract, the one the harnesses
// honour: 0 with the answer on stdout, or 2 with one line on stderr when
// nothing is known (every other code would let the call run).
//
// Every subcommand prints the issuer's decision envelope as JSON on stdout
// (one line, or indented with --pretty) and nothing else, so scripts can
// parse it; a refusal also gets one human line on stderr, such as
//
//	denied: already_spent (missing: unspent) — next: reconcile_consumption
//
// The worker id comes from --worker or WRIT_WORKER and picks the NATS
// subject (writ.api.<worker>.<op>); the issuer takes the caller's identity
// from that subject, never from the body.
//
// Exit codes (a stable contract; scripts and hooks branch on them):
//
//	0   permit / ok
//	10  deny: stdout holds the refusal envelope, stderr says why and the next step
//	11  approval_required: a review was opened; do not run the call
//	3   issuer unavailable: the connection failed, no answer came within
//	    --timeout, or the answer could not be understood. Nothing is known:
//	    the caller must not proceed. Re-running with the same
//	    --idempotency-key returns the original answer if one was recorded.
//	2   usage error: bad flags, ids or arguments; nothing was sent
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/internal/version"
	"github.com/writ-dev/writ/worker"
)

// Exit codes. Keep in step with the package comment and exitCodesHelp.
const (
	ExitOK          = 0
	ExitUsage       = worker.ExitUsage
	ExitUnavailable = 3
	ExitDeny        = 10
	ExitApproval    = 11
)

// EnvWorker supplies --worker when the flag is not given.
const EnvWorker = worker.EnvWorker

const exitCodesHelp = `Exit codes:
  0   permit / ok
  10  deny: stdout holds the refusal envelope; stderr says why and the next step
  11  approval_required: a review was opened; do not run the call
  3   issuer unavailable: connection failed, no answer within --timeout, or an
      answer that could not be understood. Nothing is known: do not proceed.
      Re-run with the same --idempotency-key to get the original answer.
  2   usage error: bad flags, ids or arguments; nothing was sent`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Exit)
	stop()
	os.Exit(exitCode(err))
}

// usageErr reports a usage error (exit 2).
func usageErr(format string, a ...any) error { return worker.Usagef(format, a...) }

// exitCode maps run's error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *worker.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// Only cobra's own argument and flag errors reach here untyped.
	return ExitUsage
}

// run is the whole program; main only maps its error to an exit code.
// hardExit ends the process when a hook overruns its deadline however it
// got stuck; in-process tests pass nil.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, hardExit func(int)) error {
	g := &globals{worker.Agent{Stdin: stdin, Stdout: stdout, Stderr: stderr, HardExit: hardExit}}
	root := &cobra.Command{
		Use:   "worker-agent",
		Short: "Ask writ's issuer for grants, spend them and report their effects",
		Long: `worker-agent sits beside one agent runtime and asks writ's issuer for a
single-spend grant before each consequential tool call (request), spends it
when the call starts (spend), and reports what happened (effect).

stdout carries only the issuer's decision envelope as JSON; refusals also
get one human line on stderr. The worker id (--worker, env ` + EnvWorker + `)
picks the NATS subject writ.api.<worker>.<op>; the issuer takes identity from
the subject. Requests are retried with the same idempotency key until an
answer arrives or --timeout ends; --timeout also bounds connecting, which
is retried while NATS is unreachable. NATS is found at --nats-url, else
$` + connect.EnvURL + `, else $` + connect.EnvURLFallback + `, else ` + connect.DefaultURL + `.

The harness adapters put the same three steps behind real agent harnesses:
hook claude-code|codex (command hooks; the prompt, session-start and
post-call hooks also register what enters the session as provenance sources,
which the pre-call hook traces the call's arguments to), install/uninstall
(their settings), doctor (checks the config, credentials, NATS, the issuer
and the installed hook command), mcp (a stdio MCP proxy) and run (a warm
sidecar the hooks use). Hooks answer with exit 0, or exit 2 and one line on stderr; see
'worker-agent hook --help'. spawn starts a child worker with a narrower
scope (and runs a command as it); checkpoint save|restore carries a
session's context across a restart, never its authority.

` + version.CompletionText("worker-agent") + `

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(g.Stderr)
			_ = cmd.Usage()
			return usageErr("a subcommand is required (request, spend, effect, hook, install, uninstall, doctor, mcp, run, spawn or checkpoint)")
		},
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)

	pf := root.PersistentFlags()
	g.Conn.AddFlags(pf)
	pf.StringVar(&g.Worker, "worker", os.Getenv(EnvWorker), "this worker's id (env "+EnvWorker+")")
	pf.BoolVar(&g.Pretty, "pretty", false, "indent the JSON envelope")

	hookOnly := len(args) > 0 && args[0] == "hook"
	if hookOnly {
		// A hook process runs before every tool call: it builds only the
		// command tree it runs. Everything a hook's arguments reach (its
		// subcommands, flags, help and errors) lies in that subtree and
		// the root's persistent flags, so it answers as with the whole
		// tree, without building the other commands' flag sets.
		root.AddCommand(newHookCmd(g))
	} else {
		root.AddCommand(newRequestCmd(g), newSpendCmd(g), newEffectCmd(g),
			newHookCmd(g), newInstallCmd(g, true), newInstallCmd(g, false), newMCPCmd(g), newRunCmd(g),
			newDoctorCmd(g), newReviewCmd(g), newRouteCmd(g), newCronCmd(g), newSpawnCmd(g), newCheckpointCmd(g))
	}
	version.Setup(root)
	if hookOnly {
		// Nor cobra's "completion" command and its four shells' commands:
		// it is reached only as the first argument.
		root.CompletionOptions.DisableDefaultCmd = true
	}

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var ee *worker.ExitError
	if !errors.As(err, &ee) {
		// cobra's own parsing errors: unknown flag, missing argument, ...
		ee = &worker.ExitError{Code: ExitUsage, Err: err}
	}
	if ee.Err != nil {
		fmt.Fprintf(stderr, "worker-agent: %v\n", ee.Err)
		// A hook's stderr goes to the model: one line, no usage hint.
		if ee.Code == ExitUsage && !isHook(cmd) {
			fmt.Fprintf(stderr, "Run '%s --help' for usage and exit codes.\n", cmd.CommandPath())
		}
	}
	return ee
}

// isHook reports whether cmd is a hook command.
func isHook(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "hook" && c.Parent() != nil && c.Parent().Parent() == nil {
			return true
		}
	}
	return false
}

// oneGrant accepts exactly one positional GRANT id.
func oneGrant(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageErr("want exactly one GRANT id argument, got %d", len(args))
	}
	return nil
}

// globals are the flags and streams every subcommand shares.
type globals struct{ worker.Agent }
