package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/worker"
)

// ExitLeaseLost is worker-agent cron's exit code when its route lease was
// lost mid-run (a renewal refused, or the lease lapsed unrenewed) and the
// command was stopped.
const ExitLeaseLost = 12

func newCronCmd(g *globals) *cobra.Command {
	var (
		route, lane string
		every       time.Duration
		once        bool
		ttl, grace  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cron --route R [--every D | --once] -- CMD [ARGS...]",
		Short: "Run a recurring job under a route ownership lease",
		Long: `Acquire (or renew) the route's lease, run CMD with WRIT_ROUTE and
WRIT_ROUTE_GEN in its environment (so every worker-agent request, hook and
MCP call inside binds the lease's generation; WRIT_WORKER and the NATS
connection settings are passed on too), and renew the lease every
third of its lifetime while CMD runs. If a renewal is refused or the
lease lapses unrenewed, CMD is stopped (SIGTERM, then SIGKILL after
--grace) and worker-agent exits 12. With --every the lease is kept (and
renewed at the start of each run) between runs; after a --once run, or
when worker-agent is stopped, it is released. While another worker holds the route,
--once exits 10 with the route_held answer; --every waits for the next
round. With --once, worker-agent exits with CMD's exit code. Nothing waits
for a person: work under the route that needs a review is answered
approval_required (worker-agent request exits 11) at once, and the review
stays open for an operator.

` + exitCodesHelp + `
  12  lease lost: the route's lease was lost mid-run and CMD was stopped`,
		Example: `  worker-agent cron --worker cron-1 --lane isolated --route inbox-triage@acme --every 1m -- ./triage.sh
  worker-agent cron --worker cron-1 --route nightly-backup --once -- ./backup.sh`,
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			if route == "" {
				return usageErr("--route is required")
			}
			if len(argv) == 0 {
				return usageErr("name the command to run after --")
			}
			if once == (every > 0) {
				return usageErr("give exactly one of --every D and --once")
			}
			ctx := cmd.Context()
			c, nc, err := g.Client(ctx)
			if err != nil {
				return g.unavailable(err, "")
			}
			defer nc.Close()
			lease := func(ctx context.Context, action string, gen uint64) (grants.Envelope, error) {
				ctx, cancel := context.WithTimeout(ctx, g.Conn.Timeout)
				defer cancel()
				return c.Route(ctx, api.RouteRequest{Action: action, Route: route, Lane: lane, TTLMillis: ttl.Milliseconds(), RouteGen: gen})
			}
			// The command's worker-agent calls act as this worker, over
			// the same connection.
			childEnv := []string{EnvWorker + "=" + g.Worker}
			for k, v := range map[string]string{connect.EnvURL: g.Conn.URL, connect.EnvUser: g.Conn.User,
				connect.EnvPasswordFile: g.Conn.PasswordFile, connect.EnvCA: g.Conn.CAFile, connect.EnvCreds: g.Conn.CredsFile} {
				if v != "" {
					childEnv = append(childEnv, k+"="+v)
				}
			}
			sort.Strings(childEnv)
			cfg := worker.CronConfig{Route: route, Lease: lease, Argv: argv, Env: childEnv, Grace: grace,
				Log: func(f string, a ...any) { fmt.Fprintf(g.Stderr, "worker-agent: "+f+"\n", a...) }}
			// release ends the lease a run held, best effort (it lapses on
			// its own otherwise), when the job is done for good: after a
			// --once run, or when worker-agent is told to stop.
			release := func(env grants.Envelope) {
				if env.Decision != grants.Permit || env.RouteGen == 0 {
					return
				}
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Conn.Timeout)
				defer cancel()
				if r, err := lease(rctx, api.RouteRelease, env.RouteGen); err != nil || r.Decision != grants.Permit {
					fmt.Fprintf(g.Stderr, "worker-agent: releasing route %s: %s; the lease lapses at its expiry\n", route, orErr(r, err))
				}
			}
			for {
				env, err := worker.CronOnce(ctx, cfg)
				if !errors.Is(err, worker.ErrLeaseLost) && (once || ctx.Err() != nil) {
					release(env)
				}
				switch {
				case errors.Is(err, worker.ErrLeaseLost):
					_ = g.print(env)
					return &worker.ExitError{Code: ExitLeaseLost, Err: err}
				case err != nil && ctx.Err() != nil:
					return nil
				case env.Decision != grants.Permit && once:
					return g.report(env)
				case env.Decision != grants.Permit:
					fmt.Fprintln(g.Stderr, refusalLine("route not acquired", env))
				case err != nil:
					fmt.Fprintf(g.Stderr, "worker-agent: %s: %v\n", argv[0], err)
					if once {
						// The command's own exit code: a worker-agent
						// call inside that was refused (10) or held for
						// review (11) says so to the scheduler.
						code := 1
						var ee *exec.ExitError
						if errors.As(err, &ee) && ee.ExitCode() > 0 {
							code = ee.ExitCode()
						}
						return &worker.ExitError{Code: code}
					}
				}
				if once {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&route, "route", "", "route the job runs under (required)")
	f.StringVar(&lane, "lane", "", "lane the worker runs in")
	f.DurationVar(&every, "every", 0, "run the job every D (while the process lives)")
	f.BoolVar(&once, "once", false, "run the job once")
	f.DurationVar(&ttl, "ttl", 0, "lease asked for (0: the route's max_ttl)")
	f.DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	return cmd
}

// orErr words a failed release: the error, or the refusal.
func orErr(env grants.Envelope, err error) string {
	if err != nil {
		return err.Error()
	}
	return refusalLine("refused", env)
}
