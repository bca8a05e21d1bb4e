package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// reviewCmd is "issuer review": reviews as decision records. list and show
// are "issuer reviews" and "issuer reviews show"; approve, reject and
// reply decide.
func reviewCmd(stdout io.Writer) *cobra.Command {
	parent := &cobra.Command{
		Use:   "review",
		Short: "list, show and decide reviews (approve, reject, or relay a plain-text reply)",
		Long: `Reviews are decision records (see docs/reviews.md). A review is opened by a
call the policy holds (approval_required) or by a coordinator worker for an
artifact (worker-agent review open). Each has a caption a person reads,
<slug>_v<N>_review, and a keep token, <slug>_v<N>_keep, that approves that
version and no other.

  issuer review list                  every review the issuer holds, any status
  issuer review show REF              one review (REF: id, caption or keep token)
  issuer review approve REF           approve it (a person decides, never the agent)
  issuer review reject REF            reject it
  issuer review reply --channel C --sender S --at T --text "..."
                                      relay a person's chat reply; it decides a
                                      review only if it binds to exactly one

Operators decide any review. A reviewer identity (auth file role reviewer)
decides the reviews whose reviewer role it holds: run the command with that
NATS user and --as-reviewer NAME. 'issuer approve' and 'issuer reviews'
keep working; on a review opened at receipt format 4 'issuer approve'
decides as 'issuer review approve' does.`,
		Args: cobra.NoArgs,
	}
	list := reviewsCmd(stdout)
	list.Use, list.Short = "list", "list the reviews (as 'issuer reviews')"
	var show *cobra.Command
	for _, c := range list.Commands() {
		if c.Name() == "show" {
			show = c
		}
	}
	list.RemoveCommand(show)
	parent.AddCommand(list, show, reviewDecideCmd(stdout, "approve"), reviewDecideCmd(stdout, "reject"), reviewReplyCmd(stdout))
	return parent
}

// reviewDecideCmd is "issuer review approve|reject REF".
func reviewDecideCmd(stdout io.Writer, decision string) *cobra.Command {
	var (
		o        connect.Options
		ttl      time.Duration
		note     string
		reviewer string
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   decision + " REF",
		Short: decision + " a review by id, caption or keep token",
		Long: `Decide a review: REF is its id (rv-...), its caption (<slug>_v<N>_review)
or its keep token (<slug>_v<N>_keep). The decision is a receipt
(review_approved or review_rejected) naming who decided and --note.

An approval is bound to its use when the worker's call is permitted: it
must still be the one live review of that call or artifact, the artifact
unchanged, the reviewer still holding the role, the policy epoch the same,
unused and not lapsed (--ttl). Otherwise the call is refused
approval_unbindable, naming what is missing; approving the same review
again refreshes an approval the epoch or time made stale.

A worker, in any lane, is refused; so is a reviewer deciding a review its
own identity opened or one asking for a role it does not hold.

Exit codes: 0 decided, 1 refused, 2 usage, 3 issuer unavailable.`,
		Example: `  issuer review ` + decision + ` q3-report_v2_review --note "figures checked"
  issuer review ` + decision + ` q3-report_v2_keep --as-reviewer dana --user dana --password-file dana.pw`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := args[0]
			if !api.ValidReviewID(ref) && !fsm.IsReviewRef(ref) {
				return usageError{fmt.Errorf("review %q: want an id (rv- and 20 hex digits), a caption (<slug>_v<N>_review) or a keep token (<slug>_v<N>_keep), as 'issuer review list' shows them", ref)}
			}
			if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) || ttl > time.Duration(api.MaxApprovalTTLMillis)*time.Millisecond {
				return usageError{fmt.Errorf("--ttl must be between 1ms and %v (0: the default, %v)",
					time.Duration(api.MaxApprovalTTLMillis)*time.Millisecond, time.Duration(api.DefaultApprovalTTLMillis)*time.Millisecond)}
			}
			if len(note) > api.MaxApprovalNote {
				return usageError{fmt.Errorf("--note is %d bytes, at most %d", len(note), api.MaxApprovalNote)}
			}
			if reviewer != "" && api.ValidID(reviewer) != nil {
				return usageError{fmt.Errorf("--as-reviewer %q: %v", reviewer, api.ValidID(reviewer))}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.DecideReview(ctx, reviewer, api.ReviewDecideRequest{Review: ref, Decision: decision, TTLMillis: ttl.Milliseconds(), Note: note})
			if err != nil {
				return err
			}
			return printDecision(stdout, env, asJSON)
		},
	}
	if decision == "approve" {
		cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the approval waits for its use (default 10m, at most 24h)")
	}
	cmd.Flags().StringVar(&note, "note", "", "why; recorded in the receipt")
	cmd.Flags().StringVar(&reviewer, "as-reviewer", "", "decide as this reviewer identity (the NATS user must be that reviewer)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the issuer's answer as JSON")
	addConnFlags(cmd, &o)
	return cmd
}

// reviewReplyCmd is "issuer review reply".
func reviewReplyCmd(stdout io.Writer) *cobra.Command {
	var (
		o                     connect.Options
		channel, sender, text string
		at, reviewer          string
		asJSON                bool
	)
	cmd := &cobra.Command{
		Use:   "reply --channel C --sender S --at T --text TEXT",
		Short: "relay a person's plain-text reply (as a chat gateway would)",
		Long: `Relay a person's reply from a chat channel. The issuer decodes the text with
a fixed table (docs/reviews.md): a keep token (<slug>_v<N>_keep) approves
that exact review; "keep", "approved", "yes", "lgtm", "approve it" accept;
"no", "reject", "stop" refuse; "keep all" or "keep all three" decide every
live candidate when the count matches. It decides only when the reply binds
to exactly one live review the sender may decide (or, for "all", to exactly
the live ones):

  one candidate        a review_approved or review_rejected receipt
  several candidates   a refusal (approval_unbindable, missing ambiguous)
                       listing them; nothing decided
  none                 a review_orphaned receipt binding nothing
  seen before          the same channel, sender, --at and text: a
                       review_orphaned receipt (missing "new reply")

The channel, sender, time and text are kept verbatim in the receipt.
--at is when the message was sent (RFC 3339, or Unix nanoseconds): it is
part of what makes a relayed reply recognisable when it comes twice.

Exit codes: 0 decided, 1 nothing decided (orphaned, ambiguous, refused),
2 usage, 3 issuer unavailable.`,
		Example: `  issuer review reply --channel slack:#finance --sender dana --at 2026-12-03T16:20:00Z --text "q3-report_v2_keep"
  issuer review reply --channel sms:+15550100 --sender +15550100 --at 1796315060998374510 --text "keep all three" --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case channel == "" || sender == "" || text == "" || at == "":
				return usageError{fmt.Errorf("--channel, --sender, --at and --text are required")}
			case len(text) > api.MaxReplyText:
				return usageError{fmt.Errorf("--text is %d bytes, at most %d", len(text), api.MaxReplyText)}
			case len(channel) > api.MaxReplyChannel || len(sender) > api.MaxReplySender:
				return usageError{fmt.Errorf("--channel and --sender are at most %d bytes", api.MaxReplyChannel)}
			case reviewer != "" && api.ValidID(reviewer) != nil:
				return usageError{fmt.Errorf("--as-reviewer %q: %v", reviewer, api.ValidID(reviewer))}
			}
			ns, err := parseAt(at)
			if err != nil {
				return usageError{err}
			}
			c, ctx, done, err := operatorClient(cmd.Context(), &o)
			if err != nil {
				return err
			}
			defer done()
			env, err := c.ReplyReview(ctx, reviewer, api.ReviewReplyRequest{Channel: channel, Sender: sender, At: ns, Text: text})
			if err != nil {
				return err
			}
			return printDecision(stdout, env, asJSON)
		},
	}
	cmd.Flags().StringVar(&channel, "channel", "", "where the reply came from, e.g. slack:#finance")
	cmd.Flags().StringVar(&sender, "sender", "", "who sent it, as the channel names them")
	cmd.Flags().StringVar(&at, "at", "", "when it was sent: RFC 3339 or Unix nanoseconds")
	cmd.Flags().StringVar(&text, "text", "", "the reply, verbatim")
	cmd.Flags().StringVar(&reviewer, "as-reviewer", "", "relay as this reviewer identity (the NATS user must be that reviewer)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the issuer's answer as JSON")
	addConnFlags(cmd, &o)
	return cmd
}

// parseAt reads --at: RFC 3339 or Unix nanoseconds.
func parseAt(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--at %q: want RFC 3339 (2026-12-03T16:20:00Z) or Unix nanoseconds", s)
	}
	return t.UnixNano(), nil
}

// printDecision prints the issuer's answer to a decision or a reply: one
// line (or the envelope as JSON), and a refusal or an orphaned reply as
// refusedError.
func printDecision(w io.Writer, env grants.Envelope, asJSON bool) error {
	if asJSON {
		if err := printJSON(w, env); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		what := env.Kind.String()
		if env.Kind == 0 {
			what = string(env.Decision)
		}
		fmt.Fprintf(&b, "%s", what)
		if env.Caption != "" {
			fmt.Fprintf(&b, " %s", env.Caption)
		}
		if env.ReviewID != "" {
			fmt.Fprintf(&b, " (%s)", env.ReviewID)
		}
		if env.Seq != 0 {
			fmt.Fprintf(&b, " receipt %d", env.Seq)
		}
		if env.Reason != "" {
			fmt.Fprintf(&b, ": %s", env.Reason)
		}
		if env.Missing != "" {
			fmt.Fprintf(&b, " (missing %s)", env.Missing)
		}
		if env.Detail != "" {
			fmt.Fprintf(&b, ": %s", env.Detail)
		}
		fmt.Fprintln(w, b.String())
	}
	if env.Decision == grants.Permit {
		return nil
	}
	if env.Kind.String() == "review_rejected" {
		return nil // a rejection decided
	}
	msg := "nothing decided"
	if env.Reason != "" {
		msg = "refused: " + string(env.Reason)
	}
	if env.Detail != "" {
		msg += ": " + env.Detail
	}
	return refusedError{msg}
}
