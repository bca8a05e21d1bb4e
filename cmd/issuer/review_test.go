package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// TestReviewCommandsAgainstIssuer: `issuer review reply` relays a
// person's plain-text reply (text and --json), approving the one live
// review; the same reply again decides nothing (exit 1, orphaned); with
// two live reviews a bare "lgtm" is ambiguous and names both; `issuer
// review reject` decides by keep token; `issuer review list` shows every
// caption and status; usage errors exit 2 and say what to pass.
func TestReviewCommandsAgainstIssuer(t *testing.T) {
	env, nc, ctx := issuerUnder(t, json.RawMessage(reviewPolicy), 30*time.Second)
	w := client.New(nc, "w1")
	grant := func(name string) grants.Envelope {
		t.Helper()
		e, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "vault_read", Args: json.RawMessage(`{"name":"` + name + `"}`)})
		if err != nil || e.Decision != grants.ApprovalRequired {
			t.Fatalf("request: %+v %v", e, err)
		}
		return e
	}
	first := grant("a")
	reply := []string{"review", "reply", "--channel", "slack:#ops", "--sender", "dana", "--at", "2026-12-03T16:20:00Z", "--text", "yes, approve it", "--nats-url", env.URL}
	r := runCLI(t, reply...)
	if r.code != exitOK || !strings.Contains(r.stdout, "review_approved "+first.Caption) {
		t.Fatalf("reply: %s", r)
	}
	r = runCLI(t, append(reply, "--json")...)
	var dup grants.Envelope
	if r.code != exitRefused || json.Unmarshal([]byte(r.stdout), &dup) != nil || dup.Kind != events.KindReviewOrphaned || dup.Missing != "new reply" {
		t.Fatalf("the same reply again: %s", r)
	}

	second, third := grant("b"), grant("c")
	r = runCLI(t, "review", "reply", "--channel", "slack:#ops", "--sender", "dana", "--at", "1", "--text", "lgtm", "--nats-url", env.URL)
	if r.code != exitRefused || !strings.Contains(r.stdout, "ambiguous") || !strings.Contains(r.stdout, second.Caption) || !strings.Contains(r.stdout, third.Caption) {
		t.Fatalf("ambiguous reply: %s", r)
	}
	keep := strings.TrimSuffix(second.Caption, "_review") + "_keep"
	if r := runCLI(t, "review", "reject", keep, "--note", "not this one", "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, "review_rejected") {
		t.Fatalf("reject by keep token: %s", r)
	}
	if r := runCLI(t, "review", "approve", third.Caption, "--ttl", "1m", "--json", "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, `"kind": "review_approved"`) {
		t.Fatalf("approve by caption: %s", r)
	}
	r = runCLI(t, "review", "list", "--nats-url", env.URL)
	for _, want := range []string{first.Caption, second.Caption, third.Caption, "approved", "rejected", "CAPTION"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Fatalf("review list lacks %q: %s", want, r)
		}
	}

	for _, bad := range [][]string{
		{"review", "approve", "not a ref"},
		{"review", "reply", "--channel", "c", "--sender", "s", "--text", "lgtm"},
		{"review", "reply", "--channel", "c", "--sender", "s", "--at", "yesterday", "--text", "lgtm"},
	} {
		if r := runCLI(t, append(bad, "--nats-url", env.URL)...); r.code != exitUsage || r.stderr == "" {
			t.Errorf("%v: want a usage error, got %s", bad, r)
		}
	}
	if r := runCLI(t, "review", "--help"); r.code != exitOK || !strings.Contains(r.stdout, "keep token") {
		t.Errorf("review --help: %s", r)
	}
}
