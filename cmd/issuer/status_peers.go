package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
)

// operatorRows are the status rows about publication, storage and
// security.
func operatorRows(st api.Status) [][2]string {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	draining := yes(st.OutboxDraining)
	if st.State != "Leader" {
		draining += " (only the leader publishes)"
	}
	rows := [][2]string{
		{"stream watermark", fmt.Sprintf("%d in the stream, %d confirmed through the log, %d in the outbox", st.StreamLastSeq, st.Published, st.Outbox)},
		{"outbox draining", draining},
		{"log", fmt.Sprintf("index %d..%d, snapshot at %d", st.FirstLogIndex, st.LastLogIndex, st.SnapshotIndex)},
		{"durability", fmt.Sprintf("raft log fsync %s (%s), JetStream sync every write %s", known(!st.RaftLogNoSync, st.RaftLogSyncKnown), cmp.Or(st.RaftLogStore, "boltdb"), known(st.JetStreamSyncAlways, st.JetStreamSyncKnown))},
		{"security", fmt.Sprintf("raft TLS %s, NATS TLS %s, NATS auth %s", yes(st.RaftTLS), yes(st.NATSTLS), yes(st.Auth))},
		{"receipt format", receiptFormat(st)},
	}
	if st.NATSURL != "" {
		rows = append(rows, [2]string{"nats", st.NATSURL + " (advertised to clients)"})
	}
	if st.PublishError != "" {
		rows = append(rows, [2]string{"publish error", st.PublishError})
	}
	if st.StreamLostFrom != 0 {
		rows = append(rows, [2]string{"STREAM LOST", fmt.Sprintf("receipts %d..%d were confirmed but are not in the stream: restore it", st.StreamLostFrom, st.StreamLostThrough)})
	}
	if st.StorageError != "" {
		rows = append(rows, [2]string{"STORAGE FAILING", fmt.Sprintf("%s (for %s)", st.StorageError, time.Duration(st.StorageFailingMS)*time.Millisecond)})
	}
	return rows
}

// receiptFormat describes the receipt format level in force and the
// highest this node's build writes (a node that reports neither predates
// levels: 1).
func receiptFormat(st api.Status) string {
	level, build := max(st.ReceiptFormatLevel, 1), max(st.ReceiptFormat, 1)
	s := fmt.Sprintf("level %d in force, this node's build writes up to %d", level, build)
	if level < build {
		s += " (the leader raises it once every voter's build writes it)"
	}
	return s
}

func known(v, ok bool) string {
	switch {
	case !ok:
		return "unknown"
	case v:
		return "yes"
	}
	return "NO"
}

// writePeers asks every peer for its own status and prints one line each:
// role, applied index, how long since it heard from its leader, its
// receipt seq and whether its state digest matches the node asked first.
func writePeers(ctx context.Context, w io.Writer, nc *nats.Conn, first api.Status) error {
	if len(first.Peers) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "\npeer\taddress\trole\tapplied\tlast contact\tseq\tstream\tdigest")
	for _, p := range first.Peers {
		st := first
		var err error
		if p.ID != first.Node {
			st, err = peerStatus(ctx, nc, p.ID)
		}
		if err != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\tunreachable: %v\n", p.ID, p.Address, p.Suffrage, err)
			continue
		}
		contact := "-"
		switch {
		case st.State == "Leader":
			contact = "leader"
		case st.LastContactMS < 0:
			contact = "never"
		default:
			contact = (time.Duration(st.LastContactMS) * time.Millisecond).String() + " ago"
		}
		same := "same"
		switch {
		case st.StateDigest == first.StateDigest:
		case st.Seq < first.Seq || st.AppliedIndex < first.AppliedIndex:
			same = fmt.Sprintf("behind (seq %d)", st.Seq)
		case st.Seq > first.Seq || st.AppliedIndex > first.AppliedIndex:
			same = fmt.Sprintf("ahead (seq %d)", st.Seq)
		default:
			same = "DIFFERS at the same seq (" + short(st.StateDigest) + ")"
		}
		stream := "-"
		if st.State == "Leader" {
			stream = fmt.Sprintf("%d, draining %v", st.StreamLastSeq, st.OutboxDraining)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", p.ID, p.Address, strings.ToLower(st.State), st.AppliedIndex, contact, st.Seq, stream, same)
	}
	return tw.Flush()
}

func peerStatus(ctx context.Context, nc *nats.Conn, id string) (api.Status, error) {
	var st api.Status
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(pctx, api.SubjectStatus+"."+id, []byte(`{"v":1}`))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(msg.Data, &st)
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}
