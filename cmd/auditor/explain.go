package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/audit/projection"
)

func newExplainCmd(g *globals) *cobra.Command {
	var (
		db     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "explain --db PATH GRANT | SEQ | REVIEW",
		Short: "Show the chain of receipts that authorized or refused a side effect",
		Long: `explain reads a projection file (see 'auditor project') and prints the chain
behind one side effect, named by a grant id, a receipt sequence number or a
review id (prefix with grant:, seq: or review: when an id looks like
another):

  decision   the permit, deny or approval_required receipt: the request
             (worker, lane, tool, request digest, consequence, target as a
             digest), the rules matched, the reason and recovery
  epoch      the policy epoch in force and the receipt that applied it
  grounds    the provenance grounds (field, source, authority level,
             revocation counter, transform) and the sources' registrations
  review     the review the call was held for or consumed, and the approval
  attempt    the spend
  effects    every effect report, with its verifier, and the closure:
             confirmed, failed, unknown, contested (reports disagree), or
             unverified (spent, no verifier has reported)
  later      revocations, cancellations and epoch changes after the permit
             that would refuse the same grant now, and its expiry

and ends with one sentence to paste into an incident report. Targets and
idempotency keys are shown as digests, never in clear.

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
		state := "open"
		if !r.Open() {
			state = "approved"
		}
		fmt.Fprintf(w, "  review     %s %s (held at seqs %v, approval seq %d, consumed by %s at seq %d)\n",
			r.ID, state, r.RequiredSeqs, r.ApprovalSeq, dash(r.GrantID), r.PermitSeq)
	}
	one("approval", x.Approval)
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
	}
	for _, s := range x.Later {
		writeStep(w, "later", s)
	}
	one("receipt", x.Event)
	fmt.Fprintf(w, "\n%s\n", x.Sentence)
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
