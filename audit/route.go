package audit

import (
	"github.com/writ-dev/writ/events"
)

// Route leases: the Verifier keeps each route's last lease as the stream
// tells it and checks that
//
//   - generations per route strictly increase (route_acquired and
//     route_taken name a generation above every earlier one);
//   - at most one owner is live at any sequence: an acquire comes only
//     after the previous lease ended (released, lapsed: its expiry
//     passed, or revoked), and a renewal, release or lapse names the
//     live lease's owner and generation;
//   - no attempt bound to a route generation is recorded after that
//     generation ended (taken over, released, revoked or lapsed);
//   - a route record is forgotten (route_forgotten, receipt format level
//     7) only once its lease ended, naming its last generation; the
//     Verifier then forgets it too and keeps the generation high-water
//     mark, and a route acquired with no record in view must name a
//     generation above the mark (a forgotten name never reuses one).
//
// An effect recorded as route_stale (reported after its generation
// ended) is no violation, but never counts as clean: Summary counts it
// under StaleEffects. A partial check starts knowing no lease, and checks
// a route only from its first acquire in view.

// lease is a route's last lease as the stream told it.
type lease struct {
	gen     uint64
	owner   string
	expires int64
	ended   bool // released or revoked (a lapse is expires passing)
}

func (l *lease) live(t int64) bool { return !l.ended && t < l.expires }

// route checks and folds one route event.
func (v *Verifier) route(e *events.Event) *Violation {
	if v.routes == nil {
		v.routes = make(map[string]*lease)
	}
	l := v.routes[e.Route]
	switch e.Kind {
	case events.KindRouteForgotten:
		switch {
		case l == nil && !v.partial:
			return violation(e.Seq, CodeRouteNotOwner, "route %s forgotten, never acquired", e.Route)
		case l != nil && (l.gen != e.RouteGen || l.live(e.Time)):
			return violation(e.Seq, CodeRouteNotOwner, "route %s forgotten at generation %d while its lease is %s's at generation %d (%s)",
				e.Route, e.RouteGen, l.owner, l.gen, leaseWords(l, e.Time))
		}
		delete(v.routes, e.Route)
		v.routeFloor = max(v.routeFloor, e.RouteGen)
		return nil
	case events.KindRouteAcquired, events.KindRouteTaken:
		if l == nil && e.RouteGen <= v.routeFloor {
			return violation(e.Seq, CodeRouteGeneration, "route %s acquired at generation %d, not above the generation high-water mark %d of forgotten routes",
				e.Route, e.RouteGen, v.routeFloor)
		}
		if l != nil {
			if e.RouteGen <= l.gen {
				return violation(e.Seq, CodeRouteGeneration, "route %s: generation %d after generation %d", e.Route, e.RouteGen, l.gen)
			}
			if l.live(e.Time) {
				return violation(e.Seq, CodeRouteDoubleOwner, "route %s acquired by %s while %s's lease at generation %d is live until %s",
					e.Route, e.Worker, l.owner, l.gen, ts(l.expires))
			}
		}
		v.routes[e.Route] = &lease{gen: e.RouteGen, owner: e.Worker, expires: e.ExpiresAt}
	case events.KindRouteRenewed, events.KindRouteReleased, events.KindRouteLapsed:
		if l == nil {
			if !v.partial {
				return violation(e.Seq, CodeRouteNotOwner, "route %s: %s of a lease never acquired", e.Route, e.Kind)
			}
			return nil
		}
		if l.gen != e.RouteGen || l.owner != e.Worker {
			return violation(e.Seq, CodeRouteNotOwner, "route %s: %s names %s at generation %d, the lease is %s's at generation %d",
				e.Route, e.Kind, e.Worker, e.RouteGen, l.owner, l.gen)
		}
		switch e.Kind {
		case events.KindRouteRenewed:
			if !l.live(e.Time) {
				return violation(e.Seq, CodeRouteNotOwner, "route %s: renewal of generation %d after the lease ended", e.Route, l.gen)
			}
			l.expires = e.ExpiresAt
		case events.KindRouteReleased:
			if !l.live(e.Time) {
				return violation(e.Seq, CodeRouteNotOwner, "route %s: release of generation %d after the lease ended", e.Route, l.gen)
			}
			l.ended = true
		case events.KindRouteLapsed:
			if e.Time < l.expires || l.ended {
				return violation(e.Seq, CodeRouteNotOwner, "route %s: lapse of generation %d before its expiry %s or after it ended", e.Route, l.gen, ts(l.expires))
			}
		}
	}
	return nil
}

// revokeRoutes ends the leases a revocation lists.
func (v *Verifier) revokeRoutes(e *events.Event) {
	for _, r := range e.Routes {
		if l := v.routes[r]; l != nil {
			l.ended = true
		}
	}
}

// routeAttempt checks an attempt bound to a route generation.
func (v *Verifier) routeAttempt(e *events.Event) *Violation {
	if e.Route == "" {
		return nil
	}
	l := v.routes[e.Route]
	if l == nil {
		if v.partial {
			return nil
		}
		return violation(e.Seq, CodeAttemptAfterRouteEnded, "attempt under route %s generation %d, which was never acquired", e.Route, e.RouteGen)
	}
	if l.gen != e.RouteGen || l.owner != e.Worker || !l.live(e.Time) {
		return violation(e.Seq, CodeAttemptAfterRouteEnded, "attempt under route %s generation %d; the route's lease is %s's at generation %d (%s)",
			e.Route, e.RouteGen, l.owner, l.gen, leaseWords(l, e.Time))
	}
	return nil
}

func leaseWords(l *lease, t int64) string {
	switch {
	case l.ended:
		return "ended"
	case t >= l.expires:
		return "lapsed at " + ts(l.expires)
	}
	return "live until " + ts(l.expires)
}
