package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
)

func newRouteCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "route acquire|renew|release|status ROUTE",
		Short: "Acquire, renew, release or inspect a route ownership lease",
		Long: `A route is a named unit of recurring work the policy declares
("inbox-triage@acme", "nightly-backup"). At most one worker owns a route at
a time, under a lease with a fencing generation that only goes up. Work
done under the route (request --route, or WRIT_ROUTE/WRIT_ROUTE_GEN in the
environment) binds that generation, and is refused owner_stale once the
lease has lapsed, been released or been taken over.

  acquire  take a free route (a new generation); refused route_held while
           another worker's lease is live (the answer names it and the
           time left)
  renew    extend your lease (at most the route's max_ttl from now)
  release  end your lease
  status   show the route's lease (read-only)

The envelope on stdout carries route, route_gen, owner and expires_at.

` + exitCodesHelp,
		Example: `  worker-agent route acquire inbox-triage@acme --worker cron-1 --lane isolated --ttl 30s
  worker-agent route renew inbox-triage@acme --worker cron-1 --lane isolated
  worker-agent route status inbox-triage@acme --worker cron-1 --json`,
	}
	for _, action := range []string{api.RouteAcquire, api.RouteRenew, api.RouteRelease, api.RouteStatus} {
		cmd.AddCommand(newRouteActionCmd(g, action))
	}
	return cmd
}

func newRouteActionCmd(g *globals, action string) *cobra.Command {
	var (
		lane string
		ttl  time.Duration
		gen  uint64
	)
	cmd := &cobra.Command{
		Use:   action + " ROUTE",
		Short: action + " a route lease",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			if lane != "" {
				if err := checkID("--lane", lane); err != nil {
					return err
				}
			}
			if ttl < 0 {
				return usageErr("--ttl must not be negative")
			}
			req := api.RouteRequest{Action: action, Route: pos[0], Lane: lane, TTLMillis: ttl.Milliseconds(), RouteGen: gen}
			return g.call(cmd.Context(), "", func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
				return c.Route(ctx, req)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&lane, "lane", "", "lane the worker runs in (routes may be declared for lanes)")
	if action == api.RouteAcquire || action == api.RouteRenew {
		f.DurationVar(&ttl, "ttl", 0, "lease asked for (0: the route's max_ttl)")
	}
	if action == api.RouteRenew || action == api.RouteRelease {
		f.Uint64Var(&gen, "gen", 0, "the generation you hold (refused if the lease has moved on; 0: any)")
	}
	return cmd
}
