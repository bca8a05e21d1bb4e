package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

func revokeCmd(stdout io.Writer) *cobra.Command {
	var (
		o connect.Options
		r api.RevokeRequest
	)
	cmd := &cobra.Command{
		Use:   "revoke (--worker ID | --source ID | --lane ID)",
		Short: "bump a revocation counter: every grant bound to it dies",
		Long: `Revoke a worker, a source or a lane in one log entry.

--worker  bars the worker (new requests are refused with worker_revoked
          until 'issuer reinstate' or 'issuer respawn') and cancels its
          unspent grants; the receipt lists every cancelled grant. From
          receipt format level 8 the worker's whole spawn subtree goes in
          the same entry: every descendant is barred, and the receipt (and
          the answer's workers, cancelled, reviews and routes) lists every
          revoked worker, cancelled grant, cancelled review or approval and
          ended route lease.
--source  every grant bound to that source (named in the request, or with a
          field traced to it or to content derived from it) is refused at
          spend with source_revoked; new requests tracing to it and new
          sources derived from it are refused too. Registering the id
          again does not revive it.
--lane    every grant minted in that lane is refused at spend.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, v := range []string{r.Worker, r.Source, r.Lane} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				return usageError{errString("name exactly one of --worker, --source or --lane")}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.Revoke(ctx, r)
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().StringVar(&r.Worker, "worker", "", "worker id")
	cmd.Flags().StringVar(&r.Source, "source", "", "source id")
	cmd.Flags().StringVar(&r.Lane, "lane", "", "lane id")
	return cmd
}

type errString string

func (e errString) Error() string { return string(e) }
