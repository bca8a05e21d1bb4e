package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestReviewsAgainstIssuer: a call the policy holds for approval is listed
// by `issuer reviews` (text and JSON) and shown whole by `reviews show`,
// with the rules from its receipt; after `issuer approve` it is listed as
// approved, and once the worker's retry uses the approval it is gone. An
// unknown id is refused (exit 1), a malformed one is a usage error.
func TestReviewsAgainstIssuer(t *testing.T) {
	env, nc, ctx := issuerUnder(t, json.RawMessage(reviewPolicy), 30*time.Second)
	list := func() api.Reviews {
		t.Helper()
		r := runCLI(t, "reviews", "--json", "--nats-url", env.URL)
		var rs api.Reviews
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &rs) != nil {
			t.Fatalf("reviews --json: %s", r)
		}
		return rs
	}
	if rs := list(); len(rs.Reviews) != 0 {
		t.Fatalf("reviews before any held call: %+v", rs)
	}
	if r := runCLI(t, "reviews", "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, "no open reviews") {
		t.Fatalf("reviews, none open: %s", r)
	}

	w := client.New(nc, "w1")
	req := api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"db"}`)}
	held, err := w.Grant(ctx, req)
	if err != nil || held.Decision != grants.ApprovalRequired || held.ReviewID == "" {
		t.Fatalf("request: %+v %v", held, err)
	}
	rs := list()
	if len(rs.Reviews) != 1 {
		t.Fatalf("reviews after a held call: %+v", rs)
	}
	got := rs.Reviews[0]
	if got.ID != held.ReviewID || got.State != "open" || got.Worker != "w1" || got.Lane != "coordinator" || got.Tool != "vault_read" ||
		got.Digest != held.Digest.String() || got.Seq != held.Seq || got.Until <= rs.Clock || got.OpenedAt > rs.Clock {
		t.Fatalf("listed review %+v, held answer %+v", got, held)
	}
	r := runCLI(t, "reviews", "--nats-url", env.URL)
	for _, want := range []string{held.ReviewID, "open", "w1", "coordinator", "vault_read", held.Digest.String()[:12]} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Fatalf("reviews text lacks %q: %s", want, r)
		}
	}
	// Show waits for the receipt to be in the stream, where its rules are.
	testenv.WaitFor(t, 10*time.Second, "reviews show with the receipt's rules", func() bool {
		r = runCLI(t, "reviews", "show", held.ReviewID, "--json", "--nats-url", env.URL)
		var one api.Review
		return r.code == exitOK && json.Unmarshal([]byte(r.stdout), &one) == nil && one.ID == held.ReviewID && len(one.Rules) > 0
	})
	r = runCLI(t, "reviews", "show", held.ReviewID, "--nats-url", env.URL)
	for _, want := range []string{held.ReviewID, "vault_read", "review_required", "rules", "issuer review approve|reject " + held.Caption} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Fatalf("reviews show lacks %q: %s", want, r)
		}
	}

	if r := runCLI(t, "approve", held.ReviewID, "--nats-url", env.URL); r.code != exitOK {
		t.Fatalf("approve: %s", r)
	}
	if rs := list(); len(rs.Reviews) != 1 || rs.Reviews[0].State != "approved" || rs.Reviews[0].ID != held.ReviewID || rs.Reviews[0].ApprovalExpires <= rs.Clock {
		t.Fatalf("reviews after approve: %+v", rs)
	}
	if permit, err := w.Grant(ctx, req); err != nil || permit.Decision != grants.Permit {
		t.Fatalf("retry after approve: %+v %v", permit, err)
	}
	// A decision record stays listed as history once used.
	if rs := list(); len(rs.Reviews) != 1 || rs.Reviews[0].State != "consumed" {
		t.Fatalf("reviews after the approval was used: %+v", rs)
	}
	if r := runCLI(t, "review", "show", held.Caption, "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, "consumed") {
		t.Fatalf("show of a used review by caption: %s", r)
	}
	if r := runCLI(t, "reviews", "show", "rv-00000000000000000000", "--nats-url", env.URL); r.code != exitRefused || !strings.Contains(r.stderr, "no open or approved review") {
		t.Fatalf("show of an unknown review: %s", r)
	}
	if r := runCLI(t, "reviews", "show", "rv-nope", "--nats-url", env.URL); r.code != exitUsage {
		t.Fatalf("show of a malformed id: %s", r)
	}
}
