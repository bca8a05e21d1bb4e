package fsm_test

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// TestPropGrantSpendIsGrantThenSpend: a grant-and-spend (receipt format
// 11) is a grant request followed by a spend of the grant its answer
// names, in the same entry. Random batches (every op the generator draws)
// have some of their requests turned into grant-and-spends and are applied
// to one state; a second state is fed the same entries with each
// grant-and-spend replaced by its request and, when the request's answer
// is a permit, a spend of that grant by the same caller with the same
// digest, idempotency key, arguments and resolution context (what a
// worker sends), at the same raft index and time. Both states write
// byte-identical receipts, reach the same chain head and Digest, and give
// the same answers; and no grant is ever spent twice.
func TestPropGrantSpendIsGrantThenSpend(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		sep := fsm.New()
		var all []events.Event
		for i, n := 0, drawSteps(t); i < n; i++ {
			b := h.drawBatch()
			if i == 0 && !rare(t, "stayBelow11", 5) {
				b.Commands = append([]fsm.Command{{Op: fsm.OpRaiseFormat, Caller: "issuer:" + b.Node, Format: fsm.ReceiptFormatGrantSpend}}, b.Commands...)
			}
			for k := range b.Commands {
				if b.Commands[k].Op == fsm.OpRequest && rapid.Bool().Draw(t, "combine") {
					b.Commands[k].Op = fsm.OpGrantSpend
				}
			}
			st := h.apply(b)
			all = append(all, st.evs...)

			// The separate form, command by command, at the same raft
			// index and time: consecutive sub-batches of one entry apply
			// as the entry does.
			for k, c := range b.Commands {
				if c.Op != fsm.OpGrantSpend {
					env := fsm.Apply(sep, st.raft, fsm.Batch{Time: b.Time, Node: b.Node, Commands: []fsm.Command{c}})[0]
					if !sameAnswer(env, st.envs[k]) {
						t.Fatalf("batch %d command %d (%v): answers differ:\n combined %+v\n separate %+v", i, k, c.Op, st.envs[k], env)
					}
					continue
				}
				got := st.envs[k]
				if sep.ReceiptFormat() < fsm.ReceiptFormatGrantSpend {
					if got.Reason != grants.ReasonUnknownVersion || got.Seq != 0 {
						t.Fatalf("batch %d command %d: below level 11 a grant-and-spend answered %+v", i, k, got)
					}
					continue
				}
				rc := c
				rc.Op = fsm.OpRequest
				want := fsm.Apply(sep, st.raft, fsm.Batch{Time: b.Time, Node: b.Node, Commands: []fsm.Command{rc}})[0]
				if want.Decision == grants.Permit && want.GrantID != "" {
					sc := fsm.Command{Op: fsm.OpSpend, Caller: c.Caller, GrantID: want.GrantID, Digest: c.Digest,
						IdemKey: c.IdemKey, Args: c.Args, Cwd: c.Cwd, Resolved: c.Resolved}
					permit := want
					want = fsm.Apply(sep, st.raft, fsm.Batch{Time: b.Time, Node: b.Node, Commands: []fsm.Command{sc}})[0]
					if want.Decision == grants.Permit && want.Target == "" {
						want.Target = permit.Target
					}
				}
				if !sameAnswer(got, want) {
					t.Fatalf("batch %d command %d: grant-and-spend answered\n %+v\nrequest then spend\n %+v", i, k, got, want)
				}
			}
			if sep.Chain() != h.live.Chain() || sep.Digest() != h.live.Digest() {
				t.Fatalf("batch %d: chain or digest differs from grant then spend", i)
			}
			if !bytes.Equal(outboxBytes(sep), outboxBytes(h.live)) {
				t.Fatalf("batch %d: receipts differ from grant then spend", i)
			}
		}
		checkSpendInvariants(t, all)
		attempts := map[uint64]int{} // by the permit they spend
		for _, e := range all {
			if e.Kind == events.KindAttempt {
				if attempts[e.RefSeq]++; attempts[e.RefSeq] > 1 {
					t.Fatalf("permit %d spent twice", e.RefSeq)
				}
			}
		}
	})
}

func sameAnswer(a, b grants.Envelope) bool { return equalEnvelope(a, b) }
