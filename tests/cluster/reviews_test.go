package clustertests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// reviewClusterPolicy holds every vault_read call for review.
const reviewClusterPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]}}`

// TestReviewsSurviveFailoverAndRestart: reviews and approvals are
// replicated authority. Three real issuer processes at receipt format 4:
// two held calls (one approved by a plain-text reply, one open) and an
// artifact review are open when the leader is SIGKILLed; the new leader
// lists them with the same captions and statuses and takes a reply
// approving the second call. Then every node is stopped and restarted on
// its data dir: the state digest is the same, both approved calls are
// permitted once each (review_consumed), the next retry is held again,
// the reply seen before the restart is still recognised as a duplicate,
// and the stream passes the auditor.
func TestReviewsSurviveFailoverAndRestart(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(reviewClusterPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartWith(t, 3, cluster.Options{PolicyFile: pol})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	waitLevel := func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, err := c.LeaderStatus()
			if err == nil && st.ReceiptFormatLevel >= fsm.ReceiptFormatReviews {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("receipt format level 4 or above never reached: %+v %v", st, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLevel()
	reqFor := func(name string) api.GrantRequest {
		return api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"` + name + `"}`)}
	}
	w := c.Client(c.Leader(), worker)
	a, err := w.Grant(ctx, reqFor("a"))
	if err != nil || a.Decision != grants.ApprovalRequired || a.Caption == "" {
		t.Fatalf("held call a: %+v %v", a, err)
	}
	b, err := w.Grant(ctx, reqFor("b"))
	if err != nil || b.Decision != grants.ApprovalRequired || b.Caption == "" || b.Caption == a.Caption {
		t.Fatalf("held call b: %+v %v", b, err)
	}
	op := c.Client(c.Leader(), "")
	keepOf := func(caption string) string { return caption[:len(caption)-len("_review")] + "_keep" }
	replyA := api.ReviewReplyRequest{Channel: "slack:#ops", Sender: "dana", At: 1001, Text: keepOf(a.Caption)}
	if e, err := op.ReplyReview(ctx, "", replyA); err != nil || e.Kind != events.KindReviewApproved {
		t.Fatalf("reply approving a: %+v %v", e, err)
	}
	sum := sha256.Sum256([]byte("q3 report"))
	opened, err := w.OpenReview(ctx, api.ReviewOpenRequest{Lane: "coordinator", Path: "out/q3.pdf", SHA256: hex.EncodeToString(sum[:]),
		Caption: "q3-report", Transition: "review_ready->send", DestinationClass: "finance"})
	if err != nil || opened.Caption != "q3-report_v1_review" {
		t.Fatalf("artifact review: %+v %v", opened, err)
	}
	states := func(i int) map[string]string {
		t.Helper()
		rs, err := c.Client(i, "").Reviews(ctx, "")
		if err != nil || rs.Error != "" {
			t.Fatalf("reviews on node %d: %+v %v", i, rs, err)
		}
		out := map[string]string{}
		for _, r := range rs.Reviews {
			out[r.Caption] = r.State
		}
		return out
	}
	want := map[string]string{a.Caption: "approved", b.Caption: "open", opened.Caption: "open"}
	check := func(what string, got map[string]string) {
		t.Helper()
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("%s: review %s is %q, want %q (all: %v)", what, k, got[k], v, got)
			}
		}
	}
	c.WaitConverged()

	old := c.Leader()
	c.Kill(old)
	leader := c.Leader()
	if leader == old {
		t.Fatalf("node %d still leads after SIGKILL", old)
	}
	check("after the leader was killed", states(leader))
	op = c.Client(leader, "")
	if e, err := op.ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "slack:#ops", Sender: "dana", At: 1002, Text: "yes " + keepOf(b.Caption)}); err != nil || e.Kind != events.KindReviewApproved {
		t.Fatalf("reply approving b on the new leader: %+v %v", e, err)
	}
	want[b.Caption] = "approved"
	c.Restart(old)
	before := c.WaitConverged()

	c.StopAll()
	c.RestartAll()
	after := c.WaitConverged()
	if after.Seq != before.Seq || after.StateDigest != before.StateDigest {
		t.Fatalf("a full restart moved the state: before seq %d digest %s, after seq %d digest %s", before.Seq, before.StateDigest, after.Seq, after.StateDigest)
	}
	leader = c.Leader()
	check("after a full restart", states(leader))
	op, w = c.Client(leader, ""), c.Client(leader, worker)
	if e, err := op.ReplyReview(ctx, "", replyA); err != nil || e.Kind != events.KindReviewOrphaned || e.Missing != "new reply" {
		t.Fatalf("the reply seen before the restart, again: %+v %v", e, err)
	}
	for _, r := range []struct {
		name string
		held grants.Envelope
	}{{"a", a}, {"b", b}} {
		p, err := w.Grant(ctx, reqFor(r.name))
		if err != nil || p.Decision != grants.Permit || p.ReviewID != r.held.ReviewID {
			t.Fatalf("call %s after the restart: %+v %v", r.name, p, err)
		}
		again, err := w.Grant(ctx, reqFor(r.name))
		if err != nil || again.Decision != grants.ApprovalRequired || again.ReviewID == r.held.ReviewID {
			t.Fatalf("call %s retried after its approval was used: %+v %v", r.name, again, err)
		}
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	n := 0
	for _, e := range evs {
		if e.Kind == events.KindReviewConsumed {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d review_consumed receipts, want 2", n)
	}
}
