package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
)

// newReviewCmd is "worker-agent review": a coordinator worker puts an
// artifact up for a person's review.
func newReviewCmd(g *globals) *cobra.Command {
	parent := &cobra.Command{
		Use:   "review",
		Short: "Open a review for an artifact (coordinator lane)",
		Args:  cobra.NoArgs,
	}
	parent.AddCommand(newReviewOpenCmd(g))
	return parent
}

func newReviewOpenCmd(g *globals) *cobra.Command {
	var (
		lane, session, path, caption, transition string
		recipient, class, role                   string
	)
	cmd := &cobra.Command{
		Use:   "open --artifact PATH --caption SLUG --transition A->B [--recipient R | --destination-class C] [--reviewer-role ROLE]",
		Short: "Put an artifact up for a person's review",
		Long: `Open a review for an artifact: the issuer records its path and the SHA-256
of its bytes (computed here, from the file), the transition the review
would authorize (e.g. review_ready->send), where it leads (one recipient or
a destination class) and the reviewer role that may decide it. Only a
worker of the coordinator lane may open one; nobody in any worker lane may
decide it: a person does, by caption or keep token.

The answer names the caption, <slug>_v<N>_review. Opening the same slug
again for a changed file opens v<N+1> and supersedes the earlier version:
an approval given to v<N> never covers the new file (approval_unbindable,
missing artifact_digest, recovery rerender_artifact). Opening it again for
the same file answers with the review it has.

` + exitCodesHelp,
		Example: `  worker-agent review open --worker coord-1 --lane coordinator --artifact out/q3-report.pdf \
    --caption q3-report --transition review_ready->send --recipient cfo@example.com --reviewer-role finance`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.checkWorker(); err != nil {
				return err
			}
			if err := g.checkConn(); err != nil {
				return err
			}
			switch {
			case lane == "":
				return usageErr("--lane is required (coordinator)")
			case path == "":
				return usageErr("--artifact is required: the file to review")
			case !api.ValidSlug(caption):
				return usageErr("--caption %q: lower-case letters, digits and single hyphens, starting with a letter, at most %d bytes", caption, api.MaxSlug)
			case !strings.Contains(transition, "->"):
				return usageErr("--transition %q: want FROM->TO, e.g. review_ready->send", transition)
			case recipient != "" && class != "":
				return usageErr("give --recipient or --destination-class, not both")
			case len(path) > api.MaxArtifactPath:
				return usageErr("--artifact is longer than %d bytes", api.MaxArtifactPath)
			}
			if err := checkID("--lane", lane); err != nil {
				return err
			}
			if cmd.Flags().Changed("session") {
				if err := checkID("--session", session); err != nil {
					return err
				}
			}
			sum, err := fileSHA256(path)
			if err != nil {
				return usageErr("--artifact: %v", err)
			}
			req := api.ReviewOpenRequest{Lane: lane, Session: session, Path: path, SHA256: sum, Caption: caption,
				Transition: transition, Recipient: recipient, DestinationClass: class, ReviewerRole: role}
			return g.call(cmd.Context(), "", func(ctx context.Context, c *client.Client) (grants.Envelope, error) {
				return c.OpenReview(ctx, req)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&lane, "lane", "coordinator", "lane the worker runs in")
	f.StringVar(&session, "session", "", "agent session id")
	f.StringVar(&path, "artifact", "", "the artifact file (required); its SHA-256 is computed here")
	f.StringVar(&caption, "caption", "", "caption slug (required): the review is captioned <slug>_v<N>_review")
	f.StringVar(&transition, "transition", "", "the transition it would authorize, FROM->TO (required)")
	f.StringVar(&recipient, "recipient", "", "the one recipient it leads to")
	f.StringVar(&class, "destination-class", "", "the destination class it leads to")
	f.StringVar(&role, "reviewer-role", "", "the reviewer role that may decide it (default: any operator or reviewer)")
	return cmd
}

// fileSHA256 hashes a file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
