package fsm_test

import (
	"bytes"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// TestPropRouteGenerationsNeverReused: at receipt format level 7, route
// records are forgotten once free for fsm.RouteRetention, and routes are
// acquired again, renewed, released, lapse and are taken over, with the
// state sometimes replaced by Restore(Snapshot()) of itself. Invariants:
//   - every acquisition of a name (route_acquired, route_taken) names a
//     generation above every generation that name ever had, forgotten or
//     not: strictly increasing, never reused;
//   - a forgotten record's generation is at most the high-water mark, and
//     a name with no record is acquired at the mark plus one;
//   - the snapshot round trip keeps the mark (same bytes, same digest);
//   - folding every receipt with Evolve from fsm.New() gives the live
//     digest (the auditor forgets and re-creates the same records).
func TestPropRouteGenerationsNeverReused(t *testing.T) {
	pol := scriptPolicy("routes.yaml")
	names := []string{"job-a", "job-b", "job-c"}
	steps := []time.Duration{0, time.Second, 5 * time.Second, 11 * time.Second, fsm.RouteRetention / 2, fsm.RouteRetention + time.Second}
	forgotten, reacquired := 0, 0 // over every run: the test exercised what it claims
	rapid.Check(t, func(t *rapid.T) {
		s := fsm.New()
		var raft uint64
		now := int64(1_000 * time.Second)
		var receipts []events.Event
		apply := func(cs ...fsm.Command) []events.Event {
			raft++
			before := s.Chain().Seq
			fsm.Apply(s, raft, fsm.Batch{Time: now, Node: "n1", Commands: cs})
			var out []events.Event
			for _, p := range s.Outbox(before, 0) {
				e, err := events.Decode(p.Data)
				if err != nil {
					t.Fatalf("seq %d does not decode: %v", p.Seq, err)
				}
				out = append(out, e)
			}
			receipts = append(receipts, out...)
			return out
		}
		apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: pol},
			fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatRouteRetention})
		if !s.WritesRouteRetention() {
			t.Fatal("the state did not reach format level 7")
		}
		highest := map[string]uint64{} // every generation a name ever had
		gone := map[string]bool{}
		for i, n := 0, rapid.IntRange(1, 60).Draw(t, "ops"); i < n; i++ {
			now += int64(rapid.SampledFrom(steps).Draw(t, "dt"))
			name := rapid.SampledFrom(names).Draw(t, "route")
			worker := rapid.SampledFrom([]string{"w1", "w2"}).Draw(t, "worker")
			var c fsm.Command
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0, 1:
				c = fsm.Command{Op: fsm.OpRouteAcquire, Caller: worker, Route: name, Lane: "coordinator", TTL: int64(10 * time.Second)}
			case 2:
				c = fsm.Command{Op: fsm.OpRouteRenew, Caller: worker, Route: name, Lane: "coordinator", TTL: int64(10 * time.Second)}
			case 3:
				c = fsm.Command{Op: fsm.OpRouteRelease, Caller: worker, Route: name}
			case 4:
				c = fsm.Command{Op: fsm.OpRouteLapse, Caller: "issuer:n1", Route: name}
			case 5:
				c = fsm.Command{Op: fsm.OpRouteForget, Caller: "issuer:n1", Route: name}
			case 6:
				snap := s.Snapshot()
				r, err := fsm.Restore(snap)
				if err != nil {
					t.Fatalf("Restore(Snapshot()): %v", err)
				}
				if !bytes.Equal(r.Snapshot(), snap) || r.Digest() != s.Digest() || r.RouteFloor() != s.RouteFloor() {
					t.Fatalf("the snapshot round trip changed the state (mark %d -> %d)", s.RouteFloor(), r.RouteFloor())
				}
				s = r
				continue
			}
			floor := s.RouteFloor()
			_, known := s.Route(name, now)
			for _, e := range apply(c) {
				switch e.Kind {
				case events.KindRouteAcquired, events.KindRouteTaken:
					if e.RouteGen <= highest[e.Route] {
						t.Fatalf("invariant generations never reused: %s acquired at generation %d, it had generation %d before", e.Route, e.RouteGen, highest[e.Route])
					}
					if !known && e.RouteGen != floor+1 {
						t.Fatalf("%s has no record: acquired at %d, want the mark %d plus one", e.Route, e.RouteGen, floor)
					}
					highest[e.Route] = e.RouteGen
					if gone[e.Route] {
						reacquired++
						gone[e.Route] = false
					}
				case events.KindRouteForgotten:
					forgotten++
					gone[e.Route] = true
					if _, still := s.Route(e.Route, now); still {
						t.Fatalf("%s forgotten but still listed", e.Route)
					}
					if s.RouteFloor() < e.RouteGen {
						t.Fatalf("mark %d below the forgotten generation %d", s.RouteFloor(), e.RouteGen)
					}
				}
			}
		}
		replay := fsm.New()
		for _, e := range receipts {
			if err := fsm.Evolve(replay, e); err != nil {
				t.Fatalf("Evolve seq %d: %v", e.Seq, err)
			}
		}
		if replay.Digest() != s.Digest() || replay.RouteFloor() != s.RouteFloor() {
			t.Fatalf("replay digest %s mark %d, live %s mark %d", replay.Digest().Short(), replay.RouteFloor(), s.Digest().Short(), s.RouteFloor())
		}
	})
	if forgotten == 0 || reacquired == 0 {
		t.Errorf("no run forgot a record (%d) and acquired the route again (%d)", forgotten, reacquired)
	}
	t.Logf("%d records forgotten, %d routes acquired again after", forgotten, reacquired)
}
