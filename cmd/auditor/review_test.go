package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/fsm"
	sim "github.com/writ-dev/writ/internal/testing/receipts"
)

// TestReviewRecords: over a stream with every receipt kind (reviews as
// decision records at the highest receipt format, the approval receipt
// below it), verify reaches the issuer's digest with no violation, tail
// prints each review receipt, and explain shows a review's decision
// record by id, caption or keep token: who decided it, by command or by
// the reply quoted, and the receipt that consumed it.
func TestReviewRecords(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	m, at := sim.EveryKind(t)
	b.publish(m.Raw()...)

	r, rep := verifyJSON(t, url, "--expect-digest", m.S.Digest().String())
	if r.code != ExitOK || !rep.OK {
		t.Fatalf("verify: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, k := range []string{"approval", "review_opened", "review_approved", "review_rejected", "review_consumed",
		"review_orphaned", "review_expired", "review_superseded",
		"route_acquired", "route_renewed", "route_released", "route_lapsed", "route_taken"} {
		if rep.Kinds[k] == 0 {
			t.Errorf("verify counted no %s receipt: %v", k, rep.Kinds)
		}
	}
	r = runCLI(t, "tail", "--nats-url", url)
	if r.code != ExitOK {
		t.Fatalf("tail: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{" review_superseded ", " review_orphaned ", `reply="slack:#finance/dana: q3-report_v2_keep, ship it"`, " review_consumed g7 "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tail lacks %q:\n%s", want, r.stdout)
		}
	}

	db := filepath.Join(t.TempDir(), "p.db")
	if r := runCLI(t, "project", "--db", db, "--nats-url", url); r.code != ExitOK {
		t.Fatalf("project: exit %d: %s", r.code, r.stderr)
	}
	for _, c := range []struct {
		arg  string
		want []string
	}{
		{"g7", []string{"  review     vault-read_v2_review " + fsm.ReviewID("g6") + " consumed", "approved by operator:alice at seq " + itoa(at["g7"]-1),
			", by command", "  consumed   seq " + itoa(at["g7"]+1) + " review_consumed", "(review_consumed seq " + itoa(at["g7"]+1) + ")",
			"after review vault-read_v2_review was approved by operator:alice by command"}},
		{"q3-report_v2_keep", []string{"review q3-report_v2_keep (q3-report_v2_review)", "artifact out/q3-report.pdf v2 sha256 ",
			"transition review_ready->send destination class:finance reviewer role finance",
			`by the reply "q3-report_v2_keep, ship it" from dana on slack:#finance`, "no permit has consumed the approval"}},
		{"review:notes_v1_review", []string{"rejected by operator:alice at seq " + itoa(at["notesrejected"]), `by the reply "no to notes_v1_review, the numbers are wrong"`}},
		{"l2", []string{"approved by operator:bob", "  approval   seq " + itoa(at["l1"]+1) + " approval ", "after review " + fsm.ReviewID("l1") + " was approved by operator:bob"}},
		{itoa(at["orphan"]), []string{"review_orphaned", `records a reply "what is this?" from dana on slack:#finance`, "decided nothing"}},
		// Work under a route lease: the generation bound, how it ended
		// and whether before or after the attempt; a late effect.
		{"rt1", []string{"  route      " + sim.Route + " generation 1 owner cron1 acquired at seq " + itoa(at["route_acquired"]),
			"released at ", "(route_released seq " + itoa(at["route_released"]) + "), ended after attempt", "  closure    confirmed"}},
		{"rt2", []string{"  route      " + sim.Route + " generation 2 owner cron2", "lapsed at ", "(route_lapsed seq " + itoa(at["route_lapsed"]) + ")",
			"  closure    contested", "  late       effect seq " + itoa(at["route_stale"]), "after the route generation it bound had ended (route_stale)"}},
	} {
		r := runCLI(t, "explain", "--db", db, c.arg)
		if r.code != ExitOK {
			t.Fatalf("explain %s: exit %d: %s", c.arg, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("explain %s lacks %q:\n%s", c.arg, w, r.stdout)
			}
		}
	}
	r = runCLI(t, "explain", "--db", db, "--json", "q3-report_v1_keep")
	var x projection.Explanation
	if err := json.Unmarshal([]byte(r.stdout), &x); err != nil || r.code != ExitOK {
		t.Fatalf("explain --json: %v %s %s", err, r.stdout, r.stderr)
	}
	if x.Review == nil || x.Review.Status != projection.ReviewSuperseded || x.Review.Caption != "q3-report_v1_review" || len(x.ReviewSteps) != 1 {
		t.Fatalf("explain q3-report_v1_keep: %+v", x)
	}
}
