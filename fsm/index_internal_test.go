package fsm

import (
	"slices"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/policy"
)

// A state that only Evolve has moved (a replay, a restore) has no
// per-worker index; its revocations must cancel exactly what an indexed
// state's do, and the index Apply builds must then be kept up to date
// (grants added, spent, expired, an id reused by another worker).
func TestWorkerIndexIsLazyAndExact(t *testing.T) {
	s := New()
	mustApply(t, s, 1, 1, Command{Op: OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()})
	var cmds []Command
	for i := range 60 {
		cmds = append(cmds, permitCmd([]string{"w1", "w2", "w3"}[i%3], i))
	}
	mustApply(t, s, 2, 2, cmds...)
	mustApply(t, s, 3, 3, Command{Op: OpSpend, Caller: "w1", GrantID: "g0", Digest: cmds[0].Digest, IdemKey: "s0"})
	if s.byWorker == nil {
		t.Fatal("Apply did not index grants by worker")
	}

	// The same stream replayed with Evolve alone, through EvolveRef and
	// an event decoded into reused memory.
	r := New()
	var e events.Event
	for _, p := range s.Outbox(0, 0) {
		if err := events.DecodeInto(p.Data, &e); err != nil {
			t.Fatal(err)
		}
		if err := EvolveRef(r, &e); err != nil {
			t.Fatal(err)
		}
	}
	if r.byWorker != nil {
		t.Fatal("Evolve built the per-worker index")
	}
	if r.Digest() != s.Digest() {
		t.Fatal("replayed digest differs")
	}
	restored, err := Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	later := int64(90 * time.Second) // past some expiries, not retention
	for _, w := range []string{"w1", "w2", "w3", "w9"} {
		want := s.outstanding(w, 3)
		if got := r.outstanding(w, 3); !slices.Equal(got, want) {
			t.Fatalf("%s: replayed state outstanding %v, indexed %v", w, got, want)
		}
		if got := restored.outstanding(w, 3); !slices.Equal(got, want) {
			t.Fatalf("%s: restored state outstanding %v, indexed %v", w, got, want)
		}
		if w == "w1" && (len(want) != 19 || slices.Contains(want, "g0")) {
			t.Fatalf("w1 outstanding %v: want its 19 unspent grants", want)
		}
		if got, want := r.outstanding(w, later), s.outstanding(w, later); !slices.Equal(got, want) {
			t.Fatalf("%s later: %v, indexed %v", w, got, want)
		}
	}

	// A revocation through Apply on the replayed state builds the index
	// and cancels what the original's does.
	rev := Command{Op: OpRevoke, Caller: "operator:root", Key: "worker/w2"}
	mustApply(t, s, 4, 4, rev)
	mustApply(t, r, 4, 4, rev)
	if r.byWorker == nil || r.Digest() != s.Digest() {
		t.Fatal("revocation on the replayed state differs")
	}
	// The index follows grants from then on.
	mustApply(t, r, 5, 5, permitCmd("w3", 100))
	if got := r.byWorker["w3"].len(); got != 21 {
		t.Fatalf("w3 indexed %d grants, want 21", got)
	}
}
