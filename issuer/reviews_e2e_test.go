package issuer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/raftnode"
)

// TestReviewsThroughTheAPI, at receipt format level 4 with NATS
// authorization: a held call names its caption; a worker can publish
// neither on a reviewer's subjects nor decide through its own; a reviewer
// identity the issuer does not know is refused; a configured reviewer's
// plain-text reply with the keep token approves the review, which the
// worker's retry uses once; an artifact review opened by the coordinator
// worker is decided only by a reviewer holding its role; the listing shows
// each review's caption and status; and an auditor replaying the receipts
// reaches the issuer's digest.
func TestReviewsThroughTheAPI(t *testing.T) {
	users := []natsbus.User{
		natsbus.WorkerUser("w1", "pw1"),
		natsbus.OperatorUser("ops", "pw-ops"),
		natsbus.ReviewerUser("dana", "pw-dana"),
		natsbus.ReviewerUser("erin", "pw-erin"),
		natsbus.ReviewerUser("mallory", "pw-mallory"),
	}
	env := testenv.StartSingleAuth(t, t.TempDir(), users, func(_ *raftnode.Config, c *issuer.Config) {
		c.Reviewers = map[string][]string{"dana": {"finance"}, "erin": {"legal"}}
	})
	conn := func(name, pw string) *nats.Conn {
		nc, err := nats.Connect(env.URL, natsbus.ClientOptions(name, pw)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitFor(t, 10*time.Second, "receipt format 4 or above", func() bool { return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatReviews })
	w := client.New(conn("w1", "pw1"), "w1")
	op := client.New(conn("ops", "pw-ops"), "")
	dana := client.New(conn("dana", "pw-dana"), "")
	erin := client.New(conn("erin", "pw-erin"), "")
	mallory := client.New(conn("mallory", "pw-mallory"), "")

	if e, err := op.SetPolicy(ctx, json.RawMessage(approvalPolicy)); err != nil || e.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", e, err)
	}
	req := api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"db-password"}`)}
	held, err := w.Grant(ctx, req)
	if err != nil || held.Decision != grants.ApprovalRequired || held.Caption != "vault-read_v1_review" {
		t.Fatalf("held call: %+v %v", held, err)
	}
	// The worker's NATS user may not publish on a reviewer's subject...
	short, stop := context.WithTimeout(ctx, 3*time.Second)
	if e, err := client.New(w.NC, "").ReplyReview(short, "w1", api.ReviewReplyRequest{Channel: "c", Sender: "s", Text: "vault-read_v1_keep"}); err == nil {
		t.Fatalf("a worker published on writ.review.w1.reply: %+v", e)
	}
	stop()
	// ...and a reviewer the issuer does not know decides nothing.
	if e, err := mallory.ReplyReview(ctx, "mallory", api.ReviewReplyRequest{Channel: "c", Sender: "mallory", At: 1, Text: "vault-read_v1_keep"}); err != nil || e.Reason != grants.ReasonUnauthorized {
		t.Fatalf("unknown reviewer: %+v %v", e, err)
	}
	// A configured reviewer's plain-text reply with the keep token.
	ok, err := dana.ReplyReview(ctx, "dana", api.ReviewReplyRequest{Channel: "slack:#ops", Sender: "dana", At: 42, Text: "vault-read_v1_keep"})
	if err != nil || ok.Decision != grants.Permit || ok.Kind != events.KindReviewApproved || ok.ReviewID != held.ReviewID {
		t.Fatalf("reply: %+v %v", ok, err)
	}
	// The same reply again is evidence only.
	dup, err := dana.ReplyReview(ctx, "dana", api.ReviewReplyRequest{Channel: "slack:#ops", Sender: "dana", At: 42, Text: "vault-read_v1_keep"})
	if err != nil || dup.Kind != events.KindReviewOrphaned {
		t.Fatalf("duplicate reply: %+v %v", dup, err)
	}
	permit, err := w.Grant(ctx, req)
	if err != nil || permit.Decision != grants.Permit || permit.ReviewID != held.ReviewID {
		t.Fatalf("retry after the reply: %+v %v", permit, err)
	}
	again, err := w.Grant(ctx, req)
	if err != nil || again.Decision != grants.ApprovalRequired || again.Caption != "vault-read_v2_review" {
		t.Fatalf("second retry: %+v %v", again, err)
	}

	// An artifact review, opened by the coordinator worker for finance.
	sum := sha256.Sum256([]byte("q3 report"))
	opened, err := w.OpenReview(ctx, api.ReviewOpenRequest{Lane: "coordinator", Path: "out/q3.pdf", SHA256: hex.EncodeToString(sum[:]),
		Caption: "q3-report", Transition: "review_ready->send", DestinationClass: "finance", ReviewerRole: "finance"})
	if err != nil || opened.Decision != grants.Permit || opened.Caption != "q3-report_v1_review" {
		t.Fatalf("open review: %+v %v", opened, err)
	}
	if e, err := erin.DecideReview(ctx, "erin", api.ReviewDecideRequest{Review: "q3-report_v1_review", Decision: "approve"}); err != nil || e.Reason != grants.ReasonUnauthorized {
		t.Fatalf("erin (legal) approving a finance review: %+v %v", e, err)
	}
	if e, err := dana.DecideReview(ctx, "dana", api.ReviewDecideRequest{Review: "q3-report_v1_keep", Decision: "approve", Note: "figures match"}); err != nil || e.Kind != events.KindReviewApproved {
		t.Fatalf("dana approving: %+v %v", e, err)
	}
	// The operator rejects the second held call by caption.
	if e, err := op.DecideReview(ctx, "", api.ReviewDecideRequest{Review: "vault-read_v2_review", Decision: "reject"}); err != nil || e.Kind != events.KindReviewRejected {
		t.Fatalf("operator rejecting: %+v %v", e, err)
	}

	list, err := op.Reviews(ctx, "")
	if err != nil || list.Error != "" {
		t.Fatalf("reviews: %+v %v", list, err)
	}
	states := map[string]string{}
	for _, r := range list.Reviews {
		states[r.Caption] = r.State
	}
	want := map[string]string{"vault-read_v1_review": "consumed", "vault-read_v2_review": "rejected", "q3-report_v1_review": "approved"}
	for c, s := range want {
		if states[c] != s {
			t.Errorf("review %s is %q, want %q (all: %v)", c, states[c], s, states)
		}
	}
	one, err := op.Reviews(ctx, "q3-report_v1_keep")
	if err != nil || len(one.Reviews) != 1 || one.Reviews[0].ArtifactSHA256 != hex.EncodeToString(sum[:]) || one.Reviews[0].DecidedBy != "reviewer:dana" {
		t.Fatalf("show by keep token: %+v %v", one, err)
	}

	v := replayToDigest(ctx, t, conn("issuer", "issuer-secret"), env.Service.Status())
	for kind, n := range map[string]uint64{"review_approved": 2, "review_consumed": 1, "review_orphaned": 1, "review_opened": 1, "review_rejected": 1} {
		if got := v.Summary().Kinds[kind]; got != n {
			t.Errorf("the auditor saw %d %s receipts, want %d", got, kind, n)
		}
	}
}
