package issuer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// routePolicy declares job-* routes for workers w1 and w2 with leases of
// at most 2s, under which they may read.
const routePolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"file_read","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}}],
 "routes":[{"name":"job-*","workers":["w1","w2"],"max_ttl":"2s"}]}`

// TestRouteLeasesThroughTheAPI: once the leader has raised the receipt
// format to the route level, a worker acquires a route (generation 1)
// and another is refused route_held naming it; work under the route binds
// the generation; the lease lapses unrenewed, the leader records the
// lapse, the other worker takes the route over (generation 2, naming the
// previous lease); the first worker's spend of a grant minted before is
// refused owner_stale naming both generations and its renewal is refused;
// revoking the new owner ends its lease; the routes query and status
// report all this; and an auditor replaying the receipts reaches the
// issuer's digest.
func TestRouteLeasesThroughTheAPI(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w1, w2, op := client.New(nc, "w1"), client.New(nc, "w2"), client.New(nc, "")
	if e, err := op.SetPolicy(ctx, json.RawMessage(routePolicy)); err != nil || e.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", e, err)
	}
	testenv.WaitFor(t, 10*time.Second, "receipt format raised to the route level", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatRoutes
	})
	acquire := func(c *client.Client, route string, ttl time.Duration) grants.Envelope {
		t.Helper()
		e, err := c.Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: route, Lane: "coordinator", TTLMillis: ttl.Milliseconds()})
		if err != nil {
			t.Fatalf("acquire %s: %v", route, err)
		}
		return e
	}
	got := acquire(w1, "job-a", time.Second)
	if got.Decision != grants.Permit || got.Kind != events.KindRouteAcquired || got.RouteGen != 1 || got.Owner != "w1" {
		t.Fatalf("w1 acquire: %+v", got)
	}
	held := acquire(w2, "job-a", time.Second)
	if held.Reason != grants.ReasonRouteHeld || !strings.Contains(held.Detail, "held by w1 at generation 1") {
		t.Fatalf("w2 acquire while held: %+v", held)
	}
	if e := acquire(w1, "weekly", 0); e.Reason != grants.ReasonUndeclaredRoute {
		t.Fatalf("undeclared route: %+v", e)
	}
	args := json.RawMessage(`{"file_path":"/tmp/a"}`)
	permit, err := w1.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Read", Args: args, Route: "job-a"})
	if err != nil || permit.Decision != grants.Permit || permit.Route != "job-a" || permit.RouteGen != 1 {
		t.Fatalf("grant under the route: %+v %v", permit, err)
	}
	// A second route whose lapse nobody takes over: the leader records it.
	if e := acquire(w1, "job-b", time.Second); e.Decision != grants.Permit {
		t.Fatalf("acquire job-b: %+v", e)
	}
	var taken grants.Envelope
	testenv.WaitFor(t, 10*time.Second, "w2 takes job-a over once w1's lease lapsed", func() bool {
		taken = acquire(w2, "job-a", 2*time.Second)
		return taken.Decision == grants.Permit
	})
	if taken.Kind != events.KindRouteTaken || taken.RouteGen != 2 || taken.PrevOwner != "w1" || taken.PrevGen != 1 {
		t.Fatalf("take-over: %+v", taken)
	}
	stale, err := w1.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args})
	if err != nil || stale.Reason != grants.ReasonOwnerStale || stale.Recovery != grants.RecoverReacquireOwnership ||
		!strings.Contains(stale.Detail, "generation 1") || !strings.Contains(stale.Detail, "generation 2") {
		t.Fatalf("spend under the lapsed generation: %+v %v", stale, err)
	}
	renew, err := w1.Route(ctx, api.RouteRequest{Action: api.RouteRenew, Route: "job-a", RouteGen: 1})
	if err != nil || renew.Reason != grants.ReasonOwnerStale {
		t.Fatalf("renewal of the lapsed lease: %+v %v", renew, err)
	}
	status, err := w1.Route(ctx, api.RouteRequest{Action: api.RouteStatus, Route: "job-a"})
	if err != nil || status.Owner != "w2" || status.RouteGen != 2 || status.Seq != 0 {
		t.Fatalf("status: %+v %v", status, err)
	}
	testenv.WaitFor(t, 10*time.Second, "job-b's lapse recorded", func() bool {
		rs, err := op.Routes(ctx)
		if err != nil {
			return false
		}
		for _, r := range rs.Routes {
			if r.Route == "job-b" {
				return !r.Live && r.Ended == "lapsed"
			}
		}
		return false
	})
	if e, err := op.Revoke(ctx, api.RevokeRequest{Worker: "w2"}); err != nil || e.Decision != grants.Permit {
		t.Fatalf("revoke w2: %+v %v", e, err)
	}
	rs, err := op.Routes(ctx)
	if err != nil || len(rs.Routes) != 2 || rs.Routes[0].Route != "job-a" || rs.Routes[0].Generation != 2 ||
		rs.Routes[0].Owner != "w2" || rs.Routes[0].Live || rs.Routes[0].Ended != "revoked" {
		t.Fatalf("routes after the revocation: %+v %v", rs, err)
	}
	if st := env.Service.Status(); st.Routes != 2 || st.LiveLeases != 0 {
		t.Fatalf("status: %d routes, %d live leases; want 2, 0", st.Routes, st.LiveLeases)
	}
	testenv.WaitFor(t, 10*time.Second, "the lapse of job-b in the stream", func() bool {
		return replayToDigest(ctx, t, nc, env.Service.Status()).Summary().Kinds["route_lapsed"] >= 1
	})
	ver := replayToDigest(ctx, t, nc, env.Service.Status())
	for kind, want := range map[string]uint64{"route_acquired": 2, "route_taken": 1, "spend_refused": 1, "revoke": 1} {
		if n := ver.Summary().Kinds[kind]; n != want {
			t.Errorf("the auditor saw %d %s receipts, want %d", n, kind, want)
		}
	}
}
