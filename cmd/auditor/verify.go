package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
)

// progressEvery is how many events pass between progress lines.
var progressEvery uint64 = 100_000

func newVerifyCmd(g *globals) *cobra.Command {
	var (
		from     uint64
		asJSON   bool
		expect   string
		progress bool
	)
	cmd := &cobra.Command{
		Use:   "verify [--from 1] [--json] [--expect-digest HEX]",
		Short: "Check the chain and grant invariants of the whole stream",
		Long: `verify reads ` + events.StreamName + ` from sequence 1 to its last sequence at the
time verify starts, checks every receipt, and prints a summary: events,
last sequence, head hash, projection digest, counts per kind, grants
permitted, spent, cancelled and closed by outcome (confirmed, failed,
unknown, contested), and spent grants with no effect yet (unresolved).

It stops at the first violation and exits 1, naming it:
  violation at seq 42: double_attempt: grant g1 already attempted at seq 17

Checks, in order, with their violation codes:
` + codesHelp() + `
The projection digest is the issuer's state rebuilt from the receipts
alone; it must equal the state_digest of 'issuer status' taken when the
issuer's seq equals the last sequence verified. --expect-digest HEX makes
verify check that (state_digest_mismatch, exit 1).

--from N > 1 checks only the window from N: the first receipt's prev hash
is taken on trust, checks that need earlier receipts are skipped (counted
as unchecked) and there is no projection digest.

Progress goes to stderr every 100000 events when stderr is a terminal or
--progress is given.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var want *events.Hash
			if expect != "" {
				h, err := events.ParseHash(strings.TrimSpace(expect))
				if err != nil {
					return usageErr("--expect-digest: %v", err)
				}
				want = &h
			}
			if from == 0 {
				return usageErr("--from must be 1 or more")
			}
			if from > 1 && want != nil {
				return usageErr("--expect-digest needs the whole stream: drop --from")
			}
			return verify(cmd.Context(), g, verifyOpts{
				from: from, asJSON: asJSON, want: want,
				progress: progress || isTerminal(g.stderr),
			})
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&from, "from", 1, "first sequence to check (more than 1: a partial check, see above)")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	f.StringVar(&expect, "expect-digest", "", "fail unless the projection digest equals this hex state digest")
	f.BoolVar(&progress, "progress", false, "report progress on stderr even when it is not a terminal")
	return cmd
}

func codesHelp() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 2, 2, ' ', 0)
	for _, c := range audit.Codes {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Code, c.Meaning)
	}
	tw.Flush()
	return b.String()
}

type verifyOpts struct {
	from     uint64
	asJSON   bool
	want     *events.Hash
	progress bool
}

// verifyReport is verify's summary; --json prints it as is.
type verifyReport struct {
	Stream        string `json:"stream"`
	URL           string `json:"url"`
	From          uint64 `json:"from"`
	StreamLastSeq uint64 `json:"stream_last_seq"`
	OK            bool   `json:"ok"`
	audit.Summary
	ExpectDigest string           `json:"expect_digest,omitempty"`
	Violation    *audit.Violation `json:"violation"`
	Seconds      float64          `json:"seconds"`
}

func verify(ctx context.Context, g *globals, o verifyOpts) error {
	r, err := openReceipts(ctx, g.conn)
	if err != nil {
		return err
	}
	defer r.Close()
	last := r.last
	if o.from > 1 && last < o.from {
		return usageErr("--from %d is past the end of the stream (last seq %d)", o.from, last)
	}
	v := audit.NewVerifier(audit.Options{From: o.from})
	start := time.Now()
	if last >= o.from {
		// Messages are decoded and hash-checked on GOMAXPROCS goroutines
		// and checked and folded in order on one more (audit.Pipeline):
		// the same verdict as v.Add one by one, faster. v is read only
		// after Close.
		p := v.Pipeline(0)
		var n uint64
		err = r.read(ctx, o.from, last, func(m message) error {
			// Each message from NATS has a buffer of its own that nothing
			// writes to again: handed over, it saves a copy per event.
			if err := p.AddShared(m.data, m.seq); err != nil {
				return errStop
			}
			n++
			if o.progress && n%progressEvery == 0 {
				// n counts messages read; the fold is at most a few
				// thousand behind.
				el := time.Since(start).Seconds()
				fmt.Fprintf(g.stderr, "auditor: verified %d of %d events (%.0f%%), %.0f events/s\n",
					n, last-o.from+1, 100*float64(n)/float64(last-o.from+1), float64(n)/el)
			}
			return nil
		})
		p.Close() // its error is v.Violation(), read below
		if err != nil {
			if ctx.Err() != nil {
				return unavailableErr(fmt.Errorf("interrupted after seq %d of %d: verification incomplete", v.Head().Seq, last))
			}
			return err
		}
	}
	viol := v.Violation()
	if viol == nil && v.Head().Seq < last {
		// The stream ended early: its last messages are gone.
		viol = &audit.Violation{Seq: v.Head().Seq + 1, Code: audit.CodeSeqGap,
			Detail: fmt.Sprintf("the stream's last seq is %d but it holds nothing after seq %d", last, v.Head().Seq)}
	}
	if viol == nil && o.want != nil {
		if err := v.CheckDigest(*o.want); err != nil {
			viol = v.Violation()
		}
	}
	rep := verifyReport{
		Stream: events.StreamName, URL: r.url, From: o.from, StreamLastSeq: last,
		OK: viol == nil, Summary: v.Summary(), Violation: viol,
		Seconds: time.Since(start).Seconds(),
	}
	if o.want != nil {
		rep.ExpectDigest = o.want.String()
	}
	if o.asJSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(g.stdout, string(b))
	} else {
		writeReport(g.stdout, rep)
	}
	if viol != nil {
		return &exitError{code: ExitViolation, err: viol}
	}
	return nil
}

func writeReport(w io.Writer, r verifyReport) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	rate := ""
	if r.Seconds > 0 {
		rate = fmt.Sprintf(", %.0f events/s", float64(r.Events)/r.Seconds)
	}
	fmt.Fprintf(tw, "stream\t%s at %s, last seq %d\n", r.Stream, r.URL, r.StreamLastSeq)
	if r.Events == 0 {
		fmt.Fprintf(tw, "checked\tno events\n")
	} else {
		fmt.Fprintf(tw, "checked\tseq %d..%d (%d events) in %.2fs%s\n", r.FirstSeq, r.LastSeq, r.Events, r.Seconds, rate)
	}
	head := "-"
	if !r.Head.IsZero() {
		head = r.Head.String()
	}
	fmt.Fprintf(tw, "head\t%s\n", head)
	if r.Projection.IsZero() {
		fmt.Fprintf(tw, "projection\t- (partial check)\n")
	} else {
		fmt.Fprintf(tw, "projection\t%s (issuer state_digest at seq %d)\n", r.Projection, r.LastSeq)
	}
	fmt.Fprintf(tw, "kinds\t%s\n", dash(counts(r.Kinds)))
	fmt.Fprintf(tw, "grants\tpermitted=%d spent=%d cancelled=%d unresolved=%d tracked=%d\n",
		r.Permitted, r.Spent, r.Cancelled, r.Unresolved, r.Tracked)
	fmt.Fprintf(tw, "outcomes\t%s\n", counts(r.Closed))
	if r.Unchecked > 0 {
		fmt.Fprintf(tw, "unchecked\t%d (their permit or attempt is before --from)\n", r.Unchecked)
	}
	if r.Violation != nil {
		fmt.Fprintf(tw, "result\tFAILED: %v\n", r.Violation)
	} else {
		fmt.Fprintf(tw, "result\tok\n")
	}
	tw.Flush()
}

func counts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
