package issuer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// approvalPolicy is a version 2 policy whose vault_read calls are a review
// class: every one is held for an operator's approval.
const approvalPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[
  {"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}},
  {"id":"file_read","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}}],
 "review":{"classes":["credential_use"]}}`

// TestApprovalThroughTheAPI: under a policy with a review class a request
// is held (approval_required, naming a review); the operator approves the
// review; the worker's next request for the same call is permitted once
// and spent; the one after is held again; approving the used review is
// refused unknown_review; and an auditor replaying the receipts reaches
// the issuer's state digest.
//
// The node is held at receipt format 3, where approvals work as they did
// before reviews became decision records (TestReviewsThroughTheAPI covers
// level 4).
func TestApprovalThroughTheAPI(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) { c.ReceiptFormat = 3 })
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := client.New(nc, "w1")
	op := client.New(nc, "")

	if env, err := op.SetPolicy(ctx, json.RawMessage(approvalPolicy)); err != nil || env.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", env, err)
	}
	args := json.RawMessage(`{"name":"db-password"}`)
	req := api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: args}
	held, err := w.Grant(ctx, req)
	if err != nil || held.Decision != grants.ApprovalRequired || held.Reason != grants.ReasonReviewRequired || !strings.HasPrefix(held.ReviewID, "rv-") {
		t.Fatalf("first request: %+v %v", held, err)
	}
	if st := env.Service.Status(); st.OpenReviews != 1 || st.Approvals != 0 {
		t.Fatalf("status after the held answer: %d open reviews, %d approvals; want 1, 0", st.OpenReviews, st.Approvals)
	}

	approved, err := op.Approve(ctx, api.ApproveRequest{ReviewID: held.ReviewID, TTLMillis: 60_000, Note: "rotating it"})
	if err != nil || approved.Decision != grants.Permit || approved.Kind != events.KindApproval || approved.ReviewID != held.ReviewID ||
		approved.ExpiresAt == 0 || approved.Detail != "rotating it" {
		t.Fatalf("approve: %+v %v", approved, err)
	}
	if st := env.Service.Status(); st.OpenReviews != 0 || st.Approvals != 1 {
		t.Fatalf("status after the approval: %d open reviews, %d approvals; want 0, 1", st.OpenReviews, st.Approvals)
	}
	// Another call is not covered.
	other, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"other"}`)})
	if err != nil || other.Decision != grants.ApprovalRequired {
		t.Fatalf("another call: %+v %v", other, err)
	}
	permit, err := w.Grant(ctx, req)
	if err != nil || permit.Decision != grants.Permit || permit.ReviewID != held.ReviewID || permit.ExpiresAt > approved.ExpiresAt ||
		permit.Rules[len(permit.Rules)-1] != "approved:"+held.ReviewID {
		t.Fatalf("request after the approval: %+v %v", permit, err)
	}
	spend, err := w.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args})
	if err != nil || spend.Decision != grants.Permit || spend.Kind != events.KindAttempt {
		t.Fatalf("spend: %+v %v", spend, err)
	}
	again, err := w.Grant(ctx, req)
	if err != nil || again.Decision != grants.ApprovalRequired || again.ReviewID == held.ReviewID {
		t.Fatalf("request after the approval was used: %+v %v", again, err)
	}
	used, err := op.Approve(ctx, api.ApproveRequest{ReviewID: held.ReviewID})
	if err != nil || used.Decision != grants.Deny || used.Reason != grants.ReasonUnknownReview {
		t.Fatalf("approving a used review: %+v %v", used, err)
	}
	bad, err := op.Approve(ctx, api.ApproveRequest{ReviewID: "rv-nothex"})
	if err != nil || bad.Reason != grants.ReasonInvalidRequest || bad.Missing != "review_id" {
		t.Fatalf("approving a malformed review id: %+v %v", bad, err)
	}

	// The auditor's replay reaches the issuer's digest.
	v := replayToDigest(ctx, t, nc, env.Service.Status())
	if n := v.Summary().Kinds["approval"]; n != 1 {
		t.Fatalf("the auditor saw %d approval receipts, want 1", n)
	}
}
