package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

// envNodeID names the node `status` asks by default. Issuer containers set
// it to their own node id, so a probe that cannot put the pod's name in its
// command line (Kubernetes expands only literal env values in exec probes)
// still asks its own node.
const envNodeID = "WRIT_NODE_ID"

func statusCmd(stdout io.Writer) *cobra.Command {
	var (
		o             connect.Options
		asJSON        bool
		node          string
		requireLeader bool
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show the leader, term, epoch, clock and counts",
		Long: `Ask the leader (or, with --node, one specific node) for its status: raft
role, term, commit and applied index, peers, policy epoch, control-plane
clock, grant and registered-source counts, receipt sequence and how far
publication has got.

--require-leader exits 3 (unavailable) after printing unless the answering
node knows a leader: a container health check or readiness probe, which
cannot name its pod in the command, runs
  issuer status --require-leader --timeout 2s
with WRIT_NODE_ID set to the node's id (the default of --node).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			var st api.Status
			if node != "" {
				msg, err := c.NC.RequestWithContext(ctx, api.SubjectStatus+"."+node, []byte(`{"v":1}`))
				if err != nil {
					return fmt.Errorf("node %s: %w", node, o.NoAnswer(err))
				}
				if err := json.Unmarshal(msg.Data, &st); err != nil {
					return err
				}
			} else if st, err = c.Status(ctx); err != nil {
				return o.NoAnswer(err)
			}
			// noLeader is --require-leader's verdict, returned after printing.
			var noLeader error
			if requireLeader && st.Leader == "" {
				noLeader = fmt.Errorf("node %s knows no leader (--require-leader)", st.Node)
			}
			if asJSON {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(stdout, string(b))
				return noLeader
			}
			tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			clock := "-"
			if st.Clock > 0 {
				clock = time.Unix(0, st.Clock).UTC().Format(time.RFC3339Nano)
			}
			rows := [][2]string{
				{"node", st.Node}, {"role", st.State}, {"leader", st.Leader},
				{"term", fmt.Sprint(st.Term)}, {"commit/applied", fmt.Sprintf("%d/%d", st.CommitIndex, st.AppliedIndex)},
				{"epoch", fmt.Sprint(st.Epoch)}, {"clock", clock},
				{"grants", fmt.Sprintf("%d (permitted %d, spent %d, closed %d, revoked %d)", st.Grants, st.Permitted, st.Spent, st.Closed, st.Revoked)},
				{"sources", fmt.Sprint(st.Sources)},
				{"routes", fmt.Sprintf("%d (%d leases live)", st.Routes, st.LiveLeases)},
				{"reviews", fmt.Sprintf("%d open, %d approvals waiting", st.OpenReviews, st.Approvals)},
				{"receipts", fmt.Sprintf("seq %d, published %d, stream %d, outbox %d", st.Seq, st.Published, st.StreamLastSeq, st.Outbox)},
				{"state digest", st.StateDigest},
			}
			if st.DevMode {
				rows = append(rows, [2]string{"mode", "development (no authentication)"})
			}
			rows = append(rows, operatorRows(st)...)
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if err := writePeers(ctx, stdout, c.NC, st); err != nil {
				return err
			}
			return noLeader
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&node, "node", os.Getenv(envNodeID), "ask this node instead of the leader (env "+envNodeID+")")
	cmd.Flags().BoolVar(&requireLeader, "require-leader", false, "exit 3 unless the answering node knows a leader (health checks)")
	return cmd
}
