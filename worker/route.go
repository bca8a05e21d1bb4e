package worker

import (
	"fmt"
	"math"
	"os"
	"strconv"
)

// Route binding: work a cron or heartbeat worker does under a route names
// the route and the fencing generation of its lease in every grant
// request, so that the issuer refuses it once the lease has moved on.
// worker-agent cron puts both in the environment of the command it runs;
// every worker-agent call inside (request, hooks, the MCP proxy) reads
// them from there unless a flag names them.

// Environment variables that carry a route binding.
const (
	EnvRoute    = "WRIT_ROUTE"
	EnvRouteGen = "WRIT_ROUTE_GEN"
)

// RouteBinding is a route and a generation (0: the caller's current one).
type RouteBinding struct {
	Route string
	Gen   uint64
}

// RouteFromEnv reads the route binding from the environment: the route
// and generation the flags name win over WRIT_ROUTE and WRIT_ROUTE_GEN.
// A generation without a route is an error, as is one that is not a
// number.
func RouteFromEnv(flagRoute string, flagGen uint64) (RouteBinding, error) {
	b := RouteBinding{Route: flagRoute, Gen: flagGen}
	if b.Route == "" {
		b.Route = os.Getenv(EnvRoute)
		if b.Gen == 0 {
			if v := os.Getenv(EnvRouteGen); v != "" {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return RouteBinding{}, fmt.Errorf("%s=%q is not a generation number", EnvRouteGen, v)
				}
				b.Gen = n
			}
		}
	}
	if b.Route == "" && b.Gen != 0 {
		return RouteBinding{}, fmt.Errorf("a route generation without a route (set --route or %s)", EnvRoute)
	}
	return b, nil
}

// routeOfProcess is the route binding hooks and the MCP proxy put in
// every grant request: WRIT_ROUTE and WRIT_ROUTE_GEN, as worker-agent
// cron sets them for its command. A generation that does not parse binds
// a generation no lease ever has, so that the issuer refuses the work
// rather than letting it run unbound.
func routeOfProcess() RouteBinding {
	b, err := RouteFromEnv("", 0)
	if err != nil {
		return RouteBinding{Route: os.Getenv(EnvRoute), Gen: math.MaxUint64}
	}
	return b
}

// Env returns the environment entries that pass b to a child process.
func (b RouteBinding) Env() []string {
	return []string{EnvRoute + "=" + b.Route, EnvRouteGen + "=" + strconv.FormatUint(b.Gen, 10)}
}
