package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/events"
)

// dbHelp is the --db flag's usage, shared by the commands that read or
// write a projection.
const dbHelp = "path of the projection file (bbolt; created by 'auditor project')"

func newProjectCmd(g *globals) *cobra.Command {
	var (
		db     string
		follow bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "project --db PATH [--follow] [--json]",
		Short: "Keep a local projection of the stream up to date (for explain and serve)",
		Long: `project folds ` + events.StreamName + ` into a projection file (--db, created if
absent): the receipts themselves, the issuer's state at the projection's
head, and indexes of grants (permit, attempt, effects), reviews, sources,
refusals, revocations, epochs, and per-worker and per-lane timelines.

It resumes from the file's last committed sequence: the first run reads the
whole stream, later runs only what was published since. With --follow it
keeps the file up to date until interrupted. 'auditor serve --db' does the
same in the background while it serves the web view.

It prints the projection's head (sequence, hash) and state digest, which
equals the state_digest of 'issuer status' at the same sequence, and the
first invariant violation found by the checks it ran while projecting
(receipts projected by earlier runs are not checked again: 'auditor verify'
checks the whole stream).

A receipt that does not extend the file's head (another stream, or an
altered one), does not decode, or has a kind this auditor does not know
stops project with exit 1; the file keeps everything before it. Remove the
file to rebuild it from sequence 1.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if db == "" {
				return usageErr("--db PATH is required")
			}
			return project(cmd.Context(), g, db, follow, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", "", dbHelp)
	f.BoolVar(&follow, "follow", false, "keep projecting new receipts until interrupted")
	f.BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

// openProjection opens the projection for writing; errors are exit codes.
func openProjection(path string) (*projection.DB, error) {
	d, err := projection.Open(projection.DefaultConfig(path))
	if err != nil {
		return nil, &exitError{code: ExitUnavailable, err: err}
	}
	return d, nil
}

// openProjectionRO opens the projection for reading.
func openProjectionRO(path string) (*projection.DB, error) {
	cfg := projection.DefaultConfig(path)
	cfg.ReadOnly = true
	d, err := projection.Open(cfg)
	if err != nil {
		return nil, &exitError{code: ExitUnavailable, err: err}
	}
	return d, nil
}

// catchUp applies the stream's receipts after the projection's head: up
// to the stream's last sequence when follow is false, or until ctx ends.
// caughtUp is called (if not nil) each time the projection has committed
// everything the stream held.
func catchUp(ctx context.Context, r *receipts, d *projection.DB, follow bool, caughtUp func()) error {
	from := d.Head().Seq + 1
	until := r.last
	if follow {
		until = 0
	} else if r.last < from {
		if caughtUp != nil {
			caughtUp()
		}
		return nil
	}
	err := r.read(ctx, from, until, func(m message) error {
		if err := d.Apply(m.data, m.seq); err != nil {
			return &exitError{code: ExitViolation, err: err}
		}
		if m.pending == 0 {
			if err := d.Flush(); err != nil {
				return &exitError{code: ExitUnavailable, err: err}
			}
			if caughtUp != nil {
				caughtUp()
			}
		}
		return nil
	})
	if ferr := d.Flush(); err == nil && ferr != nil {
		err = &exitError{code: ExitUnavailable, err: ferr}
	}
	return err
}

// projectReport is project's output; --json prints it as is.
type projectReport struct {
	projection.Status
	Stream        string  `json:"stream"`
	StreamLastSeq uint64  `json:"stream_last_seq"`
	Projected     uint64  `json:"projected"`
	Seconds       float64 `json:"seconds"`
}

func project(ctx context.Context, g *globals, path string, follow, asJSON bool) error {
	d, err := openProjection(path)
	if err != nil {
		return err
	}
	defer d.Close()
	r, err := openReceipts(ctx, g.conn)
	if err != nil {
		return err
	}
	defer r.Close()
	start, before := time.Now(), d.Head().Seq
	err = catchUp(ctx, r, d, follow, nil)
	if err != nil && ctx.Err() != nil {
		if !follow {
			return unavailableErr(fmt.Errorf("interrupted at seq %d of %d; the projection keeps what it committed", d.Head().Seq, r.last))
		}
		err = nil // interrupting is how --follow ends
	}
	if err != nil {
		return err
	}
	st, serr := d.Status()
	if serr != nil {
		return unavailableErr(serr)
	}
	rep := projectReport{Status: st, Stream: events.StreamName, StreamLastSeq: r.last,
		Projected: st.Seq - before, Seconds: time.Since(start).Seconds()}
	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(g.stdout, string(b))
	} else {
		writeProjectReport(g.stdout, rep)
	}
	return nil
}

func writeProjectReport(w io.Writer, r projectReport) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "projection\t%s\n", r.Path)
	fmt.Fprintf(tw, "head\tseq %d %s\n", r.Seq, r.Head)
	fmt.Fprintf(tw, "state_digest\t%s (issuer state_digest at seq %d)\n", r.Digest, r.Seq)
	fmt.Fprintf(tw, "projected\t%d receipts in %.2fs (stream last seq %d)\n", r.Projected, r.Seconds, r.StreamLastSeq)
	fmt.Fprintf(tw, "checks\t%s\n", checksLine(r.Status))
	tw.Flush()
}

// checksLine describes the verification status of a projection.
func checksLine(st projection.Status) string {
	switch {
	case st.Violation != nil:
		return "FAILED: " + st.Violation.Error()
	case st.VerifiedFrom <= 1:
		return fmt.Sprintf("ok from seq 1 to %d", st.Seq)
	case st.VerifiedFrom > st.Seq:
		return "nothing checked since the last run (run 'auditor verify' for the whole stream)"
	}
	return fmt.Sprintf("ok from seq %d to %d (earlier receipts were checked by earlier runs; 'auditor verify' checks the whole stream)", st.VerifiedFrom, st.Seq)
}
