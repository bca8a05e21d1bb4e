package audit

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

// TestRouteWorkloadPassesTheVerifier drives the real state machine with
// random route leases (acquire, renew, release, lapse records, revocations
// ending leases, clock jumps past expiries, and at receipt format level 7
// records forgotten after a day and routes acquired again above the
// generation high-water mark) and work bound to them
// (requests, spends and effects under current and stale generations): the
// auditor finds no route violation in what the issuer recorded, folds to
// its digest, and counts every effect recorded route_stale.
func TestRouteWorkloadPassesTheVerifier(t *testing.T) {
	raw, err := os.ReadFile("../fsm/testdata/policies/routes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policyfile.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 9))
			m := newSim()
			level := fsm.ReceiptFormatRoutes
			if seed >= 2 {
				level = fsm.ReceiptFormatRouteRetention
			}
			m.apply(policyCmd(pol), fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: level})
			workers := []string{"w1", "w2", "w3"}
			routes := []string{"job-a", "job-b"}
			type issued struct{ id, worker string }
			var minted, spent []issued
			var stale uint64
			argsOf := func(w string) string { return `{"file_path":"/work/` + w + `/notes.md"}` }
			digestOf := func(w string) events.Hash { d, _ := grants.DigestArgs("Read", []byte(argsOf(w))); return d }
			for i := range 600 {
				m.now += int64(r.IntN(1500)) * 1_000_000 // up to 1.5s
				if r.IntN(40) == 0 {
					m.now += int64(fsm.RouteRetention) // past every free record's retention
				}
				w := workers[r.IntN(len(workers))]
				route := routes[r.IntN(len(routes))]
				if in, ok := m.s.Route(route, m.now); ok && in.Live && r.IntN(5) > 0 {
					w = in.Owner // mostly the owner works, sometimes a stale one
				}
				var c fsm.Command
				switch p := r.IntN(100); {
				case p < 15:
					c = fsm.Command{Op: fsm.OpRouteAcquire, Caller: w, Lane: "coordinator", Route: route, TTL: int64(1+r.IntN(10)) * sec}
				case p < 40:
					c = fsm.Command{Op: fsm.OpRouteRenew, Caller: w, Lane: "coordinator", Route: route, TTL: int64(1+r.IntN(10)) * sec}
				case p < 45:
					c = fsm.Command{Op: fsm.OpRouteRelease, Caller: w, Route: route}
				case p < 50:
					c = fsm.Command{Op: fsm.OpRouteLapse, Caller: "issuer:n1", Route: route}
				case p < 51:
					c = fsm.Command{Op: fsm.OpRouteForget, Caller: "issuer:n1", Route: route}
				case p < 52:
					c = fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/" + w}
				case p < 54:
					c = fsm.Command{Op: fsm.OpReinstate, Caller: "operator:alice", Key: w}
				case p < 75:
					c = fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "Read", GrantID: fmt.Sprintf("g%d", i),
						Digest: digestOf(w), Args: mustFlat(t, argsOf(w)), Route: route}
				case p < 90 && len(minted) > 0:
					g := minted[r.IntN(len(minted))]
					c = fsm.Command{Op: fsm.OpSpend, Caller: g.worker, GrantID: g.id, Digest: digestOf(g.worker), IdemKey: "s-" + g.id}
				case len(spent) > 0:
					g := spent[r.IntN(len(spent))]
					c = fsm.Command{Op: fsm.OpEffect, Caller: g.worker, GrantID: g.id, Outcome: "confirmed", Verifier: "v1"}
				default:
					continue
				}
				before := m.s.Chain().Seq
				env := m.apply(c)[0]
				if m.s.Chain().Seq == before {
					continue
				}
				switch env.Kind {
				case events.KindPermit:
					minted = append(minted, issued{env.GrantID, w})
				case events.KindAttempt:
					spent = append(spent, issued{env.GrantID, c.Caller})
				}
			}
			for _, p := range m.s.Outbox(0, 0) {
				if e, err := events.Decode(p.Data); err == nil && e.RouteStale {
					stale++
				}
			}
			v, x := check(m.raw(), true)
			if x != nil {
				t.Fatalf("violation in the issuer's own stream: %v", x)
			}
			if err := v.CheckDigest(m.s.Digest()); err != nil {
				t.Fatal(err)
			}
			sum := v.Summary()
			if sum.StaleEffects != stale || sum.Kinds["route_acquired"]+sum.Kinds["route_taken"] == 0 || sum.Kinds["attempt"] == 0 {
				t.Fatalf("summary: stale %d (want %d), kinds %v", sum.StaleEffects, stale, sum.Kinds)
			}
			t.Logf("kinds %v, stale effects %d", sum.Kinds, stale)
		})
	}
}

func mustFlat(t *testing.T, doc string) policy.Args {
	t.Helper()
	a, err := policy.FlattenArgs([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
