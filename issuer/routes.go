package issuer

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Route leases: a worker's route request (api.RouteRequest) becomes an
// OpRouteAcquire, OpRouteRenew or OpRouteRelease in the caller's name; a
// status request is answered from this node's applied state without a
// proposal. The leader also records lapsed leases (OpRouteLapse) as it
// sees them, and from receipt format level 7 forgets route records free
// for fsm.RouteRetention (OpRouteForget), both in sweepLapses.

// routeCommand checks a decoded route request and builds its command.
// status reports a read-only request.
func routeCommand(worker string, data []byte) (cmd fsm.Command, status bool, rerr *requestError) {
	var r api.RouteRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, false, err
	}
	if err := policy.CheckRouteName(r.Route); err != nil {
		return fsm.Command{}, false, invalid("route", "%v", err)
	}
	if r.Lane != "" {
		if e := checkID("lane", r.Lane, true); e != nil {
			return fsm.Command{}, false, e
		}
	}
	if r.TTLMillis < 0 || r.TTLMillis > policy.MaxRouteTTL.Milliseconds() {
		return fsm.Command{}, false, invalid("ttl_ms", "must be between 0 and %d", policy.MaxRouteTTL.Milliseconds())
	}
	c := fsm.Command{Caller: worker, Route: r.Route, Lane: r.Lane, TTL: r.TTLMillis * int64(time.Millisecond), RouteGen: r.RouteGen}
	switch r.Action {
	case api.RouteAcquire:
		c.Op = fsm.OpRouteAcquire
	case api.RouteRenew:
		c.Op = fsm.OpRouteRenew
	case api.RouteRelease:
		c.Op = fsm.OpRouteRelease
	case api.RouteStatus:
		return c, true, nil
	default:
		return fsm.Command{}, false, invalid("action", "want acquire, renew, release or status, got %q", r.Action)
	}
	return c, false, nil
}

// routeStatus answers a status request: the route's lease as this node
// has applied it, at its wall clock (at least the control-plane clock).
func (s *Service) routeStatus(name string) grants.Envelope {
	var in fsm.RouteInfo
	var known bool
	var floor uint64
	s.node.View(func(st *fsm.State, _ uint64) {
		in, known = st.Route(name, max(st.Clock(), time.Now().UnixNano()))
		floor = st.RouteFloor()
	})
	if !known && floor > 0 {
		return grants.Envelope{Decision: grants.Permit, Route: name, Detail: fmt.Sprintf(
			"route %s has no record: never acquired, or forgotten a day after its last lease ended (acquired, it starts above generation %d)", name, floor)}
	}
	if !known {
		return grants.Envelope{Decision: grants.Permit, Route: name, Detail: "route " + name + " has never been acquired"}
	}
	env := grants.Envelope{Decision: grants.Permit, Route: in.Route, RouteGen: in.Gen, Owner: in.Owner,
		IssuedAt: in.Acquired, ExpiresAt: in.Expires}
	if in.Live {
		env.Detail = "held by " + in.Owner + " for another " + time.Duration(in.Left).Round(time.Millisecond).String()
	} else {
		env.Detail = "free: the lease of " + in.Owner + " " + in.Ended
	}
	return env
}

// sweepLapses proposes an OpRouteLapse for each lease this leader sees
// past its expiry without a lapse receipt, so that the stream records the
// lapse soon after it happens (the state machine has ended the lease on
// its own either way).
func (s *Service) sweepLapses() {
	if !s.node.IsLeader() {
		return
	}
	var lapsed, forgettable []string
	s.node.View(func(st *fsm.State, _ uint64) {
		if st.WritesRoutes() {
			now := max(st.Clock(), time.Now().UnixNano())
			lapsed = st.LapsedRoutes(now)
			forgettable = st.ForgettableRoutes(now) // empty below level 7
		}
	})
	for _, r := range lapsed {
		if _, err := s.node.ProposeWithin(s.cfg.CommitTimeout, fsm.Command{Op: fsm.OpRouteLapse, Caller: "issuer:" + s.node.ID(), Route: r}); err != nil {
			return
		}
	}
	// A record is forgotten only once its lapse has its receipt, so a
	// lapse proposed above is forgotten on a later sweep.
	for _, r := range forgettable {
		if _, err := s.node.ProposeWithin(s.cfg.CommitTimeout, fsm.Command{Op: fsm.OpRouteForget, Caller: "issuer:" + s.node.ID(), Route: r}); err != nil {
			return
		}
	}
}

func (s *Service) handleRoutes(m *nats.Msg) { s.spawn(m, routesHandler) }

// routes answers api.SubjectRoutes from the applied state.
func (s *Service) routes(m *nats.Msg) {
	var r api.RoutesRequest
	if err := decodeStrict(m.Data, &r); err != nil {
		s.respondJSON(m, api.Routes{Error: err.Error()})
		return
	}
	var out api.Routes
	s.node.View(func(st *fsm.State, _ uint64) { out = ListRoutes(st, time.Now().UnixNano()) })
	s.respondJSON(m, out)
}

// ListRoutes lists the state's routes as of wall-clock time wall (the
// control-plane clock if it is later).
func ListRoutes(st *fsm.State, wall int64) api.Routes {
	now := max(st.Clock(), wall)
	out := api.Routes{Clock: now, Routes: []api.RouteLease{}, GenerationFloor: st.RouteFloor()}
	for _, in := range st.Routes(now) {
		out.Routes = append(out.Routes, api.RouteLease{
			Route: in.Route, Generation: in.Gen, Owner: in.Owner, Lane: in.Lane, Live: in.Live,
			AcquiredAt: in.Acquired, ExpiresAt: in.Expires, LeftMillis: in.Left / int64(time.Millisecond),
			Ended: in.Ended, EndedAt: in.EndedAt,
		})
	}
	return out
}
