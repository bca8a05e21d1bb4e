package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
)

var reportableOutcomes = []string{grants.OutcomeConfirmed, grants.OutcomeFailed, grants.OutcomeUnknown}

func newEffectCmd(g *globals) *cobra.Command {
	var outcome, verifier string
	cmd := &cobra.Command{
		Use:   "effect GRANT --worker W --outcome confirmed|failed|unknown --verifier V",
		Short: "Report what a spent grant's call did in the outside world",
		Long: `Report the outcome of a spent grant's call as judged by a named verifier:
confirmed, failed, or unknown when it could not be checked. A repeated
identical report collapses into the first; a conflicting one marks the grant
contested (exit 0, with a note on stderr).

` + exitCodesHelp,
		Example: `  worker-agent effect 7f9c2b1e-0d4a-4f7e-9c1a-2b3d4e5f6a7b --worker w1 --outcome confirmed --verifier exit-status`,
		Args:    oneGrant,
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			grant := pos[0]
			if err := checkID("GRANT", grant); err != nil {
				return err
			}
			if outcome == "" {
				return usageErr("--outcome is required (%s)", strings.Join(reportableOutcomes, ", "))
			}
			if !grants.ValidOutcome(outcome) {
				return usageErr("--outcome %q: want one of %s", outcome, strings.Join(reportableOutcomes, ", "))
			}
			if verifier == "" {
				return usageErr("--verifier is required (who or what checked the outcome)")
			}
			if err := checkName("--verifier", verifier); err != nil {
				return err
			}
			req := api.EffectRequest{GrantID: grant, Outcome: outcome, Verifier: verifier}
			return g.call(cmd.Context(), "", func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
				return c.Effect(ctx, req)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&outcome, "outcome", "", "confirmed, failed or unknown (required)")
	f.StringVar(&verifier, "verifier", "", "name of the verifier that judged the outcome (required)")
	return cmd
}
