package fsm_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// A break-glass case is one receipt an operator's request writes: only
// from receipt format level 6 (below it the op is refused with no
// receipt), refused when malformed, folded as evidence only, and a state
// holding one survives a snapshot and a replay of its stream.
func TestBreakGlass(t *testing.T) {
	const sec = int64(time.Second)
	glass := fsm.Command{Op: fsm.OpBreakGlass, Caller: "operator", CaseID: "inc-7", GlassScope: "worker:w-coder-2",
		TTL: 30 * 60 * sec, Note: "unknown payee in a payment"}
	at := func(s *fsm.State, idx uint64, now int64, cs ...fsm.Command) []grants.Envelope {
		return fsm.Apply(s, idx, fsm.Batch{Time: now, Node: "n1", Commands: cs})
	}
	setPolicy := []fsm.Batch{{Time: sec, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}}}

	low := applyAt(t, fsm.ReceiptFormatSummaries, setPolicy)
	seq := low.Chain().Seq
	if env := at(low, 2, 12*sec, glass)[0]; env.Decision != grants.Deny || env.Reason != grants.ReasonUnknownVersion || env.Seq != 0 {
		t.Fatalf("break-glass at level 3: %+v", env)
	}
	if low.Chain().Seq != seq {
		t.Fatal("a break-glass case refused at level 3 wrote a receipt")
	}

	s := applyAt(t, fsm.ReceiptFormatBreakGlass, setPolicy)
	seq = s.Chain().Seq
	before := s.Digest()
	for _, bad := range []func(c *fsm.Command){
		func(c *fsm.Command) { c.Caller = "" },
		func(c *fsm.Command) { c.CaseID = "" },
		func(c *fsm.Command) { c.CaseID = "inc 7" },
		func(c *fsm.Command) { c.GlassScope = "lane:isolated" },
		func(c *fsm.Command) { c.GlassScope = "worker:" },
		func(c *fsm.Command) { c.TTL = 0 },
		func(c *fsm.Command) { c.TTL = fsm.MaxBreakGlassTTL + 1 },
		func(c *fsm.Command) { c.Note = "" },
		func(c *fsm.Command) { c.Note = "\xff" },
	} {
		c := glass
		bad(&c)
		if env := at(s, 2, 12*sec, c)[0]; env.Decision != grants.Deny || env.Reason != grants.ReasonInvalidRequest {
			t.Fatalf("malformed case %+v: %+v", c, env)
		}
	}
	if s.Chain().Seq != seq || s.Digest() != before {
		t.Fatal("a malformed case wrote a receipt")
	}

	env := at(s, 3, 12*sec, glass)[0]
	if env.Decision != grants.Permit || env.Seq != seq+1 {
		t.Fatalf("case: %+v", env)
	}
	out := s.Outbox(0, 0)
	e, err := events.Decode(out[len(out)-1].Data)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != events.KindBreakGlass || e.CaseID != "inc-7" || e.GlassScope != "worker:w-coder-2" || e.Worker != "w-coder-2" ||
		e.Actor != "operator" || e.IssuedAt != 12*sec || e.ExpiresAt != 12*sec+30*60*sec || e.Detail != glass.Note {
		t.Fatalf("case event: %+v", e)
	}
	if err := e.StaticValidate(); err != nil {
		t.Fatal(err)
	}
	replayed := fsm.New()
	for _, p := range out {
		ev, err := events.Decode(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := fsm.Evolve(replayed, ev); err != nil {
			t.Fatalf("replaying seq %d: %v", ev.Seq, err)
		}
	}
	if replayed.Digest() != s.Digest() || s.Digest() == before {
		t.Fatalf("replay digest %s, issuer %s", replayed.Digest().Short(), s.Digest().Short())
	}
	snap := s.Snapshot()
	r, err := fsm.Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || r.Digest() != s.Digest() || r.ReceiptFormat() != fsm.ReceiptFormatBreakGlass {
		t.Fatal("a state holding a break-glass case did not survive a snapshot")
	}
}
