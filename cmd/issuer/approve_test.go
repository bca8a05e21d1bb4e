package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// reviewPolicy holds every vault_read call for an operator's review.
const reviewPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]}}`

// TestApproveAgainstIssuer: `issuer approve` approves the review a held
// request names (exit 0, the approval receipt printed), the worker's next
// request for the same call is permitted, and approving the used review
// again is refused unknown_review (exit 1).
func TestApproveAgainstIssuer(t *testing.T) {
	env, nc, ctx := issuerUnder(t, json.RawMessage(reviewPolicy), 30*time.Second)
	w := client.New(nc, "w1")
	req := api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"db"}`)}
	held, err := w.Grant(ctx, req)
	if err != nil || held.Decision != grants.ApprovalRequired || held.ReviewID == "" {
		t.Fatalf("request: %+v %v", held, err)
	}

	r := runCLI(t, "approve", held.ReviewID, "--ttl", "2m", "--note", "checked with the owner", "--nats-url", env.URL)
	if r.code != exitOK {
		t.Fatalf("approve: %s", r)
	}
	var got grants.Envelope
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("approve printed %q: %v", r.stdout, err)
	}
	// At receipt format 4 the review is a decision record: 'issuer
	// approve' decides it as 'issuer review approve' does.
	if got.Kind != events.KindReviewApproved || got.ReviewID != held.ReviewID || got.Detail != "checked with the owner" || got.ExpiresAt == 0 {
		t.Fatalf("approval envelope %+v", got)
	}
	permit, err := w.Grant(ctx, req)
	if err != nil || permit.Decision != grants.Permit || permit.ReviewID != held.ReviewID || permit.ExpiresAt > got.ExpiresAt {
		t.Fatalf("request after the approval: %+v %v", permit, err)
	}

	r = runCLI(t, "approve", held.ReviewID, "--nats-url", env.URL)
	if r.code != exitRefused || !strings.Contains(r.stderr, "unknown_review") || !strings.Contains(r.stderr, "consumed") {
		t.Fatalf("approving a used review: want exit %d naming unknown_review, got %s", exitRefused, r)
	}
}

// issuerUnder starts a single-node issuer with a clean environment, connects
// to its NATS and applies doc as its policy; ctx bounds the test's calls and
// ends with it.
func issuerUnder(t *testing.T, doc json.RawMessage, limit time.Duration) (*testenv.Single, *nats.Conn, context.Context) {
	t.Helper()
	cleanEnv(t)
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	if e, err := client.New(nc, "").SetPolicy(ctx, doc); err != nil || e.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", e, err)
	}
	return env, nc, ctx
}
