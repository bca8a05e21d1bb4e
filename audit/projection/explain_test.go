package projection

import (
	"strconv"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// TestExplain: each way to name a side effect (grant id, receipt
// sequence, review id) gives the chain that authorized or refused it,
// with the later receipts that would refuse it now, and a sentence.
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
		{arg: "g7", decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true,
			sentence: []string{"after review " + rv6 + " was approved by operator:alice", "confirmed by vault-audit", "nothing recorded since would refuse it now"}},
		{arg: "seq:" + itoa(at["g7"]+1), decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true},
		{arg: "review:" + rv6, decision: events.KindPermit, closure: grants.OutcomeConfirmed, attempt: true, effects: 1, approval: true},
		{arg: itoa(at["g6"]), decision: events.KindApprovalRequired, refused: true,
			sentence: []string{"was held for review " + rv6, "consumed by grant g7"}},
		{arg: fsm.ReviewID("g8"), decision: events.KindApprovalRequired, refused: true,
			sentence: []string{"still waits for a person"}},
	} {
		x, err := d.ExplainArg(c.arg)
		if err != nil {
			t.Fatalf("%s: %v", c.arg, err)
		}
		if x.Decision == nil || x.Decision.Kind != c.decision || x.Closure != c.closure ||
			(x.Attempt != nil) != c.attempt || len(x.Effects) != c.effects || (x.Approval != nil) != c.approval ||
			x.RefusedNow != c.refused {
			t.Errorf("%s: decision %+v closure %q attempt %v effects %d approval %v refused_now %v", c.arg,
				x.Decision, x.Closure, x.Attempt != nil, len(x.Effects), x.Approval != nil, x.RefusedNow)
		}
		if c.laterKind != 0 && (len(x.Later) == 0 || x.Later[0].Kind != c.laterKind) {
			t.Errorf("%s: later %+v, want a %s first", c.arg, x.Later, c.laterKind)
		}
		if x.Epoch == nil || x.Seq != d.Head().Seq {
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
