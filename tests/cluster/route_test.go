package clustertests

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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

// leasePolicy declares the route job-lin for workers lw0..lw3, with leases
// long enough never to lapse during the test: ownership moves only by
// release.
const leasePolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution"}],
 "routes":[{"name":"job-lin","workers":["lw*"],"max_ttl":"1h","consequences":["*"]}]}`

type leaseOp string

const (
	leaseAcquire leaseOp = "acquire"
	leaseRelease leaseOp = "release"
	leaseRenew   leaseOp = "renew"
	leaseRequest leaseOp = "request" // a grant request under a generation
	leaseSpend   leaseOp = "spend"   // the spend of a grant minted under a generation
)

// leaseIn is one operation on the route as the model sees it; leaseOut its
// answer: OK (acquired at Gen, released, permitted, spent) or refused, or
// unknown (the client gave up).
type leaseIn struct {
	Op     leaseOp
	Worker string
	Gen    uint64 // release, request, spend: the generation acted under
}

type leaseOut struct {
	OK      bool
	Gen     uint64 // acquire: the generation granted
	Unknown bool
}

type leaseState struct {
	Gen   uint64
	Owner string // "" while free
}

// leaseModel is one route's lease register: a free route is acquired at
// the next generation, a held one is refused to others (and answered with
// the lease to its owner), a release by the owner at its generation frees
// it, and a renewal, a grant request or a spend under a generation
// succeeds exactly while that generation's owner holds the lease: the
// fencing rule.
var leaseModel = porcupine.Model{
	Init: func() any { return leaseState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(leaseState), input.(leaseIn), output.(leaseOut)
		owns := st.Owner == in.Worker && st.Gen == in.Gen
		switch in.Op {
		case leaseAcquire:
			switch {
			case out.Unknown:
				if st.Owner == "" {
					return true, leaseState{Gen: st.Gen + 1, Owner: in.Worker}
				}
				return true, st
			case out.OK && st.Owner == "":
				return out.Gen == st.Gen+1, leaseState{Gen: out.Gen, Owner: in.Worker}
			case out.OK:
				return st.Owner == in.Worker && out.Gen == st.Gen, st
			}
			return st.Owner != "" && st.Owner != in.Worker, st
		case leaseRelease:
			switch {
			case out.Unknown:
				if owns {
					return true, leaseState{Gen: st.Gen}
				}
				return true, st
			case out.OK:
				return owns, leaseState{Gen: st.Gen}
			}
			return !owns, st
		}
		// renew, request, spend: only the owner at its generation
		if out.Unknown {
			return true, st
		}
		return out.OK == owns, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(leaseIn), output.(leaseOut)
		res := "refused"
		switch {
		case out.Unknown:
			res = "unknown"
		case out.OK:
			res = fmt.Sprintf("ok gen=%d", out.Gen)
		}
		return fmt.Sprintf("%s(%s, gen %d) -> %s", in.Op, in.Worker, in.Gen, res)
	},
}

// TestRouteLeasesAreLinearizable: four workers, each through another node
// of a 3-node cluster, race to acquire one route, renew it, work under it
// (a grant request and its spend, bound to the generation they acquired)
// and release it, 12 rounds each. Invariants: the history of acquires,
// renewals, releases, grant requests and spends is linearizable against a
// single-lease register with fencing (porcupine): never two owners, each
// generation granted once in order, and work under a generation permitted
// and spent only while it is the live one; and the receipt stream passes
// the auditor (which checks the same per receipt) and reaches the digest.
func TestRouteLeasesAreLinearizable(t *testing.T) {
	const (
		nWorkers = 4
		rounds   = 12
	)
	c := cluster.Start(t, 3)
	leader := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if env, err := c.Client(leader, "").SetPolicy(ctx, json.RawMessage(leasePolicy)); err != nil || env.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", env, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Status(leader).ReceiptFormatLevel < fsm.ReceiptFormatRoutes {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never raised the receipt format to the route level")
		}
		time.Sleep(50 * time.Millisecond)
	}

	var (
		mu  sync.Mutex
		ops []porcupine.Operation
		id  int
	)
	t0 := time.Now()
	record := func(in leaseIn, call time.Duration, out leaseOut) {
		mu.Lock()
		defer mu.Unlock()
		ret := time.Since(t0).Nanoseconds()
		if out.Unknown {
			ret = math.MaxInt64
		}
		id++
		ops = append(ops, porcupine.Operation{ClientId: id, Input: in, Call: call.Nanoseconds(), Output: out, Return: ret})
	}
	var wg sync.WaitGroup
	acquired := make([]int, nWorkers)
	for w := range nWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("lw%d", w)
			cl := c.Client(w%len(c.Nodes), name)
			do := func(in leaseIn, f func(context.Context, *client.Client) (grants.Envelope, error)) (grants.Envelope, bool) {
				call := time.Since(t0)
				octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
				env, err := f(octx, cl)
				ocancel()
				out := leaseOut{Unknown: err != nil || env.Reason == grants.ReasonIssuerUnavail}
				if !out.Unknown {
					out.OK = env.Decision == grants.Permit
					if in.Op == leaseAcquire && out.OK {
						out.Gen = env.RouteGen
					}
				}
				record(in, call, out)
				return env, out.OK
			}
			for round := range rounds {
				env, ok := do(leaseIn{Op: leaseAcquire, Worker: name}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
					return cl.Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: "job-lin", Lane: cluster.Lane, TTLMillis: int64(time.Hour / time.Millisecond)})
				})
				if !ok {
					time.Sleep(time.Duration(5+w) * time.Millisecond)
					continue
				}
				acquired[w]++
				gen := env.RouteGen
				do(leaseIn{Op: leaseRenew, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
					return cl.Route(ctx, api.RouteRequest{Action: api.RouteRenew, Route: "job-lin", Lane: cluster.Lane, RouteGen: gen,
						TTLMillis: int64(time.Hour / time.Millisecond)})
				})
				permit, ok := do(leaseIn{Op: leaseRequest, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
					return cl.Grant(ctx, api.GrantRequest{Lane: cluster.Lane, Tool: cluster.Tool, Args: cluster.ArgsFor(round),
						IdempotencyKey: fmt.Sprintf("%s-%d", name, round), Route: "job-lin", RouteGen: gen})
				})
				if ok {
					do(leaseIn{Op: leaseSpend, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
						return cl.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: cluster.ArgsFor(round), IdempotencyKey: fmt.Sprintf("%s-%d-s", name, round)})
					})
				}
				do(leaseIn{Op: leaseRelease, Worker: name, Gen: gen}, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
					return cl.Route(ctx, api.RouteRequest{Action: api.RouteRelease, Route: "job-lin", RouteGen: gen})
				})
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range acquired {
		total += n
	}
	if total < nWorkers {
		t.Fatalf("only %d acquisitions in %d rounds of %d workers: %v", total, rounds, nWorkers, acquired)
	}
	res, info := porcupine.CheckOperationsVerbose(leaseModel, ops, 60*time.Second)
	if res != porcupine.Ok {
		path := t.TempDir() + "/route-leases.html"
		if err := porcupine.VisualizePath(leaseModel, info, path); err == nil {
			t.Logf("porcupine visualization: %s", path)
		}
		t.Fatalf("invariant route leases are linearizable: porcupine says %s", res)
	}

	st := c.WaitPublished()
	evs := c.CheckedStream(t, st)
	gens := 0
	for _, e := range evs {
		if e.Kind == events.KindRouteAcquired || e.Kind == events.KindRouteTaken {
			gens++
		}
	}
	if gens != total {
		t.Errorf("%d acquisitions answered, %d generations in the stream", total, gens)
	}
	t.Logf("%d operations, %d generations, acquisitions per worker %v", len(ops), gens, acquired)
}

// TestLeaseModelCatchesViolations checks the checker: two owners at once,
// a generation granted out of order, and work under a released generation
// are illegal; a held route refused to another worker and an unknown
// acquire are legal.
func TestLeaseModelCatchesViolations(t *testing.T) {
	const inf = math.MaxInt64
	op := func(cid int, o leaseOp, w string, gen uint64, call, ret int64, out leaseOut) porcupine.Operation {
		return porcupine.Operation{ClientId: cid, Input: leaseIn{Op: o, Worker: w, Gen: gen}, Output: out, Call: call, Return: ret}
	}
	ok := func(gen uint64) leaseOut { return leaseOut{OK: true, Gen: gen} }
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"acquire, work, release, acquire", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(1, leaseRequest, "a", 1, 2, 3, ok(0)), op(1, leaseSpend, "a", 1, 4, 5, ok(0)),
			op(1, leaseRelease, "a", 1, 6, 7, ok(0)), op(2, leaseAcquire, "b", 0, 8, 9, ok(2))}, porcupine.Ok},
		{"held refused to another", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(2, leaseAcquire, "b", 0, 2, 3, leaseOut{})}, porcupine.Ok},
		{"two owners", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(2, leaseAcquire, "b", 0, 2, 3, ok(2))}, porcupine.Illegal},
		{"generation out of order", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(2))}, porcupine.Illegal},
		{"spend under a released generation", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(1, leaseRelease, "a", 1, 2, 3, ok(0)), op(1, leaseSpend, "a", 1, 4, 5, ok(0))}, porcupine.Illegal},
		{"renewal of a released generation", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(1, leaseRelease, "a", 1, 2, 3, ok(0)), op(1, leaseRenew, "a", 1, 4, 5, ok(0))}, porcupine.Illegal},
		{"work refused while owned", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, 1, ok(1)), op(1, leaseRequest, "a", 1, 2, 3, leaseOut{})}, porcupine.Illegal},
		{"unknown acquire may have won", []porcupine.Operation{
			op(1, leaseAcquire, "a", 0, 0, inf, leaseOut{Unknown: true}), op(2, leaseAcquire, "b", 0, 2, 3, leaseOut{})}, porcupine.Ok},
	} {
		if got := porcupine.CheckOperationsTimeout(leaseModel, tc.h, 5*time.Second); got != tc.want {
			t.Errorf("%s: porcupine says %s, want %s", tc.name, got, tc.want)
		}
	}
}
