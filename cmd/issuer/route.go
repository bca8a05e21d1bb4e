package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/connect"
)

func routeCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "route",
		Short: "inspect route ownership leases",
		Long: `Routes are named units of recurring work (cron and heartbeat jobs) that
the policy declares; at most one worker owns a route at a time, under a
lease with a fencing generation. Workers acquire and renew leases
themselves (worker-agent route, worker-agent cron); revoking a worker
ends its leases.`,
	}
	cmd.AddCommand(routeListCmd(stdout))
	return cmd
}

func routeListCmd(stdout io.Writer) *cobra.Command {
	var (
		o      connect.Options
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "list every route: generation, owner, time left",
		Long: `List every route the cluster has seen acquired, as the leader holds it:
its fencing generation (the highest issued), its owner (the live one, or
the last), and the time left on a live lease or how the last one ended
(released, lapsed or revoked). From receipt format level 7 a record free
for a day is forgotten (route_forgotten) and no longer listed; the
generation high-water mark it leaves (generation_floor in --json) is the
generation a re-created route starts above. Read-only: nothing is
recorded.`,
		Example: `  issuer route list
  issuer route list --json | jq -r '.routes[] | select(.live) | .route + " " + .owner'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			rs, err := cl.Routes(ctx)
			if err != nil {
				return o.NoAnswer(err)
			}
			if rs.Error != "" {
				return fmt.Errorf("routes: %s", rs.Error)
			}
			if asJSON {
				return printJSON(stdout, rs)
			}
			if len(rs.Routes) == 0 {
				if rs.GenerationFloor > 0 {
					fmt.Fprintf(stdout, "no route records (every one was forgotten after its retention; new leases start above generation %d)\n", rs.GenerationFloor)
					return nil
				}
				fmt.Fprintln(stdout, "no routes acquired yet")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ROUTE\tGEN\tOWNER\tLANE\tSTATE\tLEFT")
			for _, r := range rs.Routes {
				state, left := "live", (time.Duration(r.LeftMillis) * time.Millisecond).String()
				if !r.Live {
					state, left = r.Ended, "-"
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", r.Route, r.Generation, r.Owner, orDash(r.Lane), state, left)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if rs.GenerationFloor > 0 {
				fmt.Fprintf(stdout, "records forgotten after their retention: a route with no record starts above generation %d\n", rs.GenerationFloor)
			}
			return nil
		},
	}
	addConnFlags(c, &o)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
