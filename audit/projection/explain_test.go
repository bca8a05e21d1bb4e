package projection

import (
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/receipts"
)

// TestExplain: each way to name a side effect (grant id, receipt
// sequence, review id, caption or keep token) gives the chain that
// authorized or refused it, with the later receipts that would refuse it
// now, and a sentence; a review's decision record says who decided it and
// how (by command, or by a reply quoted verbatim) and the receipt that
// consumed it; an orphaned reply is explained as evidence.
func TestExplain(t *testing.T) {
	m, at := everyKind(t)
	d := openTemp(t, "p.db", 4)
	applyAll(t, d, m.Raw())
	rv6 := fsm.ReviewID("g6")
	for _, c := range []struct {
		arg       string
		decision  events.Kind
		closure   string
		attempt   bool
		effects   int
		approval  bool
		consumed  bool
		steps     int // the review's other receipts shown
		refused   bool
		sentence  []string
		laterKind events.Kind
	}{
		{arg: "g1", decision: events.KindPermit, closure: grants.OutcomeContested, attempt: true, effects: 2,
			sentence: []string{"Grant g1 (worker w1, lane isolated, tool Read) was permitted at seq", "under policy epoch 1", "contested (verifiers v1, v3 disagree"},
			refused:  true, laterKind: events.KindEpoch},
		{arg: "grant:g3", decision: events.KindPermit, closure: ClosureUnverified, attempt: true,
			sentence: []string{"no verifier has reported its effect (unverified)"}, refused: true},
		{arg: "g4", decision: events.KindPermit, closure: ClosureCancelled, refused: true, laterKind: events.KindRevoke,
			sentence: []string{"cancelled by the revoke at seq"}},
		{arg: "g7", decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true, consumed: true,
			sentence: []string{"after review vault-read_v2_review was approved by operator:alice by command at seq " + itoa(at["g7"]-1) + " (consumed, seq " + itoa(at["g7"]+1) + ")",
				"confirmed by vault-audit", "nothing recorded since would refuse it now"}},
		{arg: "seq:" + itoa(at["g7"]+2), decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true, consumed: true},
		{arg: "review:" + rv6, decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true, consumed: true, steps: 1},
		{arg: "vault-read_v2_keep", decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true, consumed: true, steps: 1,
			sentence: []string{"after review vault-read_v2_review"}},
		{arg: "seq:" + itoa(at["g7"]+1), decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true, consumed: true, steps: 1},
		{arg: itoa(at["g6"]), decision: events.KindApprovalRequired, refused: true,
			sentence: []string{"was held for review " + rv6, "approved by operator:alice by command", "consumed by grant g7", "review_consumed at seq " + itoa(at["g7"]+1)}},
		{arg: fsm.ReviewID("g8"), decision: events.KindApprovalRequired, refused: true,
			sentence: []string{"vault-read_v3_review (" + fsm.ReviewID("g8") + ")", "still waits for a person"}},
		// Level 3: the approval receipt, no review_consumed.
		{arg: "l2", decision: events.KindPermit, closure: ClosurePermitted, approval: true,
			sentence: []string{"after review " + fsm.ReviewID("l1") + " was approved by operator:bob by command at seq " + itoa(at["l1"]+1)}},
		// Artifact reviews: opened, superseded, decided by replies.
		{arg: "q3-report_v2_keep", decision: events.KindReviewOpened, approval: true,
			sentence: []string{"Review q3-report_v2_review", "opened by worker w7", "artifact out/q3-report.pdf version 2", "review_ready->send toward class:finance", "a reviewer of role finance to decide",
				`approved by operator:alice by the reply "q3-report_v2_keep, ship it" from dana on slack:#finance at seq ` + itoa(at["q3v2approved"]), "no permit has consumed"}},
		{arg: "review:q3-report_v1_review", decision: events.KindReviewOpened, refused: true, steps: 1,
			sentence: []string{"superseded it at seq " + itoa(at["q3v2"]+1) + " before anyone decided it"}},
		{arg: itoa(at["notesrejected"]), decision: events.KindReviewOpened, refused: true, steps: 1,
			sentence: []string{`rejected by operator:alice by the reply "no to notes_v1_review, the numbers are wrong" from dana on slack:#finance`, "authorizes nothing"}},
		{arg: fsm.ReviewID("x1"), decision: events.KindApprovalRequired, approval: true, refused: true, steps: 1,
			sentence: []string{"the approval lapsed unused (review_expired at seq " + itoa(at["x2"])}},
		// An orphaned reply: evidence, bound to nothing.
		{arg: itoa(at["orphan"]), refused: false,
			sentence: []string{`records a reply "what is this?" from dana on slack:#finance relayed by operator:alice that bound to no review (missing decision word)`, "decided nothing"}},
	} {
		x, err := d.ExplainArg(c.arg)
		if err != nil {
			t.Fatalf("%s: %v", c.arg, err)
		}
		if (x.Decision == nil) != (c.decision == 0) || x.Decision != nil && x.Decision.Kind != c.decision || x.Closure != c.closure ||
			(x.Attempt != nil) != c.attempt || len(x.Effects) != c.effects || (x.Approval != nil) != c.approval ||
			(x.Consumed != nil) != c.consumed || len(x.ReviewSteps) != c.steps || x.RefusedNow != c.refused {
			t.Errorf("%s: decision %+v closure %q attempt %v effects %d approval %v consumed %v steps %d refused_now %v", c.arg,
				x.Decision, x.Closure, x.Attempt != nil, len(x.Effects), x.Approval != nil, x.Consumed != nil, len(x.ReviewSteps), x.RefusedNow)
		}
		if x.Consumed != nil && (x.Consumed.Kind != events.KindReviewConsumed || x.Consumed.Fields["ref_seq"] != itoa(x.Grant.PermitSeq)) {
			t.Errorf("%s: consumed %+v", c.arg, x.Consumed)
		}
		if c.laterKind != 0 && (len(x.Later) == 0 || x.Later[0].Kind != c.laterKind) {
			t.Errorf("%s: later %+v, want a %s first", c.arg, x.Later, c.laterKind)
		}
		if x.Epoch == nil && c.decision != 0 || x.Seq != d.Head().Seq {
			t.Errorf("%s: epoch %+v, seq %d", c.arg, x.Epoch, x.Seq)
		}
		for _, s := range c.sentence {
			if !strings.Contains(x.Sentence, s) {
				t.Errorf("%s: sentence %q lacks %q", c.arg, x.Sentence, s)
			}
		}
	}
	if _, err := d.ExplainArg("nope"); err == nil || !strings.Contains(err.Error(), "neither a grant nor a review") {
		t.Errorf("unknown id: %v", err)
	}
}

func TestParseGround(t *testing.T) {
	g := ParseGround("field=/to source=s1 authority=evidence counter=source/s1=0 transform=raw extra")
	if g.Field != "/to" || g.Source != "s1" || g.Authority != "evidence" || g.Counter != "source/s1=0" || g.Transform != "raw" {
		t.Fatalf("%+v", g)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestExplainRoute: a grant bound to a route names the route and the
// generation it bound, how that generation ended and whether before or
// after the attempt; a late effect under an ended generation is
// contested, never clean.
func TestExplainRoute(t *testing.T) {
	m, at := everyKind(t)
	d := openTemp(t, "p.db", 4)
	applyAll(t, d, m.Raw())
	for _, c := range []struct {
		grant, relation, ended string
		gen                    uint64
		endKind                events.Kind
		endSeq                 uint64
		closure                string
		sentence               []string
	}{
		{grant: "rt1", gen: 1, relation: RouteEndedAfter, ended: LeaseReleased, endKind: events.KindRouteReleased, endSeq: at["route_released"],
			closure: grants.OutcomeConfirmed,
			sentence: []string{"under generation 1 of route inbox-triage@acme (cron1's lease)", "confirmed by hook",
				"generation 1 of route inbox-triage@acme released at", "(route_released, seq " + itoa(at["route_released"]) + "), after the attempt at seq",
				"the route_released at seq " + itoa(at["route_released"]) + ", after the attempt, would refuse it now"}},
		{grant: "rt2", gen: 2, relation: RouteEndedAfter, ended: LeaseLapsed, endKind: events.KindRouteLapsed, endSeq: at["route_lapsed"],
			closure: grants.OutcomeContested,
			sentence: []string{"under generation 2 of route inbox-triage@acme (cron2's lease)",
				"reported at seq " + itoa(at["route_stale"]) + " after the route generation it bound had ended (route_stale)",
				"generation 2 of route inbox-triage@acme lapsed at", "(route_lapsed, seq " + itoa(at["route_lapsed"]) + "), after the attempt"}},
	} {
		x, err := d.ExplainArg(c.grant)
		if err != nil {
			t.Fatal(err)
		}
		rb := x.Route
		if rb == nil || rb.Route != receipts.Route || rb.Gen != c.gen || rb.Relation != c.relation || rb.Ended != c.ended ||
			rb.EndKind != c.endKind || rb.EndSeq != c.endSeq || rb.Lease == nil || x.Closure != c.closure || !x.RefusedNow {
			t.Errorf("%s: route %+v closure %s refused_now %v", c.grant, rb, x.Closure, x.RefusedNow)
		}
		for _, s := range c.sentence {
			if !strings.Contains(x.Sentence, s) {
				t.Errorf("%s: sentence %q lacks %q", c.grant, x.Sentence, s)
			}
		}
	}
	// No route on other grants.
	if x, _ := d.ExplainArg("g7"); x.Route != nil || strings.Contains(x.Sentence, "route") {
		t.Errorf("g7: route %+v, sentence %q", x.Route, x.Sentence)
	}
}

// TestRouteBindingRelation: the generation's end against the attempt,
// by sequence for a release or revocation and by time for a lapse (a
// lease lapses at its expiry, whenever a receipt records it).
func TestRouteBindingRelation(t *testing.T) {
	for _, c := range []struct {
		name  string
		lease Lease
		g     Grant
		now   int64
		want  string
	}{
		{"live", Lease{Gen: 1, Expires: 100}, Grant{AttemptSeq: 5, AttemptTime: 50}, 60, RouteLive},
		{"released after", Lease{Gen: 1, Expires: 100, End: LeaseReleased, EndSeq: 7, EndedAt: 70}, Grant{AttemptSeq: 5, AttemptTime: 50}, 80, RouteEndedAfter},
		{"revoked before", Lease{Gen: 1, Expires: 100, End: LeaseRevoked, EndSeq: 4, EndedAt: 40}, Grant{AttemptSeq: 5, AttemptTime: 50}, 80, RouteEndedBefore},
		{"lapse recorded late, expiry before the attempt", Lease{Gen: 1, Expires: 45, End: LeaseLapsed, EndSeq: 9, EndedAt: 45}, Grant{AttemptSeq: 5, AttemptTime: 50}, 80, RouteEndedBefore},
		{"lapse with no receipt", Lease{Gen: 1, Expires: 60}, Grant{AttemptSeq: 5, AttemptTime: 50}, 80, RouteEndedAfter},
		{"never spent", Lease{Gen: 1, Expires: 60}, Grant{}, 80, RouteEndedUnspent},
	} {
		d := openTemp(t, c.name+".db", 4)
		c.g.Route, c.g.RouteGen = "r", 1
		var rb *RouteBinding
		err := d.db.Update(func(tx *bbolt.Tx) error {
			if err := putJSON(tx.Bucket(bRoutes), []byte("r"), &Route{Name: "r", Leases: []Lease{c.lease}}); err != nil {
				return err
			}
			rb = routeBinding(tx, &c.g, c.now)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if rb.Relation != c.want {
			t.Errorf("%s: %+v, want %s", c.name, rb, c.want)
		}
	}
}
