// Command issuer runs a writ issuer node (raft member, embedded NATS with
// JetStream, receipt publisher) and is the operator's command-line tool:
// status, policy, revoke and reinstate.
//
// Exit codes: 0 success; 1 the operation ran and was refused (for example
// a policy that failed validation); 2 usage error; 3 the issuer could not
// be reached or the node failed to start.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/internal/version"
)

// Exit codes.
const (
	exitOK          = 0
	exitRefused     = 1
	exitUsage       = 2
	exitUnavailable = 3
)

// usageError marks errors caused by how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// refusedError marks an operation the issuer answered with a refusal.
type refusedError struct{ msg string }

func (e refusedError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	// Errors from the issuer package already start with "issuer: ".
	fmt.Fprintln(stderr, "issuer:", strings.TrimPrefix(err.Error(), "issuer: "))
	var ue usageError
	var re refusedError
	switch {
	case errors.As(err, &ue), errors.Is(err, connect.ErrBadURL):
		return exitUsage
	case errors.As(err, &re):
		return exitRefused
	case errors.Is(err, connect.ErrConnect):
		return exitUnavailable
	}
	return exitUnavailable
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "issuer",
		Short: "writ issuer: mints single-spend grants on a raft log and publishes every receipt",
		Long: `The issuer owns writ's authority: policy epochs, revocation counters, the
control-plane clock and single-spend grant tickets. Every node runs raft
(hashicorp/raft, boltdb log, fsync on) and, by default, an embedded NATS
server with JetStream; the leader answers requests and publishes receipts.

Start a development issuer:   issuer serve --dev
Look at it:                   issuer status
Revoke a worker:              issuer revoke --worker w1
Approve a held call:          issuer approve rv-58f1175eb5b79f789947
Operator-mode NATS keys:      issuer auth init --dir auth

Operator commands reach the issuer through NATS: --nats-url, else
$` + connect.EnvURL + `, else $` + connect.EnvURLFallback + `, else ` + connect.DefaultURL + `.
--timeout bounds the whole call, connecting (retried while NATS is
unreachable) included.

` + version.CompletionText("issuer") + `

Exit codes: 0 ok, 1 refused, 2 usage, 3 unavailable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		serveCmd(stdout, stderr),
		statusCmd(stdout),
		revokeCmd(stdout),
		reinstateCmd(stdout),
		respawnCmd(stdout),
		liftCmd(stdout),
		fleetCmd(stdout),
		approveCmd(stdout),
		reviewsCmd(stdout),
		reviewCmd(stdout),
		routeCmd(stdout),
		policyCmd(stdout),
		snapshotCmd(stdout),
		authCmd(stdout, stderr),
	)
	version.Setup(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && isCobraUsage(err) {
		return usageError{err}
	}
	return explainNoAnswer(cmd, err)
}

// explainNoAnswer rewords an operator command's request that NATS carried
// but no issuer answered, so that it is not mistaken for NATS being
// unreachable and says what to check.
func explainNoAnswer(cmd *cobra.Command, err error) error {
	if !errors.Is(err, client.ErrUnavailable) || cmd == nil {
		return err
	}
	var o connect.Options
	if f := cmd.Flags().Lookup("nats-url"); f != nil {
		o.URL = f.Value.String()
	}
	if f := cmd.Flags().Lookup("timeout"); f != nil {
		o.Timeout, _ = time.ParseDuration(f.Value.String())
	}
	return o.NoAnswer(err)
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires ", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
