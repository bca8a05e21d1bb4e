package audit

import (
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestVerifyGrantSpendEntries: the receipts of grant-and-spends and of
// effect-and-sources (receipt format 11), a permit and its attempt, an
// effect and a source each written in one log entry, verify as the
// receipts of the separate ops do, and the projection reaches the
// issuer's digest.
func TestVerifyGrantSpendEntries(t *testing.T) {
	s := fsm.New()
	d := func(n string) events.Hash { return grants.RequestDigest("Bash", []byte(`{"n":"`+n+`"}`)) }
	var raft uint64
	apply := func(at int64, cs ...fsm.Command) []grants.Envelope {
		raft++
		return fsm.Apply(s, raft, fsm.Batch{Time: at, Node: "n1", Commands: cs})
	}
	apply(t0, fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()},
		fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatGrantSpend})
	gs := func(worker, id, key, n string) fsm.Command {
		return fsm.Command{Op: fsm.OpGrantSpend, Caller: worker, GrantID: id, Lane: "coordinator", Tool: "Bash", Digest: d(n), IdemKey: key}
	}
	// Permitted and spent, two in one entry; a deny; a replay.
	envs := apply(t0+sec, gs("w1", "g1", "k1", "a"), gs("w2", "g2", "k2", "b"), gs("w1", "g3", "k3", ""))
	if envs[0].Kind != events.KindAttempt || envs[1].Kind != events.KindAttempt || envs[2].Kind != events.KindAttempt {
		t.Fatalf("answers %+v", envs)
	}
	if env := apply(t0+sec, fsm.Command{Op: fsm.OpGrantSpend, Caller: "w1", GrantID: "g4", Lane: "nowhere", Tool: "Bash", Digest: d("c"), IdemKey: "k4"})[0]; env.Kind != events.KindDeny {
		t.Fatalf("deny: %+v", env)
	}
	apply(t0+2*sec, gs("w1", "g9", "k1", "a"))
	// A permit minted by a request, its lane revoked, then a
	// grant-and-spend replaying it: refused at the spend.
	apply(t0+2*sec, fsm.Command{Op: fsm.OpRequest, Caller: "w3", GrantID: "g5", Lane: "coordinator", Tool: "Bash", Digest: d("e"), IdemKey: "k5"})
	apply(t0+2*sec, fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w3"})
	if env := apply(t0+3*sec, gs("w3", "g6", "k5", "e"))[0]; env.Kind != events.KindSpendRefused {
		t.Fatalf("spend refusal: %+v", env)
	}
	// Effects with sources, in one entry each (a second report of g2).
	for _, c := range []fsm.Command{
		{Op: fsm.OpEffectSource, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "hook",
			SourceID: "s1", Session: "x", Tool: "Bash", Channel: "tool_result", Scope: "task", ContentDigest: d("out")},
		{Op: fsm.OpEffectSource, Caller: "w2", GrantID: "g2", Outcome: "failed", Verifier: "hook",
			SourceID: "s2", Session: "x", Tool: "Bash", Channel: "tool_result", Scope: "task", ContentDigest: d("out2")},
		{Op: fsm.OpEffectSource, Caller: "w2", GrantID: "g2", Outcome: "confirmed", Verifier: "hook",
			SourceID: "s3", Session: "x", Tool: "Bash", Channel: "tool_result", Scope: "task", ContentDigest: d("out3")},
	} {
		if env := apply(t0+4*sec, c)[0]; env.Source == nil || env.Source.Kind != events.KindSource {
			t.Fatalf("effect and source: %+v", env)
		}
	}
	v := NewVerifier(Options{})
	kinds := map[events.Kind]int{}
	for _, p := range s.Outbox(0, 0) {
		if err := v.Add(p.Data, p.Seq); err != nil {
			t.Fatalf("seq %d: %v", p.Seq, err)
		}
		e, _ := events.Decode(p.Data)
		kinds[e.Kind]++
	}
	if err := v.CheckDigest(s.Digest()); err != nil {
		t.Fatal(err)
	}
	if kinds[events.KindPermit] != 4 || kinds[events.KindAttempt] != 3 || kinds[events.KindSpendRefused] != 1 ||
		kinds[events.KindEffect]+kinds[events.KindEffectRefused] != 3 || kinds[events.KindSource] != 3 {
		t.Fatalf("receipt kinds %v", kinds)
	}
}
