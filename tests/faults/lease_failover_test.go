package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// heartbeatPolicy declares the routes hb-* for workers hw*, leases of at
// most 4s: long enough to outlive a failover when renewed every 400ms.
const heartbeatPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution"}],
 "routes":[{"name":"hb-*","workers":["hw*"],"max_ttl":"4s","consequences":["*"]}]}`

const (
	heartbeatTTL   = 4 * time.Second
	heartbeatEvery = 400 * time.Millisecond
)

// TestLeaderFailoverWithLiveLeases: seven heartbeat workers each hold a
// route and renew it every 400ms (4s leases); a standby worker keeps
// trying to acquire the route of one of them, hw6, whose heartbeat stops
// the moment the leader is SIGKILLed (and, with WRIT_FAULTS=1, a second
// leader is later cut off from the others). Invariants:
//   - no lease is extended beyond the clock rules: an expiry moves only by
//     a renewal receipt of the owner at that generation, to exactly the
//     renewal's time plus the lease, and never backwards;
//   - no lease is shortened: a lapse receipt or a take-over comes only at
//     or after the expiry on the replicated clock, a release only while
//     live, and the stalled worker's route is taken over by the standby
//     only after its last renewal's expiry;
//   - generations per route go up by one at each acquisition, never reused;
//     at most one live owner (the auditor checks every receipt);
//   - the leases the heartbeats kept renewing survive the failover: some
//     generation is renewed by receipts stamped by two different leaders;
//   - the history of acquires, renewals and releases is linearizable
//     against the lease model on the replicated clock (porcupine);
//   - the last leader's route table holds exactly the expiries the stream
//     gives (no hidden extension in state), and every node the same digest.
func TestLeaderFailoverWithLiveLeases(t *testing.T) {
	smokeOK(t)
	c := cluster.StartWith(t, 3, cluster.Options{Proxy: true, Seed: 21})
	leader := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if env, err := c.Client(leader, "").SetPolicy(ctx, json.RawMessage(heartbeatPolicy)); err != nil || env.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", env, err)
	}
	for deadline := time.Now().Add(20 * time.Second); c.Status(leader).ReceiptFormatLevel < fsm.ReceiptFormatRoutes; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never raised the receipt format to the route level")
		}
	}

	const beats = 7 // hw0..hw6 on hb-0..hb-6; hw7 is the standby for hb-6
	var (
		mu      sync.Mutex
		rec     []leaseRec
		stop    atomic.Bool
		stalled atomic.Bool // hw6's heartbeat stops
	)
	t0 := time.Now()
	opTimeout := 3 * time.Second
	ttl := int64(heartbeatTTL / time.Millisecond)
	do := func(cl *client.Client, route string, in lmIn, f func(context.Context) (grants.Envelope, error)) leaseRec {
		r := leaseRec{Route: route, In: in, Via: -1, Call: time.Since(t0)}
		octx, ocancel := context.WithTimeout(context.Background(), opTimeout)
		r.Env, r.Err = f(octx)
		ocancel()
		r.Return = time.Since(t0)
		mu.Lock()
		rec = append(rec, r)
		mu.Unlock()
		return r
	}
	heartbeat := func(name, route string, cl *client.Client, standby bool) {
		var gen uint64
		for !stop.Load() {
			if name == "hw6" && stalled.Load() {
				return
			}
			if gen == 0 {
				a := do(cl, route, lmIn{Op: lmAcquire, Worker: name, L: int64(heartbeatTTL)}, func(ctx context.Context) (grants.Envelope, error) {
					return cl.Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: route, Lane: lane, TTLMillis: ttl})
				})
				if !a.unknown() && a.Env.Decision == grants.Permit {
					gen = a.Env.RouteGen
				} else if standby {
					time.Sleep(300 * time.Millisecond)
				} else {
					time.Sleep(50 * time.Millisecond)
				}
				continue
			}
			time.Sleep(heartbeatEvery)
			r := do(cl, route, lmIn{Op: lmRenew, Worker: name, Gen: gen, L: int64(heartbeatTTL)}, func(ctx context.Context) (grants.Envelope, error) {
				return cl.Route(ctx, api.RouteRequest{Action: api.RouteRenew, Route: route, Lane: lane, RouteGen: gen, TTLMillis: ttl})
			})
			if !r.unknown() && r.Env.Decision != grants.Permit {
				gen = 0 // the lease is gone: acquire again
			}
		}
	}
	var wg sync.WaitGroup
	routes := make([]string, beats)
	for w := range beats + 1 {
		name, route := fmt.Sprintf("hw%d", w), fmt.Sprintf("hb-%d", min(w, beats-1))
		if w < beats {
			routes[w] = route
		}
		cl := c.Client(w%len(c.Nodes), name)
		cl.Attempt = opTimeout
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w == beats {
				// The standby starts once hw6 holds hb-6.
				time.Sleep(time.Second)
			}
			heartbeat(name, route, cl, w == beats)
		}()
	}

	// Let the heartbeats settle, then kill the leader with every lease live.
	time.Sleep(1500 * time.Millisecond)
	old := c.Leader()
	stalled.Store(true)
	c.Kill(old)
	t.Logf("SIGKILL leader %s at %s with every lease live; hw6 stops renewing", c.Nodes[old].ID, time.Since(t0).Round(time.Millisecond))
	time.Sleep(2500 * time.Millisecond)
	c.Restart(old)
	if full() {
		time.Sleep(1500 * time.Millisecond)
		l := c.Leader()
		c.Isolate(l)
		t.Logf("leader %s cut off at %s", c.Nodes[l].ID, time.Since(t0).Round(time.Millisecond))
		time.Sleep(3 * time.Second)
		c.Heal()
	}
	// Past hw6's lease (4s from its last renewal), and a little more.
	time.Sleep(heartbeatTTL + time.Second)
	stop.Store(true)
	wg.Wait()

	evs := c.CheckedStream(t, c.WaitPublished())
	checkDigests(t, c)
	checkLeaseHistory(t, rec, evs, routes, []string{"hb-6"})
	final := checkLeaseClockRules(t, evs, heartbeatTTL)

	// Leases renewed by receipts of two leaders: they outlived a failover.
	survived := 0
	leaders := map[string]map[uint64]map[string]bool{}
	for _, e := range evs {
		if e.Kind == events.KindRouteRenewed || e.Kind == events.KindRouteAcquired || e.Kind == events.KindRouteTaken {
			if leaders[e.Route] == nil {
				leaders[e.Route] = map[uint64]map[string]bool{}
			}
			if leaders[e.Route][e.RouteGen] == nil {
				leaders[e.Route][e.RouteGen] = map[string]bool{}
			}
			leaders[e.Route][e.RouteGen][e.Node] = true
		}
	}
	for _, gens := range leaders {
		for _, nodes := range gens {
			if len(nodes) >= 2 {
				survived++
			}
		}
	}
	if survived == 0 {
		t.Errorf("invariant live leases survive a failover: no lease was renewed under two leaders: %v", leaders)
	}

	// The last leader's table holds what the stream gives.
	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	table, err := c.Client(c.Leader(), "").Routes(rctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rl := range table.Routes {
		want, ok := final[rl.Route]
		switch {
		case !ok:
			t.Errorf("route %s is in the leader's table, not in the stream", rl.Route)
		case rl.Generation != want.gen || rl.ExpiresAt != want.expires || rl.Owner != want.owner:
			t.Errorf("invariant no hidden extension: route %s is gen %d owner %s expiring %d on the leader, gen %d owner %s expiring %d by the stream",
				rl.Route, rl.Generation, rl.Owner, rl.ExpiresAt, want.gen, want.owner, want.expires)
		}
	}
	t.Logf("%d leases outlived a failover; %d route operations", survived, len(rec))
}

// leaseFold is one route's lease as the stream gives it.
type leaseFold struct {
	gen     uint64
	owner   string
	expires int64
	end     string // "", released, lapsed, revoked
	noted   bool   // a route_lapsed receipt recorded the lapse
}

// checkLeaseClockRules replays the route receipts of a stream and checks
// the clock rules of leases asked for ttl: every acquisition takes the
// next generation with expiry exactly its time plus ttl; a renewal, by
// the owner at its generation while live, moves the expiry forward to
// exactly its time plus ttl; a release is by the owner while live; a
// lapse receipt, and a take-over, come at or after the expiry, and a
// take-over names the lease it replaced; receipt times never run
// backwards. It returns each route's final lease.
func checkLeaseClockRules(t *testing.T, evs []events.Event, ttl time.Duration) map[string]leaseFold {
	t.Helper()
	L := int64(ttl)
	leases := map[string]*leaseFold{}
	var prev int64
	for _, e := range evs {
		if e.Time < prev {
			t.Errorf("invariant the clock never runs backwards: seq %d at %d after %d", e.Seq, e.Time, prev)
		}
		prev = max(prev, e.Time)
		l := leases[e.Route]
		bad := func(format string, args ...any) {
			t.Errorf("invariant lease clock rules: seq %d %s on %s gen %d by %s at %d: %s", e.Seq, e.Kind, e.Route, e.RouteGen, e.Worker, e.Time, fmt.Sprintf(format, args...))
		}
		switch e.Kind {
		case events.KindRouteAcquired, events.KindRouteTaken:
			if l == nil {
				l = &leaseFold{}
				leases[e.Route] = l
			}
			live := l.gen > 0 && l.end == "" && e.Time < l.expires
			switch {
			case e.RouteGen != l.gen+1:
				bad("generation %d after %d", e.RouteGen, l.gen)
			case live:
				bad("the lease of %s at gen %d runs until %d", l.owner, l.gen, l.expires)
			case e.IssuedAt != e.Time || e.ExpiresAt != e.Time+L:
				bad("issued %d expiring %d, want %d and %d", e.IssuedAt, e.ExpiresAt, e.Time, e.Time+L)
			case e.Kind == events.KindRouteTaken && (l.gen == 0 || l.end == "released" || e.PrevGen != l.gen || e.PrevOwner != l.owner):
				bad("a take-over of gen %d by %s, the lease was gen %d of %s (%q)", e.PrevGen, e.PrevOwner, l.gen, l.owner, l.end)
			case e.Kind == events.KindRouteAcquired && l.gen > 0 && l.end != "released":
				bad("a plain acquisition after the lease of %s at gen %d ended %q", l.owner, l.gen, l.end)
			}
			*l = leaseFold{gen: e.RouteGen, owner: e.Worker, expires: e.ExpiresAt}
		case events.KindRouteRenewed:
			switch {
			case l == nil || l.gen != e.RouteGen || l.owner != e.Worker || l.end != "":
				bad("not the owner's live lease (%+v)", l)
			case e.Time >= l.expires:
				bad("renewed at or after its expiry %d", l.expires)
			case e.ExpiresAt != e.Time+L || e.ExpiresAt <= l.expires:
				bad("expiry %d -> %d, want %d (its time plus the lease, and later)", l.expires, e.ExpiresAt, e.Time+L)
			default:
				l.expires = e.ExpiresAt
			}
		case events.KindRouteReleased:
			switch {
			case l == nil || l.gen != e.RouteGen || l.owner != e.Worker || l.end != "":
				bad("not the owner's live lease (%+v)", l)
			case e.Time >= l.expires:
				bad("released at or after its expiry %d", l.expires)
			default:
				l.end = "released"
			}
		case events.KindRouteLapsed:
			switch {
			case l == nil || l.gen != e.RouteGen || l.noted:
				bad("no such lease, or its lapse recorded twice (%+v)", l)
			case e.Time < l.expires || e.ExpiresAt != l.expires:
				bad("a lapse before the expiry %d (receipt says %d)", l.expires, e.ExpiresAt)
			default:
				l.end, l.noted = "lapsed", true
			}
		}
		if l != nil && l.end == "" && e.Time >= l.expires && e.Route != "" {
			l.end = "lapsed"
		}
	}
	out := make(map[string]leaseFold, len(leases))
	for n, l := range leases {
		out[n] = *l
	}
	return out
}
