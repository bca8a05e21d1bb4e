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
	"github.com/writ-dev/writ/fsm"
)

func reviewsCmd(stdout io.Writer) *cobra.Command {
	var (
		o      connect.Options
		asJSON bool
	)
	list := &cobra.Command{
		Use:   "reviews",
		Short: "list the calls held for an operator's approval",
		Long: `List the open reviews: calls the policy answered approval_required, held
until an operator approves one (issuer approve ID), its worker is revoked,
or an hour passes on the issuer's clock. Approved reviews whose approval
the worker has not used yet are listed too, as "approved".

Each line names the review id, the worker, lane and tool, the start of the
request digest (the exact call an approval binds), and how long ago it was
opened and until when it stays open. 'issuer reviews show ID' prints one
review whole, with the rules that fired and the grounds from its receipt.

A read-only query: nothing is written to the log.`,
		Example: `  issuer reviews
  issuer reviews show rv-58f1175eb5b79f789947
  issuer reviews --json | jq -r '.reviews[] | select(.state=="open") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := fetchReviews(cmd, &o, "")
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, rs)
			}
			if len(rs.Reviews) == 0 {
				fmt.Fprintln(stdout, "no open reviews")
				return nil
			}
			now := time.Unix(0, rs.Clock)
			tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCAPTION\tSTATE\tWORKER\tLANE\tTOOL\tDIGEST\tOPENED\tUNTIL")
			for _, r := range rs.Reviews {
				opened, until := "-", "-"
				if r.OpenedAt != 0 {
					opened = now.Sub(time.Unix(0, r.OpenedAt)).Round(time.Second).String() + " ago"
				}
				switch {
				case r.Until != 0:
					until = "in " + time.Unix(0, r.Until).Sub(now).Round(time.Second).String()
				case r.ApprovalExpires != 0:
					until = "in " + time.Unix(0, r.ApprovalExpires).Sub(now).Round(time.Second).String()
				}
				digest := shortDigest(r.Digest)
				if r.ArtifactSHA256 != "" {
					digest = "sha256:" + shortDigest(r.ArtifactSHA256)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, dashIfEmpty(r.Caption), r.State, r.Worker, r.Lane, dashIfEmpty(r.Tool), digest, opened, until)
			}
			return tw.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show REVIEW",
		Short: "print one review whole",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !api.ValidReviewID(args[0]) && !fsm.IsReviewRef(args[0]) {
				return usageError{fmt.Errorf("review %q: want rv- and 20 lowercase hex digits, a caption or a keep token, as 'issuer reviews' lists them", args[0])}
			}
			rs, err := fetchReviews(cmd, &o, args[0])
			if err != nil {
				return err
			}
			if len(rs.Reviews) != 1 {
				return fmt.Errorf("%w: the issuer answered %d reviews for one id", connect.ErrConnect, len(rs.Reviews))
			}
			r := rs.Reviews[0]
			if asJSON {
				return printJSON(stdout, r)
			}
			at := func(ns int64) string {
				if ns == 0 {
					return "-"
				}
				return time.Unix(0, ns).UTC().Format(time.RFC3339)
			}
			tw := tabwriter.NewWriter(stdout, 0, 2, 2, ' ', 0)
			rows := [][2]string{
				{"id", r.ID}, {"caption", r.Caption}, {"keep token", r.Keep}, {"state", r.State},
				{"artifact", r.ArtifactPath}, {"artifact sha256", r.ArtifactSHA256}, {"transition", r.Transition},
				{"destination", r.Destination}, {"reviewer role", r.ReviewerRole}, {"decided by", r.DecidedBy}, {"worker", r.Worker}, {"lane", r.Lane}, {"session", r.Session},
				{"tool", r.Tool}, {"digest", r.Digest}, {"reason", r.Reason}, {"missing", r.Missing}, {"detail", r.Detail},
				{"rules", strings.Join(r.Rules, ", ")}, {"surface", r.Surface}, {"target", r.Target},
				{"receipt", fmt.Sprint(r.Seq)}, {"opened", at(r.OpenedAt)}, {"open until", at(r.Until)},
				{"approval expires", at(r.ApprovalExpires)},
			}
			for _, row := range rows {
				if row[1] != "" && row[1] != "-" {
					fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
				}
			}
			for _, g := range r.Grounds {
				fmt.Fprintf(tw, "ground\t%s\n", g)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			switch {
			case r.State == "open" && r.Caption != "":
				fmt.Fprintf(stdout, "decide it (a person decides, not the agent): issuer review approve|reject %s\n", r.Caption)
			case r.State == "open":
				fmt.Fprintf(stdout, "approve it (a person decides, not the agent): issuer approve %s\n", r.ID)
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{list, show} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	addConnFlags(list, &o)
	list.AddCommand(show)
	addConnFlags(show, &o)
	return list
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fetchReviews asks the leader for the reviews, or for one.
func fetchReviews(cmd *cobra.Command, o *connect.Options, id string) (api.Reviews, error) {
	c, ctx, done, err := operatorClient(cmd.Context(), o)
	if err != nil {
		return api.Reviews{}, err
	}
	defer done()
	rs, err := c.Reviews(ctx, id)
	if err != nil {
		return rs, fmt.Errorf("%w: %v", connect.ErrConnect, err)
	}
	if rs.Error != "" {
		return rs, refusedError{rs.Error}
	}
	return rs, nil
}
