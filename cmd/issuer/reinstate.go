package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

func reinstateCmd(stdout io.Writer) *cobra.Command {
	var o connect.Options
	cmd := &cobra.Command{
		Use:   "reinstate WORKER",
		Short: "let a revoked worker ask for grants again",
		Long: `Lift a worker's revocation bar. Grants cancelled by the revocation stay
dead: the worker starts again with no authority and must ask afresh.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.ValidID(args[0]); err != nil {
				return usageError{err}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.Reinstate(ctx, api.ReinstateRequest{Worker: args[0]})
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	addConnFlags(cmd, &o)
	return cmd
}
