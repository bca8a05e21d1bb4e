package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/audit/projection"
)

func newExplainCmd(g *globals) *cobra.Command {
	var (
		db     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "explain --db PATH GRANT | SEQ | REVIEW | CAPTION | KEEP-TOKEN",
		Short: "Show the chain of receipts that authorized or refused a side effect",
		Long: `explain reads a projection file (see 'auditor project') and prints the chain
behind one side effect, named by a grant id, a receipt sequence number, or a
review by its id, caption (q3-report_v2_review) or keep token
(q3-report_v2_keep) (prefix with grant:, seq: or review: when an id looks
like another):

  decision   the permit, deny or approval_required receipt: the request
             (worker, lane, tool, request digest, consequence, target as a
             digest), the rules matched, the reason and recovery
  epoch      the policy epoch in force and the receipt that applied it
  grounds    the provenance grounds (field, source, authority level,
             revocation counter, transform) and the sources' registrations
  review     the review's decision record: what it covers (the held call,
             or the artifact's path, version and digest), the transition
             and destination, the reviewer role, who approved or rejected
             it and how (by command, or by a plain-text reply quoted
             verbatim with its sender and channel), the grant that used
             it, a lapse or a supersession
  approval   the approval receipt (approval, or review_approved from
             receipt format 4) and, from format 4, the review_consumed
             receipt that records its use; other receipts of the review
             follow as "review rx"
  route      for work under a route lease: the route and the generation
             the grant bound, its owner, and how that generation ended
             (released, lapsed, revoked, with the receipt) and whether
             before or after the attempt
  attempt    the spend
  effects    every effect report, with its verifier, and the closure:
             confirmed, failed, unknown, contested (reports disagree, or
             an effect reported after the grant's route generation ended,
             route_stale: late, never clean), or unverified (spent, no
             verifier has reported)
  later      revocations, cancellations, epoch changes and the end of the
             grant's route generation after the permit that would refuse
             the same grant now, and its expiry

and ends with one sentence to paste into an incident report. Targets and
idempotency keys are shown as digests, never in clear; a reply that
decided a review is quoted, since it is the decision. A review_orphaned
receipt (a reply that bound to nothing) is explained as evidence.

explain reads only the file; it does not contact NATS. Run 'auditor
project --db PATH' first to bring the file up to the stream's head (explain
says which sequence it answers at). While 'auditor serve' or 'auditor
project --follow' holds the file, use the web view's grant page instead.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("explain needs exactly one GRANT, SEQ or REVIEW")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if db == "" {
				return usageErr("--db PATH is required (create it with 'auditor project --db PATH')")
			}
			d, err := openProjectionRO(db)
			if err != nil {
				return err
			}
			defer d.Close()
			x, err := d.ExplainArg(args[0])
			if errors.Is(err, projection.ErrNotFound) {
				return &exitError{code: ExitViolation, err: err}
			}
			if err != nil {
				return &exitError{code: ExitUnavailable, err: err}
			}
			if asJSON {
				b, err := json.MarshalIndent(x, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(g.stdout, string(b))
				return nil
			}
			writeExplanation(g.stdout, x)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbHelp)
	f.BoolVar(&asJSON, "json", false, "print the explanation as JSON")
	return cmd
}

// writeExplanation prints an explanation as indented text.
func writeExplanation(w io.Writer, x *projection.Explanation) {
	fmt.Fprintf(w, "%s (projection at seq %d, head %s)\n", x.Subject, x.Seq, x.Head.Short())
	one := func(label string, s *projection.Step) {
		if s != nil {
			writeStep(w, label, *s)
		}
	}
	one("decision", x.Decision)
	one("epoch", x.Epoch)
	for _, gr := range x.Grounds {
		fmt.Fprintf(w, "  ground     %s\n", gr.Raw)
	}
	for _, s := range x.Sources {
		writeStep(w, "source", s)
	}
	if r := x.Review; r != nil {
		writeReview(w, r)
	}
	one("approval", x.Approval)
	one("consumed", x.Consumed)
	for _, s := range x.ReviewSteps {
		writeStep(w, "review rx", s)
	}
	if rb := x.Route; rb != nil {
		writeRoute(w, rb)
	}
	one("attempt", x.Attempt)
	for _, s := range x.Effects {
		writeStep(w, "effect", s)
	}
	for _, s := range x.Refusals {
		writeStep(w, "refused", s)
	}
	if x.Grant != nil {
		fmt.Fprintf(w, "  closure    %s\n", x.Closure)
		for _, a := range x.Grant.Anomalies {
			fmt.Fprintf(w, "  anomaly    %s\n", a)
		}
		for _, s := range x.Grant.Stale {
			fmt.Fprintf(w, "  late       effect seq %d reported after the route generation ended (route_stale): not clean\n", s)
		}
	}
	for _, s := range x.Later {
		writeStep(w, "later", s)
	}
	one("receipt", x.Event)
	fmt.Fprintf(w, "\n%s\n", x.Sentence)
}

// writeRoute prints the route generation a grant bound.
func writeRoute(w io.Writer, rb *projection.RouteBinding) {
	fmt.Fprintf(w, "  route      %s generation %d", rb.Route, rb.Gen)
	if l := rb.Lease; l != nil {
		fmt.Fprintf(w, " owner %s acquired at seq %d", l.Owner, l.AcquiredSeq)
		if l.Taken {
			fmt.Fprintf(w, " (taken over from %s generation %d)", l.PrevOwner, l.PrevGen)
		}
	}
	switch {
	case rb.Relation == projection.RouteNotProjected:
		fmt.Fprint(w, ", not in the projection")
	case rb.Ended == "":
		fmt.Fprint(w, ", live")
	default:
		fmt.Fprintf(w, ", %s at %s", rb.Ended, time.Unix(0, rb.EndedAt).UTC().Format(time.RFC3339Nano))
		if rb.EndSeq != 0 {
			fmt.Fprintf(w, " (%s seq %d)", rb.EndKind, rb.EndSeq)
		}
		fmt.Fprintf(w, ", %s", strings.ReplaceAll(rb.Relation, "_", " "))
	}
	fmt.Fprintln(w)
}

// writeReview prints a review's decision record.
func writeReview(w io.Writer, r *projection.Review) {
	fmt.Fprintf(w, "  review     %s %s %s", r.Label(), r.ID, r.Status)
	if len(r.RequiredSeqs) > 0 {
		fmt.Fprintf(w, " held at seqs %v", r.RequiredSeqs)
	}
	if r.OpenedSeq != 0 {
		fmt.Fprintf(w, " opened by %s at seq %d", r.Worker, r.OpenedSeq)
	}
	fmt.Fprintln(w)
	if r.ArtifactPath != "" || !r.ArtifactDigest.IsZero() {
		fmt.Fprintf(w, "             artifact %s v%d sha256 %s\n", dash(r.ArtifactPath), r.ArtifactVersion, r.ArtifactDigest.Short())
	}
	if r.Transition != "" || r.Destination != "" || r.ReviewerRole != "" {
		fmt.Fprintf(w, "             transition %s destination %s reviewer role %s\n", dash(r.Transition), dash(r.Destination), dash(r.ReviewerRole))
	}
	how := "by command"
	if p := r.Reply; p != nil {
		how = fmt.Sprintf("by the reply %q from %s on %s (sent %s, relayed by %s, seq %d)", p.Text, dash(p.Sender), dash(p.Channel),
			time.Unix(0, p.At).UTC().Format(time.RFC3339Nano), dash(p.Actor), p.Seq)
	}
	if r.ApprovalSeq != 0 {
		fmt.Fprintf(w, "             approved by %s at seq %d until %s, %s\n", r.Approver, r.ApprovalSeq,
			time.Unix(0, r.ApprovedTill).UTC().Format(time.RFC3339), how)
	}
	if r.RejectedSeq != 0 {
		fmt.Fprintf(w, "             rejected by %s at seq %d, %s\n", r.Rejecter, r.RejectedSeq, how)
	}
	if r.GrantID != "" {
		fmt.Fprintf(w, "             consumed by grant %s at seq %d", r.GrantID, r.PermitSeq)
		if r.ConsumedSeq != 0 {
			fmt.Fprintf(w, " (review_consumed seq %d)", r.ConsumedSeq)
		}
		fmt.Fprintln(w)
	}
	if r.ExpiredSeq != 0 {
		fmt.Fprintf(w, "             the approval lapsed unused (review_expired seq %d)\n", r.ExpiredSeq)
	}
	if r.SupersededSeq != 0 {
		fmt.Fprintf(w, "             superseded by a new version (review_superseded seq %d)\n", r.SupersededSeq)
	}
}

func writeStep(w io.Writer, label string, s projection.Step) {
	keys := make([]string, 0, len(s.Fields))
	for k := range s.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := s.Fields[k]
		if strings.HasSuffix(k, "digest") && len(v) > 16 {
			v = v[:16]
		}
		parts = append(parts, k+"="+v)
	}
	at := "-"
	if s.Seq != 0 {
		at = fmt.Sprintf("seq %d", s.Seq)
	}
	fmt.Fprintf(w, "  %-10s %s %s %s\n", label, at, s.Kind, strings.Join(parts, " "))
}
