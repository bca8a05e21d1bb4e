package fsm_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// A refusal summary is one receipt counting a worker's requests that
// admission control refused without deciding: written only from receipt
// format level 3, refused (with no receipt) when malformed, folded as
// evidence only, and a state holding one survives a snapshot and a replay
// of its stream.
func TestRefusalSummary(t *testing.T) {
	const sec = int64(time.Second)
	summary := fsm.Command{Op: fsm.OpRefusalSummary, Caller: "issuer:n1", Key: "w-flood", Tool: "spend",
		Amount: 1900, Since: 10 * sec, Until: 11 * sec}
	at := func(s *fsm.State, idx uint64, now int64, cs ...fsm.Command) []grants.Envelope {
		return fsm.Apply(s, idx, fsm.Batch{Time: now, Node: "n1", Commands: cs})
	}

	// Below level 3 the op is refused and records nothing.
	low := applyAt(t, fsm.ReceiptFormatFacts, []fsm.Batch{{Time: sec, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}}})
	seq := low.Chain().Seq
	if env := at(low, 2, 12*sec, summary)[0]; env.Decision != grants.Deny || env.Reason != grants.ReasonUnknownVersion || env.Seq != 0 {
		t.Fatalf("summary at level 2: %+v", env)
	}
	if low.Chain().Seq != seq {
		t.Fatal("a summary refused at level 2 wrote a receipt")
	}

	s := applyAt(t, fsm.ReceiptFormatSummaries, []fsm.Batch{{Time: sec, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()}}}})
	seq = s.Chain().Seq
	before := s.Digest()
	for _, bad := range []func(c *fsm.Command){
		func(c *fsm.Command) { c.Key = "" },
		func(c *fsm.Command) { c.Amount = 0 },
		func(c *fsm.Command) { c.Until = c.Since - 1 },
	} {
		c := summary
		bad(&c)
		if env := at(s, 2, 12*sec, c)[0]; env.Decision != grants.Deny || env.Reason != grants.ReasonInvalidRequest {
			t.Fatalf("malformed summary %+v: %+v", c, env)
		}
	}
	if s.Chain().Seq != seq {
		t.Fatal("a malformed summary wrote a receipt")
	}

	env := at(s, 3, 12*sec, summary)[0]
	if env.Decision != grants.Deny || env.Reason != grants.ReasonRateLimited || env.Recovery != grants.RecoverRetryLater || env.Seq != seq+1 {
		t.Fatalf("summary: %+v", env)
	}
	out := s.Outbox(0, 0)
	e, err := events.Decode(out[len(out)-1].Data)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != events.KindRefusalSummary || e.Worker != "w-flood" || e.Tool != "spend" || e.Amount != 1900 ||
		e.IssuedAt != 10*sec || e.ExpiresAt != 11*sec || e.Actor != "issuer:n1" || e.Time != 12*sec ||
		e.Reason != string(grants.ReasonRateLimited) || !strings.Contains(e.Detail, "1900 spend requests") {
		t.Fatalf("summary event: %+v", e)
	}
	if err := e.StaticValidate(); err != nil {
		t.Fatal(err)
	}

	// Evidence only: the authority digest moves with the chain alone, and a
	// replay of the stream reaches the same digest.
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
		t.Fatalf("replay digest %s, issuer %s (before the summary %s)", replayed.Digest().Short(), s.Digest().Short(), before.Short())
	}

	snap := s.Snapshot()
	r, err := fsm.Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Snapshot(), snap) || r.Digest() != s.Digest() || r.ReceiptFormat() != fsm.ReceiptFormatSummaries {
		t.Fatal("a state holding a refusal summary did not survive a snapshot")
	}
	// Restored, it decides the next summary as the original does.
	a := at(s, 4, 13*sec, summary)[0]
	b := at(r, 4, 13*sec, summary)[0]
	if a.Seq != b.Seq || s.Chain().Head != r.Chain().Head {
		t.Fatalf("original and restored states diverged: %+v / %+v", a, b)
	}
}
