package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
)

func newBreakGlassCmd(g *globals) *cobra.Command {
	var (
		caseID, scope, reason string
		ttl                   time.Duration
		asJSON                bool
	)
	cmd := &cobra.Command{
		Use:   "breakglass --case ID --scope worker:W --ttl 30m --reason TEXT",
		Short: "Open a break-glass case: payload views of one worker's receipts, recorded",
		Long: `breakglass asks the issuer to record a break-glass case: an operator's
decision, with a reason, that auditors may show the payloads of one
worker's receipts (targets, idempotency keys, approval notes), which the
web view otherwise shows only as digests, until the case expires (--ttl,
at most 8h). The case is a break_glass receipt in the stream, so it is
itself audited; 'auditor serve' opens the payload views of that worker
while the case runs and records every page it shows under it (the
/breakglass page lists cases and views).

This is an operator action: it needs NATS credentials that may publish
on writ.op.> (--nats-user and --nats-password-file of an operator), never
the auditor's read-only user, and the cluster must write receipt format 6
(every voter on a build that knows break-glass cases).

Exit codes: 0 recorded, 1 refused (the answer's reason: invalid_request,
unsupported_version), 2 usage, 3 issuer unavailable.`,
		Example: `  auditor breakglass --case inc-2026-0117 --scope worker:w-pay-3 --ttl 30m \
    --reason "payment to an unknown payee" --nats-user ops --nats-password-file ops.pw`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := api.ValidID(caseID); err != nil {
				return usageErr("--case: %v", err)
			}
			if _, err := api.ParseBreakGlassScope(scope); err != nil {
				return usageErr("--scope: %v", err)
			}
			max := time.Duration(api.MaxBreakGlassTTLMillis) * time.Millisecond
			if ttl < time.Millisecond || ttl > max {
				return usageErr("--ttl must be between 1ms and %v", max)
			}
			if reason == "" || len(reason) > api.MaxBreakGlassReason {
				return usageErr("--reason is required, at most %d bytes: it is recorded in the receipt", api.MaxBreakGlassReason)
			}
			env, err := breakGlass(cmd.Context(), g.conn, api.BreakGlassRequest{CaseID: caseID, Scope: scope, TTLMillis: ttl.Milliseconds(), Reason: reason})
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.MarshalIndent(env, "", "  ")
				fmt.Fprintln(g.stdout, string(b))
			} else if env.Decision == grants.Permit {
				fmt.Fprintf(g.stdout, "break-glass case %s recorded at seq %d: payload views of %s open for %v\n", caseID, env.Seq, scope, ttl)
			}
			if env.Decision != grants.Permit {
				return &exitError{code: ExitViolation, err: fmt.Errorf("refused: %s: %s", env.Reason, env.Detail)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&caseID, "case", "", "the case id (letters, digits, - and _), e.g. the incident's")
	f.StringVar(&scope, "scope", "", "whose receipts: worker:<worker id>")
	f.DurationVar(&ttl, "ttl", 30*time.Minute, "how long the payload views stay open (at most 8h)")
	f.StringVar(&reason, "reason", "", "why; recorded in the receipt")
	f.BoolVar(&asJSON, "json", false, "print the issuer's answer as JSON")
	return cmd
}

// breakGlass sends the request as an operator; errors are exit codes.
func breakGlass(ctx context.Context, o connect.Options, r api.BreakGlassRequest) (grants.Envelope, error) {
	o.Name = "writ-operator"
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := o.DialContext(cctx)
	if errors.Is(err, connect.ErrBadURL) {
		return grants.Envelope{}, &exitError{code: ExitUsage, err: err}
	}
	if err != nil {
		return grants.Envelope{}, unavailableErr(err)
	}
	defer nc.Close()
	env, err := client.New(nc, "").BreakGlass(cctx, r)
	if err != nil {
		return grants.Envelope{}, unavailableErr(fmt.Errorf("asking the issuer: %v (is an issuer leading, and may this NATS user publish on writ.op.>?)", err))
	}
	return env, nil
}
