package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// leaseFaultPolicy declares the routes job-* for workers lw*, leases of at
// most 2s, grants living a minute (so that only the lease decides whether
// work under it may spend).
const leaseFaultPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution"}],
 "routes":[{"name":"job-*","workers":["lw*"],"max_ttl":"2s","consequences":["*"]}]}`

// leaseTTL is the lease every acquire and renewal asks for (under the
// route's max_ttl, above policy.MinRouteTTL): a lease acquired or renewed
// at T expires at exactly T+leaseTTL.
const leaseTTL = 1500 * time.Millisecond

// leasePlan sizes a lease scenario: workers race for routes over window,
// and fault injects the faults (it runs on the test's goroutine, from the
// window's start, and returns when the faults are over).
type leasePlan struct {
	seed      int64
	workers   int
	routes    []string
	window    time.Duration
	opTimeout time.Duration
	fault     func(c *cluster.Cluster, t0 time.Time)
}

// leaseRec is one recorded lease operation.
type leaseRec struct {
	Route  string
	In     lmIn
	Via    int
	Env    grants.Envelope
	Err    error
	Call   time.Duration
	Return time.Duration
}

func (r leaseRec) unknown() bool { return r.Err != nil || r.Env.Reason == grants.ReasonIssuerUnavail }

// TestLeasesLinearizableUnderPartition: four workers race for two routes
// (acquire, renew, a grant request and its spend under the generation,
// release or abandon, and pauses past the lease so that leases lapse and
// are taken over), through clients pinned to every node, while the leader
// is cut off from both followers for 3.5s. Invariants: the history is
// linearizable against the lease model on the replicated clock
// (leaseClockModel: one owner at a time, generations in order and never
// reused, an expiry of exactly T+ttl moved only by the owner's renewal, a
// take-over only once the clock passed the expiry, work permitted and
// spent exactly while its generation is live); every definite answer
// names its receipt; the auditor passes the stream (generations per route
// increase, one live owner at any seq, no attempt after its generation
// ended) and every node reaches the same digest.
func TestLeasesLinearizableUnderPartition(t *testing.T) {
	needFull(t)
	leaseScenario(t, leasePlan{seed: 11, workers: 4, routes: []string{"job-a", "job-b"}, window: 9 * time.Second, opTimeout: 3 * time.Second,
		fault: func(c *cluster.Cluster, t0 time.Time) {
			sleepUntil(t0.Add(1500 * time.Millisecond))
			old := c.Leader()
			c.Isolate(old)
			sleepUntil(t0.Add(5 * time.Second))
			c.Heal()
		}})
}

// TestLeasesLinearizableUnderLeaderCrash is the same race while the
// leader is SIGKILLed twice (each restarted 2s later), so that leases are
// judged, renewed and taken over by a new leader stamping the clock.
// Invariants as in TestLeasesLinearizableUnderPartition.
func TestLeasesLinearizableUnderLeaderCrash(t *testing.T) {
	needFull(t)
	leaseScenario(t, leasePlan{seed: 12, workers: 4, routes: []string{"job-a", "job-b"}, window: 10 * time.Second, opTimeout: 3 * time.Second,
		fault: func(c *cluster.Cluster, t0 time.Time) {
			for _, at := range []time.Duration{1500 * time.Millisecond, 5 * time.Second} {
				sleepUntil(t0.Add(at))
				l := c.Leader()
				c.Kill(l)
				sleepUntil(t0.Add(at + 2*time.Second))
				c.Restart(l)
			}
		}})
}

// sleepUntil sleeps until the wall clock reaches at (a schedule point of
// a scenario, not a wait for a condition).
func sleepUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		time.Sleep(d)
	}
}

func leaseScenario(t *testing.T, p leasePlan) {
	c := cluster.StartWith(t, 3, cluster.Options{Proxy: true, Seed: p.seed})
	leader := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if env, err := c.Client(leader, "").SetPolicy(ctx, json.RawMessage(leaseFaultPolicy)); err != nil || env.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", env, err)
	}
	for deadline := time.Now().Add(20 * time.Second); c.Status(leader).ReceiptFormatLevel < fsm.ReceiptFormatRoutes; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never raised the receipt format to the route level")
		}
	}

	var (
		mu  sync.Mutex
		rec []leaseRec
	)
	t0 := time.Now()
	end := t0.Add(p.window)
	var wg sync.WaitGroup
	for w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("lw%d", w)
			rng := rand.New(rand.NewSource(p.seed*100 + int64(w)))
			clients := make([]*client.Client, len(c.Nodes))
			for i := range c.Nodes {
				clients[i] = c.PinnedClient(i, name)
				clients[i].Attempt = p.opTimeout
			}
			home := w % len(c.Nodes)
			do := func(route string, in lmIn, f func(context.Context, *client.Client) (grants.Envelope, error)) leaseRec {
				via := home
				if rng.Intn(3) == 0 {
					via = rng.Intn(len(c.Nodes))
				}
				r := leaseRec{Route: route, In: in, Via: via, Call: time.Since(t0)}
				octx, ocancel := context.WithTimeout(context.Background(), p.opTimeout)
				r.Env, r.Err = f(octx, clients[via])
				ocancel()
				r.Return = time.Since(t0)
				mu.Lock()
				rec = append(rec, r)
				mu.Unlock()
				return r
			}
			pause := func() {
				if rng.Intn(6) == 0 {
					time.Sleep(leaseTTL + 200*time.Millisecond) // past the lease: it lapses
					return
				}
				time.Sleep(time.Duration(50+rng.Intn(300)) * time.Millisecond)
			}
			ttl := int64(leaseTTL / time.Millisecond)
			n := 0
			for time.Now().Before(end) {
				route := p.routes[rng.Intn(len(p.routes))]
				a := do(route, lmIn{Op: lmAcquire, Worker: name, L: int64(leaseTTL)}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
					return cl.Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: route, Lane: lane, TTLMillis: ttl})
				})
				if a.unknown() || a.Env.Decision != grants.Permit {
					time.Sleep(time.Duration(50+rng.Intn(100)) * time.Millisecond)
					continue
				}
				gen := a.Env.RouteGen
				for range 1 + rng.Intn(3) {
					pause()
					do(route, lmIn{Op: lmRenew, Worker: name, Gen: gen, L: int64(leaseTTL)}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
						return cl.Route(ctx, api.RouteRequest{Action: api.RouteRenew, Route: route, Lane: lane, RouteGen: gen, TTLMillis: ttl})
					})
					n++
					i := w*1_000_000 + n
					key := fmt.Sprintf("%s-%d", name, n)
					g := do(route, lmIn{Op: lmRequest, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
						return cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(i), IdempotencyKey: key, Route: route, RouteGen: gen})
					})
					if g.unknown() || !cluster.IsPermit(g.Env) {
						continue
					}
					if rng.Intn(4) == 0 {
						pause()
					}
					do(route, lmIn{Op: lmSpend, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
						return cl.Spend(ctx, api.SpendRequest{GrantID: g.Env.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: key + "-s"})
					})
				}
				if rng.Intn(3) != 0 {
					do(route, lmIn{Op: lmRelease, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
						return cl.Route(ctx, api.RouteRequest{Action: api.RouteRelease, Route: route, RouteGen: gen})
					})
				}
			}
		}()
	}
	p.fault(c, t0)
	wg.Wait()
	c.Heal()
	for i, nd := range c.Nodes {
		if !nd.Running() {
			c.Restart(i)
		}
	}

	evs := c.CheckedStream(t, c.WaitPublished())
	checkDigests(t, c)
	checkLeaseHistory(t, rec, evs, p.routes, p.routes)
	checkLeaseClockRules(t, evs, leaseTTL)
}

// leaseOutcome maps a recorded answer to the model's output, reading the
// time of an answer that has a receipt from the stream. It reports false
// for an answer the model does not cover (which fails the test).
func leaseOutcome(r leaseRec, evs []events.Event) (lmOut, string) {
	if r.unknown() {
		return lmOut{Unknown: true}, ""
	}
	env := r.Env
	out := lmOut{OK: env.Decision == grants.Permit}
	if env.Kind != 0 && env.Seq > 0 {
		if env.Seq > uint64(len(evs)) {
			return out, fmt.Sprintf("answered seq %d, the stream ends at %d", env.Seq, len(evs))
		}
		e := evs[env.Seq-1]
		if e.Kind != env.Kind || (e.Route != r.Route && e.Kind != events.KindSpendRefused) {
			return out, fmt.Sprintf("answered seq %d as %s, which is %s on route %q", env.Seq, env.Kind, e.Kind, e.Route)
		}
		out.T = e.Time
	}
	switch r.In.Op {
	case lmAcquire:
		if out.OK {
			out.Gen, out.Issued, out.Exp, out.Taken = env.RouteGen, env.IssuedAt, env.ExpiresAt, env.Kind == events.KindRouteTaken
		} else if env.Reason != grants.ReasonRouteHeld {
			return out, "acquire refused " + string(env.Reason)
		}
	case lmRenew:
		if out.OK {
			out.Exp = env.ExpiresAt
		} else if env.Reason != grants.ReasonOwnerStale && env.Reason != grants.ReasonNotOwner {
			return out, "renew refused " + string(env.Reason)
		}
	case lmRelease:
		if !out.OK && env.Reason != grants.ReasonOwnerStale && env.Reason != grants.ReasonNotOwner {
			return out, "release refused " + string(env.Reason)
		}
	case lmRequest:
		if !out.OK && env.Reason != grants.ReasonOwnerStale && env.Reason != grants.ReasonNotOwner {
			return out, "request refused " + string(env.Reason)
		}
		if out.T == 0 {
			return out, "a grant answer without its receipt"
		}
	case lmSpend:
		out.OK = cluster.IsAttempt(env)
		if !out.OK && !cluster.IsRefusal(env, grants.ReasonOwnerStale) {
			return out, fmt.Sprintf("spend answered %s %s", env.Decision, env.Reason)
		}
		if out.T == 0 {
			return out, "a spend answer without its receipt"
		}
	}
	return out, ""
}

// checkLeaseHistory checks the recorded history of each of routes against
// leaseClockModel, and that each of mustTake saw a take-over (so that the
// scenario exercised lapses).
func checkLeaseHistory(t *testing.T, rec []leaseRec, evs []events.Event, routes, mustTake []string) {
	t.Helper()
	per := map[string][]porcupine.Operation{}
	tally := map[string]int{}
	for i, r := range rec {
		out, bad := leaseOutcome(r, evs)
		if bad != "" {
			t.Errorf("%s %s on %s via node %d: %s (%+v)", r.In.Op, r.In.Worker, r.Route, r.Via, bad, r.Env)
			continue
		}
		ret := r.Return.Nanoseconds()
		if out.Unknown {
			ret = math.MaxInt64
			tally["unknown"]++
		} else if out.OK {
			tally[string(r.In.Op)+" ok"]++
		} else {
			tally[string(r.In.Op)+" refused"]++
		}
		per[r.Route] = append(per[r.Route], porcupine.Operation{ClientId: i, Input: r.In, Output: out, Call: r.Call.Nanoseconds(), Return: ret})
	}
	kinds := map[string]map[events.Kind]int{}
	for _, e := range evs {
		if e.Route != "" {
			if kinds[e.Route] == nil {
				kinds[e.Route] = map[events.Kind]int{}
			}
			kinds[e.Route][e.Kind]++
		}
	}
	t.Logf("%d operations: %v; receipts per route: %v", len(rec), tally, kinds)
	for _, route := range mustTake {
		if kinds[route][events.KindRouteTaken] == 0 {
			t.Errorf("route %s: the scenario did not exercise take-overs after lapses: %v", route, kinds[route])
		}
	}
	for _, route := range routes {
		h := per[route]
		res, info := porcupine.CheckOperationsVerbose(leaseClockModel, h, 60*time.Second)
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			t.Errorf("porcupine timed out on route %s (%d operations)", route, len(h))
		default:
			sortOps(h)
			var lines []string
			for _, op := range h {
				ret := "?"
				if op.Return != math.MaxInt64 {
					ret = time.Duration(op.Return).String()
				}
				lines = append(lines, fmt.Sprintf("  [%s, %s] %s", time.Duration(op.Call), ret, leaseClockModel.DescribeOperation(op.Input, op.Output)))
			}
			path := t.TempDir() + "/leases-" + route + ".html"
			if err := porcupine.VisualizePath(leaseClockModel, info, path); err == nil {
				t.Logf("porcupine visualization: %s", path)
			}
			t.Errorf("invariant leases are linearizable on the replicated clock: route %s has no legal order:\n%s", route, strings.Join(lines, "\n"))
		}
	}
}
