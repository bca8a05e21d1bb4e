// Command auditor reads writ's receipt stream (the JetStream stream
// WRIT_EVENTS, subjects writ.evt.>) and checks it:
//
//	auditor tail [--from N] [--follow] [--json] [filters]   # print receipts
//	auditor verify [--from 1] [--json] [--expect-digest HEX]
//	auditor project --db PATH [--follow]                     # local projection
//	auditor explain --db PATH GRANT|SEQ|REVIEW [--json]      # a side effect's chain
//	auditor serve --db PATH [--listen ADDR]                  # web view and /metrics
//	auditor breakglass --case ID --scope worker:W --ttl D --reason TEXT  # operator
//
// verify checks the hash chain and the grant invariants of every receipt
// (package audit has the table of violation codes), folds the stream into
// the issuer's state and prints its projection digest, which must equal
// the state_digest of `issuer status` taken at the same sequence.
//
// The auditor only reads: it needs a NATS user that may subscribe to
// writ.evt.> and create an ordered consumer on WRIT_EVENTS.
//
// Exit codes (a stable contract for scripts and cron jobs):
//
//	0  ok: the stream was read and (verify) no violation was found
//	1  verification failed: the first violation is on stderr ("violation at
//	   seq 42: double_attempt: ...") and in the summary; tail: a message did
//	   not decode; project: a receipt does not extend the projection;
//	   explain: nothing by that name in the projection
//	2  usage error: bad flags or arguments; nothing was read
//	3  unavailable: NATS could not be reached, the stream does not exist,
//	   reading stalled for --timeout, or verify was interrupted
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
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/version"
)

// Exit codes. Keep in step with the package comment and exitCodesHelp.
const (
	ExitOK          = 0
	ExitViolation   = 1
	ExitUsage       = 2
	ExitUnavailable = 3
)

const exitCodesHelp = `Exit codes:
  0  ok: the stream was read and (verify) no violation was found
  1  verification failed: the first violation is printed ("violation at seq
     42: double_attempt: ..."); tail: a message did not decode; project: a
     receipt does not extend the projection; explain: nothing by that name
  2  usage error: bad flags or arguments; nothing was read
  3  unavailable: NATS unreachable, no receipt stream, reading stalled for
     --timeout, or verify interrupted before the end`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

// exitError carries an exit code out of run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, a...)}
}

func unavailableErr(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: ExitUnavailable, err: err}
}

// exitCode maps run's error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitUsage // only cobra's own flag and argument errors are untyped
}

// globals are the flags and streams every subcommand shares.
type globals struct {
	conn           connect.Options
	stdout, stderr io.Writer
}

// run is the whole program; main only maps its error to an exit code. It
// prints the error (and, for usage errors, a hint) on stderr itself.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	g := &globals{stdout: stdout, stderr: stderr}
	g.conn.Name = "writ-auditor"
	root := &cobra.Command{
		Use:   "auditor",
		Short: "Check writ's receipt stream: hash chain, grant invariants, projection digest",
		Long: `auditor reads writ's receipt stream, the JetStream stream ` + events.StreamName + `
(subjects writ.evt.>), where the issuer publishes one hash-chained event for
every permit, refusal, attempt (spend), effect, revocation and policy epoch.

  tail     print receipts, one per line (JSON with --json), optionally
           following new ones as they are published
  verify   check the whole stream: gap-free sequence, intact hash chain,
           and that every attempt follows one live permit for the same
           grant, worker and request digest, at most once, before expiry,
           epoch change and revocation; every effect ties to an attempt and
           names its verifier. It folds the stream into the issuer's state
           and prints the projection digest, which must equal the
           state_digest of 'issuer status' at the same sequence.
  project  fold the stream into a local projection file (--db), resuming
           where the last run stopped
  explain  the chain of receipts behind one side effect (a grant, a
           receipt sequence or a review), read from the projection
  serve    keep the projection current and serve a read-only web view of
           it, with Prometheus metrics at /metrics
  breakglass  (operator) record a break-glass case that opens one worker's
           payloads in the web view until it expires, every view recorded

The auditor only reads. Connection flags and their environment variables
are shared with the other writ tools: --nats-url, else $` + connect.EnvURL + `, else
$` + connect.EnvURLFallback + `, else ` + connect.DefaultURL + `. --timeout also bounds
connecting, which is retried while NATS is unreachable.

` + version.CompletionText("auditor") + `

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Usage()
			return usageErr("a command is required (tail, verify, project, explain, serve or breakglass)")
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	g.conn.AddFlags(root.PersistentFlags())

	root.AddCommand(newTailCmd(g), newVerifyCmd(g), newProjectCmd(g), newExplainCmd(g), newServeCmd(g), newBreakGlassCmd(g))
	version.Setup(root)

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return nil
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: ExitUsage, err: err} // cobra: unknown command, bad arguments
	}
	fmt.Fprintf(stderr, "auditor: %v\n", ee.err)
	if ee.code == ExitUsage {
		fmt.Fprintf(stderr, "Run '%s --help' for usage and exit codes.\n", cmd.CommandPath())
	}
	return ee
}

// noArgs rejects positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErr("unexpected argument %q", args[0])
	}
	return nil
}
