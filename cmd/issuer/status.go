package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
)

func statusCmd(stdout io.Writer) *cobra.Command {
	var (
		o      connect.Options
		asJSON bool
		node   string
	)
	cmd := &cobra.Command{
		Use:   "status",
		Short: "show the leader, term, epoch, clock and counts",
		Long: `Ask the leader (or, with --node, one specific node) for its status: raft
role, term, commit and applied index, peers, policy epoch, control-plane
clock, grant counts, receipt sequence and how far publication has got.`,
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
					return fmt.Errorf("%w: node %s did not answer: %v", connect.ErrConnect, node, err)
				}
				if err := json.Unmarshal(msg.Data, &st); err != nil {
					return err
				}
			} else if st, err = c.Status(ctx); err != nil {
				return fmt.Errorf("%w: %v (is a leader elected? try --node ID)", connect.ErrConnect, err)
			}
			if asJSON {
				b, _ := json.MarshalIndent(st, "", "  ")
				fmt.Fprintln(stdout, string(b))
				return nil
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
				{"receipts", fmt.Sprintf("seq %d, published %d, stream %d, outbox %d", st.Seq, st.Published, st.StreamLastSeq, st.Outbox)},
				{"state digest", st.StateDigest},
			}
			if st.DevMode {
				rows = append(rows, [2]string{"mode", "development (no authentication)"})
			}
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
			}
			for _, p := range st.Peers {
				mark := ""
				if p.Leader {
					mark = " (leader)"
				}
				fmt.Fprintf(tw, "peer\t%s %s %s%s\n", p.ID, p.Address, p.Suffrage, mark)
			}
			return tw.Flush()
		},
	}
	addConnFlags(cmd, &o)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&node, "node", "", "ask this node instead of the leader")
	return cmd
}
