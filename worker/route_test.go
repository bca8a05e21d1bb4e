package worker

import (
	"math"
	"testing"
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
