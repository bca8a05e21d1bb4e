package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

func newTailCmd(g *globals) *cobra.Command {
	var (
		from   uint64
		follow bool
		asJSON bool
		filt   filterFlags
	)
	cmd := &cobra.Command{
		Use:   "tail [--from N] [--follow] [--json] [--worker W] [--lane L] [--kind K,..] [--reason R,..] [--grant G] [--since T]",
		Short: "Print receipts from the stream, one per line",
		Long: `tail prints the receipts of ` + events.StreamName + ` from sequence --from (default 1)
up to the stream's last sequence when tail started, or, with --follow, keeps
printing new receipts as the issuer publishes them until interrupted.

Each line is either the event's JSON form (--json), or
  SEQ TIME KIND GRANT WORKER DETAIL
with TIME in RFC 3339 (UTC, nanoseconds), "-" for an empty field, and
DETAIL the refusal reason (with tool=NAME on deny and approval_required
lines, and review=ID on the latter), the effect outcome, the epoch, the
revoked counters, or for a source registration the source id, channel, assigned
authority and origins (a refused registration shows its reason and id).

Filters select what is printed (all of them must match): --worker, --lane,
--kind and --reason (comma-separated lists), --grant and --since (a
duration back from now such as 1h, or an RFC 3339 time; compared with the
control-plane time of each receipt). An attempt, effect or refusal against
a grant carries no lane itself: it matches --lane by its permit's lane,
when the permit is at or after --from. For "what did worker w7 do in the
last hour": tail --worker w7 --since 1h; for the calls waiting for a
person: tail --kind approval_required.

tail checks only that each message decodes (canonical encoding, stored hash
matches); a message that does not is reported on stderr and skipped, and
tail exits 1. Use 'auditor verify' for the chain and invariant checks.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == 0 {
				return usageErr("--from must be 1 or more")
			}
			rf, err := filt.parse(time.Now())
			if err != nil {
				return err
			}
			return tail(cmd.Context(), g, from, follow, asJSON, rf)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&from, "from", 1, "first sequence to print")
	f.BoolVar(&follow, "follow", false, "keep printing new receipts until interrupted")
	f.BoolVar(&asJSON, "json", false, "print each event as one line of JSON")
	filt.add(f)
	return cmd
}

func tail(ctx context.Context, g *globals, from uint64, follow, asJSON bool, rf *receiptFilter) error {
	r, err := openReceipts(ctx, g.conn)
	if err != nil {
		return err
	}
	defer r.Close()
	until := r.last
	if follow {
		until = 0
	} else if r.last < from {
		return nil // nothing to print
	}
	out := bufio.NewWriterSize(g.stdout, 64<<10)
	defer out.Flush()
	var bad int
	var firstBad uint64
	err = r.read(ctx, from, until, func(m message) error {
		e, err := events.Decode(m.data)
		if err != nil {
			if bad == 0 {
				firstBad = m.seq
			}
			bad++
			out.Flush()
			fmt.Fprintf(g.stderr, "auditor: seq %d: cannot decode: %v\n", m.seq, err)
			return nil
		}
		if !rf.match(&e) {
			if m.pending == 0 {
				out.Flush()
			}
			return nil
		}
		if asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return &exitError{code: ExitViolation, err: fmt.Errorf("seq %d: %v", m.seq, err)}
			}
			out.Write(b)
			out.WriteByte('\n')
		} else {
			writeHuman(out, e)
		}
		if m.pending == 0 { // caught up: show it now
			if err := out.Flush(); err != nil {
				return unavailableErr(fmt.Errorf("writing output: %v", err))
			}
		}
		return nil
	})
	ferr := out.Flush()
	switch {
	case err != nil && ctx.Err() != nil && follow:
		// Interrupting is how --follow ends.
	case err != nil && ctx.Err() != nil:
		return unavailableErr(fmt.Errorf("interrupted before the end of the stream (seq %d)", until))
	case err != nil:
		return err
	case ferr != nil:
		return unavailableErr(fmt.Errorf("writing output: %v", ferr))
	}
	if bad > 0 {
		return &exitError{code: ExitViolation, err: fmt.Errorf("%d message(s) did not decode, the first at seq %d (run 'auditor verify' for the full check)", bad, firstBad)}
	}
	return nil
}

// writeHuman writes SEQ TIME KIND GRANT WORKER DETAIL.
func writeHuman(w io.Writer, e events.Event) {
	fmt.Fprintf(w, "%d %s %s %s %s %s\n", e.Seq, time.Unix(0, e.Time).UTC().Format(time.RFC3339Nano),
		e.Kind, dash(e.GrantID), dash(e.Worker), dash(detail(e)))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// detail is the one field that says most about an event of its kind.
func detail(e events.Event) string {
	switch e.Kind {
	case events.KindEpoch:
		return fmt.Sprintf("epoch=%d policy=%s", e.Epoch, e.PolicyDigest.Short())
	case events.KindRevoke:
		parts := make([]string, 0, len(e.Counters)+1)
		for _, c := range e.Counters {
			parts = append(parts, fmt.Sprintf("%s=%d", c.Key, c.Value))
		}
		if len(e.Cancelled) > 0 {
			parts = append(parts, "cancelled="+strings.Join(e.Cancelled, ","))
		}
		if len(e.Routes) > 0 {
			parts = append(parts, "routes="+strings.Join(e.Routes, ","))
		}
		return strings.Join(parts, " ")
	case events.KindRouteAcquired, events.KindRouteRenewed, events.KindRouteReleased, events.KindRouteLapsed, events.KindRouteTaken,
		events.KindRouteForgotten:
		s := fmt.Sprintf("route=%s gen=%d", e.Route, e.RouteGen)
		if e.ExpiresAt != 0 && e.Kind != events.KindRouteLapsed && e.Kind != events.KindRouteForgotten {
			s += " until=" + time.Unix(0, e.ExpiresAt).UTC().Format(time.RFC3339)
		}
		if e.Kind == events.KindRouteTaken {
			s += fmt.Sprintf(" from=%s@%d", e.PrevOwner, e.PrevGen)
		}
		return s
	case events.KindEffect:
		if e.RouteStale {
			return e.Outcome + " by " + e.Verifier + " (late: route " + e.Route + " generation " + fmt.Sprint(e.RouteGen) + " had ended)"
		}
		return e.Outcome + " by " + e.Verifier
	case events.KindSource:
		return sourceDetail(e)
	case events.KindApproval:
		return approvalDetail(e)
	case events.KindReviewOpened, events.KindReviewApproved, events.KindReviewRejected, events.KindReviewConsumed,
		events.KindReviewOrphaned, events.KindReviewExpired, events.KindReviewSuperseded:
		return reviewDetail(e)
	case events.KindBreakGlass:
		// Who opened which payloads, until when, and why.
		return fmt.Sprintf("case=%s scope=%s until=%s by=%s reason=%s", e.CaseID, e.GlassScope,
			time.Unix(0, e.ExpiresAt).UTC().Format(time.RFC3339), e.Actor, strconv.Quote(e.Detail))
	case events.KindRefusalSummary:
		// How many requests admission control refused undecided.
		return fmt.Sprintf("%s count=%d %s", e.Reason, e.Amount, e.Tool)
	case events.KindPermit:
		if e.ReviewID != "" {
			return "approved review=" + e.ReviewID
		}
	}
	if e.Reason == "" {
		return e.Outcome
	}
	s := e.Reason
	if e.Tool != "" && (e.Kind == events.KindDeny || e.Kind == events.KindApprovalRequired) {
		// Which call was refused or held.
		s += " tool=" + e.Tool
	}
	id, _, _, _ := e.SourceDescriptor()
	switch {
	case e.ReviewID != "":
		// An approval_required answer, or an approval of an unknown review.
		return s + " review=" + e.ReviewID
	case e.Channel != "" && id != "":
		// A refused source registration, in either form.
		return s + " source=" + id
	case len(e.Grounds) > 0:
		return fmt.Sprintf("%s grounds=%d", s, len(e.Grounds))
	}
	return s
}

// approvalDetail describes an operator's approval: the review, the call
// it covers, until when, who approved and the note.
func approvalDetail(e events.Event) string {
	parts := []string{"review=" + e.ReviewID, "tool=" + e.Tool, "digest=" + e.Digest.Short(),
		"until=" + time.Unix(0, e.ExpiresAt).UTC().Format(time.RFC3339), "by=" + e.Actor}
	if e.Detail != "" {
		parts = append(parts, "note="+strconv.Quote(e.Detail))
	}
	return strings.Join(parts, " ")
}

// reviewDetail describes a review receipt: the caption and id, what the
// review covers (the artifact and transition, or the tool), who decided
// and the reply it came from (verbatim, quoted), or what an orphaned reply
// lacked and the captions it could have meant.
func reviewDetail(e events.Event) string {
	var parts []string
	if e.Caption != "" {
		parts = append(parts, "caption="+fsm.Caption(e.Caption, e.ArtifactVersion))
	}
	if e.ReviewID != "" {
		parts = append(parts, "review="+e.ReviewID)
	}
	if e.ArtifactPath != "" {
		parts = append(parts, "artifact="+e.ArtifactPath)
	}
	if !e.ArtifactDigest.IsZero() {
		parts = append(parts, "sha256="+e.ArtifactDigest.Short())
	}
	if e.Tool != "" {
		parts = append(parts, "tool="+e.Tool)
	}
	for _, kv := range [][2]string{{"transition", e.Transition}, {"dest", e.Destination}, {"role", e.ReviewerRole}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	switch e.Kind {
	case events.KindReviewApproved, events.KindReviewRejected, events.KindReviewOrphaned:
		parts = append(parts, "by="+e.Actor)
	case events.KindReviewConsumed:
		parts = append(parts, fmt.Sprintf("permit=%d", e.RefSeq))
	}
	if e.Kind == events.KindReviewApproved {
		parts = append(parts, "until="+time.Unix(0, e.ExpiresAt).UTC().Format(time.RFC3339))
	}
	if e.Kind == events.KindReviewOrphaned {
		parts = append(parts, "missing="+strconv.Quote(e.Missing))
		if len(e.Candidates) > 0 {
			parts = append(parts, "candidates="+strings.Join(e.Candidates, ","))
		}
	}
	if e.ReplyText != "" {
		parts = append(parts, "reply="+strconv.Quote(e.ReplyChannel+"/"+e.ReplySender+": "+e.ReplyText))
	} else if e.Detail != "" && e.Kind != events.KindReviewOpened {
		parts = append(parts, "note="+strconv.Quote(e.Detail))
	}
	return strings.Join(parts, " ")
}

// sourceDetail describes a source registration: id, channel, the
// authority the issuer assigned, what it was derived from, the path it
// was read from, the tool and whether it is model-made. Both forms of a
// source event (events.Event.SourceDescriptor) print alike.
func sourceDetail(e events.Event) string {
	id, origins, path, modelMade := e.SourceDescriptor()
	parts := []string{"source=" + id, "channel=" + e.Channel, "authority=" + e.Authority}
	if len(origins) > 0 {
		parts = append(parts, "origins="+strings.Join(origins, ","))
	}
	if path != "" {
		parts = append(parts, events.SourcePathPrefix+path)
	}
	if e.Tool != "" {
		parts = append(parts, "tool="+e.Tool)
	}
	for _, g := range e.Grounds {
		if g != events.GroundModelMade {
			parts = append(parts, g)
		}
	}
	if modelMade {
		parts = append(parts, events.GroundModelMade)
	}
	return strings.Join(parts, " ")
}
