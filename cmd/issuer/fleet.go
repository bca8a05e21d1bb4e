package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

func respawnCmd(stdout io.Writer) *cobra.Command {
	var (
		o          connect.Options
		lane, note string
	)
	cmd := &cobra.Command{
		Use:   "respawn WORKER --lane LANE [--note TEXT]",
		Short: "bring a revoked worker back: new incarnation, one lane, approval-blocked",
		Long: `Respawn a worker after an incident (receipt format level 8). In one log entry
the worker gets a new incarnation (every grant of the old one stays dead:
it is refused at spend as grant_revoked, naming the incarnation), its bar
is lifted, and it runs in --lane and nowhere else. It starts
approval-blocked: every call other than a read needs a review, and it
spawns nothing, until an operator runs 'issuer lift WORKER'. A worker can
never lift its own block.

A spawned worker is respawned only while its ancestors are live (respawn
them first) and never into the coordinator lane. Its children stay
revoked until respawned themselves.`,
		Example: `  issuer revoke --worker coder-7
  issuer respawn coder-7 --lane isolated --note "inc-42: prompt injection via README"
  issuer lift coder-7 --note "inc-42 closed"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.ValidID(args[0]); err != nil {
				return usageError{err}
			}
			if lane == "" {
				return usageError{errString("--lane is required: the lane the replacement runs in")}
			}
			if err := api.ValidID(lane); err != nil {
				return usageError{fmt.Errorf("--lane: %w", err)}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.Respawn(ctx, api.RespawnRequest{Worker: args[0], Lane: lane, Note: note})
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().StringVar(&lane, "lane", "", "lane the replacement runs in (required)")
	cmd.Flags().StringVar(&note, "note", "", "why (recorded in the receipt)")
	return cmd
}

func liftCmd(stdout io.Writer) *cobra.Command {
	var (
		o    connect.Options
		note string
	)
	cmd := &cobra.Command{
		Use:   "lift WORKER [--note TEXT]",
		Short: "lift a respawned worker's approval block",
		Long: `Lift the approval block a respawn put on a worker: its calls are judged by
the policy alone again. Recorded as a lift receipt. Lifting a worker that
is not blocked records nothing.`,
		Example: `  issuer lift coder-7 --note "inc-42 closed"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.ValidID(args[0]); err != nil {
				return usageError{err}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.Lift(ctx, api.LiftRequest{Worker: args[0], Note: note})
			if err != nil {
				return err
			}
			return printEnvelope(stdout, env)
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().StringVar(&note, "note", "", "why (recorded in the receipt)")
	return cmd
}

func fleetCmd(stdout io.Writer) *cobra.Command {
	var (
		o      connect.Options
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "list spawned and respawned workers: parent, lane, scope, incarnation, state",
		Long: `List every worker the fleet records, as the leader holds it: workers spawned
by another worker (with their parent, lane, scope and end of life) and
workers an operator respawned. Incarnation is the worker's incarnation
number; STATE is live, blocked (respawned, waiting for 'issuer lift'),
revoked or ended. Read-only: nothing is recorded.`,
		Example: `  issuer fleet
  issuer fleet --json | jq -r '.workers[] | select(.parent=="coder-1") | .worker'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			f, err := cl.Fleet(ctx)
			if err != nil {
				return o.NoAnswer(err)
			}
			if asJSON {
				return printJSON(stdout, f)
			}
			if len(f.Workers) == 0 {
				fmt.Fprintln(stdout, "no spawned or respawned workers")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tPARENT\tLANE\tINC\tSTATE\tLEFT\tSCOPE")
			for _, w := range f.Workers {
				state, left := "live", "-"
				switch {
				case w.Revoked:
					state = "revoked"
				case w.ExpiresAt != 0 && f.Clock >= w.ExpiresAt:
					state = "ended"
				case w.Blocked:
					state = "blocked"
				}
				if w.ExpiresAt != 0 && f.Clock < w.ExpiresAt {
					left = time.Duration(w.ExpiresAt - f.Clock).Round(time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", w.Worker, orDash(w.Parent), w.Lane, w.Incarnation, state, left, scopeText(w))
			}
			return tw.Flush()
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// scopeText is a worker's scope in one column.
func scopeText(w api.FleetWorker) string {
	var parts []string
	for _, l := range []struct {
		name string
		v    []string
	}{{"tools", w.Tools}, {"classes", w.Classes}, {"targets", w.Targets}} {
		if l.v != nil {
			parts = append(parts, l.name+"="+strings.Join(l.v, ","))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
