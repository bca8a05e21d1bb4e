package worker

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/harness"
)

// TestRouteFromEnv: flags win over the environment, a generation without a
// route and a generation that is not a number are refused, and hooks bind
// an unparsable generation to one no lease has (refused by the issuer)
// instead of dropping the route.
func TestRouteFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name             string
		envRoute, envGen string
		flagRoute        string
		flagGen          uint64
		want             RouteBinding
		wantErr          bool
		hook             RouteBinding
	}{
		{name: "none"},
		{name: "env", envRoute: "r1", envGen: "3", want: RouteBinding{"r1", 3}, hook: RouteBinding{"r1", 3}},
		{name: "env route only", envRoute: "r1", want: RouteBinding{"r1", 0}, hook: RouteBinding{"r1", 0}},
		{name: "flag wins", envRoute: "r1", envGen: "3", flagRoute: "r2", flagGen: 5, want: RouteBinding{"r2", 5}, hook: RouteBinding{"r1", 3}},
		{name: "bad gen", envRoute: "r1", envGen: "x", wantErr: true, hook: RouteBinding{"r1", math.MaxUint64}},
		{name: "gen without route", envGen: "2", wantErr: true, hook: RouteBinding{"", math.MaxUint64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRoute, tc.envRoute)
			t.Setenv(EnvRouteGen, tc.envGen)
			got, err := RouteFromEnv(tc.flagRoute, tc.flagGen)
			if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
				t.Fatalf("RouteFromEnv = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.wantErr)
			}
			if h := routeOfProcess(); h != tc.hook {
				t.Fatalf("routeOfProcess = %+v, want %+v", h, tc.hook)
			}
		})
	}
}

// TestGrantRequestRoute: a hook's or the MCP proxy's grant request binds
// WRIT_ROUTE/WRIT_ROUTE_GEN when set, else the worker config's route at
// the current generation, else no route; a config with an invalid route
// name is refused.
func TestGrantRequestRoute(t *testing.T) {
	call := harness.Call{Harness: harness.MCP, Session: "s", CallID: "c1", Tool: "Read", Args: []byte(`{}`)}
	for _, tc := range []struct {
		name, envRoute, envGen, config string
		want                           RouteBinding
	}{
		{name: "none"},
		{name: "config", config: "job-a", want: RouteBinding{"job-a", 0}},
		{name: "environment wins", envRoute: "job-b", envGen: "4", config: "job-a", want: RouteBinding{"job-b", 4}},
		{name: "bad generation is not replaced by the config", envRoute: "job-b", envGen: "x", config: "job-a", want: RouteBinding{"job-b", math.MaxUint64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvRoute, tc.envRoute)
			t.Setenv(EnvRouteGen, tc.envGen)
			r := grantRequest(call, "coordinator", grantContext{Route: tc.config})
			if got := (RouteBinding{r.Route, r.RouteGen}); got != tc.want {
				t.Fatalf("bound %+v, want %+v", got, tc.want)
			}
		})
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		route string
		ok    bool
	}{{"inbox-triage@acme", true}, {"bad route", false}} {
		p := filepath.Join(dir, "w.json")
		if err := os.WriteFile(p, []byte(`{"worker":"w1","lane":"coordinator","route":"`+tc.route+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := loadConfig(p)
		if (err == nil) != tc.ok || (tc.ok && c.Route != tc.route) {
			t.Fatalf("route %q: config %+v, error %v", tc.route, c, err)
		}
	}
}
