package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

func approveCmd(stdout io.Writer) *cobra.Command {
	var (
		o    connect.Options
		ttl  time.Duration
		note string
	)
	cmd := &cobra.Command{
		Use:   "approve REVIEW_ID",
		Short: "approve the exact call an open review holds",
		Long: `Approve an open review: an approval_required answer names one (rv-...),
in the envelope, the receipt and the hook's message to the model.

The approval binds the exact call the review held — the same worker, tool
and request digest — and permits it once when the worker asks again
before the approval expires (--ttl). The policy still runs on that
request: an approval turns an approval_required answer into a permit,
never a deny, and a revoked worker, source or epoch still refuses. The
approval receipt (writ.evt.approval) records who approved and --note.

A review is open for an hour after its approval_required receipt (on the
issuer's clock), until it is approved,
or until its worker is revoked (revoking a worker also drops its unused
approvals); an unknown, used or aged-out review id is refused
(unknown_review). The approval itself is single use: the request after the
approved one is held again, under a new review id.

Exit codes: 0 approved, 1 refused (unknown_review, invalid_request),
2 usage, 3 issuer unavailable.`,
		Example: `  issuer approve rv-58f1175eb5b79f789947 --note "customer confirmed by phone"
  issuer approve rv-58f1175eb5b79f789947 --ttl 2m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !api.ValidReviewID(args[0]) {
				return usageError{fmt.Errorf("review id %q: want rv- and 20 lowercase hex digits, as approval_required answers name it", args[0])}
			}
			if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) || ttl > time.Duration(api.MaxApprovalTTLMillis)*time.Millisecond {
				return usageError{fmt.Errorf("--ttl must be between 1ms and %v (0: the default, %v)",
					time.Duration(api.MaxApprovalTTLMillis)*time.Millisecond, time.Duration(api.DefaultApprovalTTLMillis)*time.Millisecond)}
			}
			if len(note) > api.MaxApprovalNote {
				return usageError{fmt.Errorf("--note is %d bytes, at most %d", len(note), api.MaxApprovalNote)}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.Approve(ctx, api.ApproveRequest{ReviewID: args[0], TTLMillis: ttl.Milliseconds(), Note: note})
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the approval waits for the worker's retry (default 10m, at most 24h)")
	cmd.Flags().StringVar(&note, "note", "", "why the call is approved; recorded in the approval receipt")
	addConnFlags(cmd, &o)
	return cmd
}
