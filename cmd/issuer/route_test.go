package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

const routeListPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"file_read","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}}],
 "routes":[{"name":"job-*","workers":["w1","w2"],"max_ttl":"1m"}]}`

// TestRouteListAgainstIssuer: `issuer route list` says when no route was
// ever acquired, then lists each route's generation, owner, lane and time
// left (text and --json); `issuer status` counts routes and live leases;
// `issuer revoke --worker` ends the worker's lease, which the list then
// shows as revoked.
func TestRouteListAgainstIssuer(t *testing.T) {
	env, nc, ctx := issuerUnder(t, json.RawMessage(routeListPolicy), 30*time.Second)
	testenv.WaitFor(t, 10*time.Second, "the route receipt format", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatRoutes
	})
	if r := runCLI(t, "route", "list", "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, "no routes acquired yet") {
		t.Fatalf("route list before any acquire: %s", r)
	}
	for _, w := range []string{"w1", "w2"} {
		e, err := client.New(nc, w).Route(ctx, api.RouteRequest{Action: api.RouteAcquire, Route: "job-" + w, Lane: "coordinator"})
		if err != nil || e.Decision != grants.Permit || e.RouteGen != 1 {
			t.Fatalf("acquire job-%s: %+v %v", w, e, err)
		}
	}
	r := runCLI(t, "route", "list", "--nats-url", env.URL)
	for _, want := range []string{"ROUTE", "job-w1", "job-w2", "coordinator", "live"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Fatalf("route list lacks %q: %s", want, r)
		}
	}
	if r := runCLI(t, "status", "--nats-url", env.URL); !strings.Contains(r.stdout, "2 (2 leases live)") {
		t.Fatalf("status does not count the routes: %s", r)
	}
	if r := runCLI(t, "revoke", "--worker", "w2", "--nats-url", env.URL); r.code != exitOK {
		t.Fatalf("revoke: %s", r)
	}
	r = runCLI(t, "route", "list", "--json", "--nats-url", env.URL)
	var rs api.Routes
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &rs) != nil || len(rs.Routes) != 2 {
		t.Fatalf("route list --json: %s", r)
	}
	w1, w2 := rs.Routes[0], rs.Routes[1]
	if w1.Route != "job-w1" || !w1.Live || w1.Owner != "w1" || w1.Generation != 1 || w1.LeftMillis <= 0 || w1.LeftMillis > 60_000 {
		t.Fatalf("job-w1: %+v", w1)
	}
	if w2.Route != "job-w2" || w2.Live || w2.Ended != "revoked" || w2.Owner != "w2" {
		t.Fatalf("job-w2 after the revocation: %+v", w2)
	}
	if r := runCLI(t, "route", "list", "--help"); r.code != exitOK || !strings.Contains(r.stdout, "fencing generation") {
		t.Fatalf("route list --help: %s", r)
	}
}
