package fsm

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

func mustApply(t *testing.T, s *State, idx uint64, at int64, cmds ...Command) []grants.Envelope {
	t.Helper()
	envs := Apply(s, idx, Batch{Time: at, Node: "n1", Commands: cmds})
	for i, e := range envs {
		if e.Decision != grants.Permit {
			t.Fatalf("command %d answered %+v", i, e)
		}
	}
	return envs
}

func permitCmd(worker string, i int) Command {
	n := strconv.Itoa(i)
	return Command{Op: OpRequest, Caller: worker, Lane: "coordinator", Tool: "Bash", GrantID: "g" + n,
		IdemKey: "k" + n, Digest: grants.RequestDigest("Bash", []byte(`{"n":`+n+`}`)), Sources: []string{"web"}}
}

// Grants with the same bindings share one copy of their counters, sources
// and rules, and none of them aliases what the caller passed in.
func TestGrantsShareBindings(t *testing.T) {
	s := New()
	mustApply(t, s, 1, 1, Command{Op: OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()})
	c1, c2 := permitCmd("w1", 1), permitCmd("w1", 2)
	mustApply(t, s, 2, 2, c1, c2)
	g1, g2 := s.grants["g1"], s.grants["g2"]
	if len(g1.Counters) != 3 || &g1.Counters[0] != &g2.Counters[0] || &g1.Sources[0] != &g2.Sources[0] || &g1.Rules[0] != &g2.Rules[0] {
		t.Fatalf("bindings not shared: %p %p, %p %p, %p %p", g1.Counters, g2.Counters, g1.Sources, g2.Sources, g1.Rules, g2.Rules)
	}
	if &g1.Sources[0] == &c1.Sources[0] || &g2.Sources[0] == &c2.Sources[0] {
		t.Fatal("a grant aliases its command's sources")
	}
	// A revocation moves a counter: later grants bind the new value, the
	// earlier ones keep theirs.
	mustApply(t, s, 3, 3, Command{Op: OpRevoke, Caller: "operator:root", Key: "source/web"})
	mustApply(t, s, 4, 4, permitCmd("w1", 3))
	g3 := s.grants["g3"]
	if &g3.Counters[0] == &g1.Counters[0] || g3.Counters[1].Value != 1 || g1.Counters[1].Value != 0 {
		t.Fatalf("counters after the revocation: %v, %v", g1.Counters, g3.Counters)
	}
}

// Replay with events.DecodeInto reuses one event's backing arrays for the
// next; the grants folded from earlier events must not change.
func TestEvolveDoesNotAliasDecodedEvents(t *testing.T) {
	live := New()
	mustApply(t, live, 1, 1, Command{Op: OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()})
	c1, c2 := permitCmd("w1", 1), permitCmd("w2", 2)
	c2.Sources = []string{"other"}
	mustApply(t, live, 2, 2, c1)
	mustApply(t, live, 3, 3, c2)
	s := New()
	var e events.Event
	for _, p := range live.Outbox(0, 0) {
		if err := events.DecodeInto(p.Data, &e); err != nil {
			t.Fatal(err)
		}
		if err := Evolve(s, e); err != nil {
			t.Fatal(err)
		}
	}
	g1 := s.grants["g1"]
	if !slices.Equal(g1.Sources, []string{"web"}) || g1.Counters[1].Key != "source/web" || g1.Counters[2].Key != "worker/w1" {
		t.Fatalf("grant g1 changed under a later decode: %+v", g1)
	}
	if s.Digest() != live.Digest() {
		t.Fatal("replayed digest differs")
	}
}

// Once most entries have expired, the maps, the per-worker index and the
// expiry heap are rebuilt at the size of what is left, and the state is
// the same state.
func TestExpiredMemoryIsReleased(t *testing.T) {
	s := New()
	mustApply(t, s, 1, 1, Command{Op: OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()})
	const n = 4 * shrinkFloor
	idx := uint64(2)
	var cmds []Command
	for i := 0; i < n; i++ {
		cmds = append(cmds, permitCmd("w1", i))
		if len(cmds) == 256 {
			mustApply(t, s, idx, 2, cmds...)
			idx, cmds = idx+1, nil
		}
	}
	// Ten more, a minute later: they outlive the others.
	later := 2 + int64(time.Minute)
	for i := n; i < n+10; i++ {
		cmds = append(cmds, permitCmd("w1", i))
	}
	mustApply(t, s, idx, later, cmds...)
	idx++
	if len(s.grants) != n+10 || s.byWorker["w1"].len() != n+10 || s.scheduled() != n+10 {
		t.Fatalf("%d grants, %d indexed, %d scheduled", len(s.grants), s.byWorker["w1"].len(), s.scheduled())
	}
	// Past the first grants' retention, not the last ten's.
	at := RetainUntil(s.grants["g0"].ExpiresAt)
	mustApply(t, s, idx, at, Command{Op: OpRevoke, Caller: "operator:root", Key: "lane/other"})
	if len(s.grants) != 10 || len(s.idem) != 10 {
		t.Fatalf("%d grants and %d records left, want 10", len(s.grants), len(s.idem))
	}
	if s.peaks.grants != 10 || s.peaks.idem != 10 || s.byWorker["w1"].peak >= shrinkFloor {
		t.Fatalf("maps not rebuilt: peaks %+v, w1 index peak %d", s.peaks, s.byWorker["w1"].peak)
	}
	if cap(s.expiry) > 2*shrinkFloor || cap(s.expiryRun.items) > 2*shrinkFloor {
		t.Fatalf("expiry heap and run keep %d and %d slots for %d items", cap(s.expiry), cap(s.expiryRun.items), s.scheduled())
	}
	if got := s.outstanding("w1", later); len(got) != 10 {
		t.Fatalf("outstanding after the rebuild: %v", got)
	}
	r, err := Restore(s.Snapshot())
	if err != nil || !bytes.Equal(r.Snapshot(), s.Snapshot()) {
		t.Fatalf("restore after the rebuild: %v", err)
	}
	if rm, left := ExpiryRemovals(s); len(rm) != 20 || len(left) != 0 {
		t.Fatalf("scheduled removals %v, unscheduled %v", rm, left)
	}
}

// A grant and its request's idempotency record share one expiry item;
// refusals' records have their own.
func TestOneExpiryItemPerGrant(t *testing.T) {
	s := New()
	mustApply(t, s, 1, 1, Command{Op: OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()})
	mustApply(t, s, 2, 2, permitCmd("w1", 1), permitCmd("w1", 2))
	deny := permitCmd("w1", 3)
	deny.Lane = "no-such-lane"
	Apply(s, 3, Batch{Time: 3, Commands: []Command{deny}})
	if len(s.grants) != 2 || len(s.idem) != 3 || s.scheduled() != 3 {
		t.Fatalf("%d grants, %d records, %d expiry items (want 2, 3, 3)", len(s.grants), len(s.idem), s.scheduled())
	}
	r, err := Restore(s.Snapshot())
	if err != nil || r.scheduled() != 3 {
		t.Fatalf("restored: %v, %d expiry items", err, r.scheduled())
	}
}
