package fsm

import (
	"fmt"
	"sort"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Route ownership leases. A route is a named unit of recurring work
// ("inbox-triage@acme", "nightly-backup") that the policy declares; at
// most one worker owns it at a time, under a lease:
//
//   - OpRouteAcquire gives the caller a lease on a free route: a fencing
//     generation (per route, strictly increasing, never reused: the route
//     record is kept in snapshots and the digest, and from level 7 a
//     forgotten one leaves the high-water mark, below) and an expiry
//     on the control-plane clock (the asked TTL, at most the route's
//     max_ttl). Receipt route_acquired, or route_taken when the previous
//     lease ended without a release (it lapsed, or a revocation ended it),
//     naming the previous owner and generation. A route another worker
//     holds is refused route_held (owner, generation, time left).
//   - OpRouteRenew, by the owner, moves the expiry to now+TTL (at most
//     max_ttl): route_renewed whenever the expiry moves, so every renewal
//     that extended a lease is in the stream.
//   - OpRouteRelease, by the owner, ends the lease: route_released.
//   - Lapse: a lease whose expiry the clock reaches ends in the state
//     machine through an expiry item (as a grant is forgotten), with no
//     command; Decide judges a lease past its expiry as lapsed whether or
//     not an event has moved the clock that far yet. OpRouteLapse (the
//     leader proposes it when it sees a lapsed lease) records the lapse
//     as a route_lapsed receipt, once per lease.
//   - A worker revocation ends the worker's leases in the same event
//     (events.Event.Routes).
//
// Work under a route: a grant request naming a route (Command.Route) is
// permitted only to the live owner at the generation it names (0: the
// current one), for the consequence classes the route allows; the grant
// binds route and generation, and its spend is refused owner_stale once
// that generation ended (taken over, released, revoked or lapsed). An
// effect reported for such a grant after its generation ended is
// recorded, flagged route_stale.
//
// Every route op is refused below receipt format level 5, as is a grant
// request naming a route.
//
// Retention (receipt format level 7, ReceiptFormatRouteRetention): a
// route record whose lease has been free (released, revoked, or lapsed
// with its route_lapsed receipt written) for RouteRetention on the
// control-plane clock is forgotten by OpRouteForget (the leader proposes
// it): receipt route_forgotten, naming the record's last generation. The
// state keeps one number for every forgotten record, the generation
// high-water mark (routeFloor, the highest generation forgotten), and a
// route with no record is acquired at routeFloor+1: a name re-created
// after its record was forgotten starts above every generation it ever
// had, so generations per name stay strictly increasing and are never
// reused, through snapshots (section stRouteFloor) and replays alike.
// A pattern route therefore holds at most the records of the leases live
// or ended within the retention, not one per name ever used; a policy
// entry's max_records caps them outright (a name with no record is
// refused route_limit while the entry holds that many). Below level 7 the
// op is refused, no cap applies and the mark stays 0: route 1 is
// acquired at 1, as before.

// RouteRetention is how long a free route record is kept (from the end of
// its last lease) before the leader may forget it, from receipt format
// level 7: long enough for `issuer route list` to show yesterday's
// releases and lapses.
const RouteRetention = 24 * time.Hour

// maxForgetSweep bounds the records one ForgettableRoutes call names.
const maxForgetSweep = 256

// Route lease ends (route.End).
const (
	endLive     = ""
	endReleased = "released"
	endLapsed   = "lapsed"
	endRevoked  = "revoked"
)

// route is one route's record: its last lease (live or ended).
type route struct {
	Name     string
	Gen      uint64 // the lease's generation: the highest ever issued
	Owner    string
	Lane     string
	Acquired int64 // when the lease began
	Expires  int64 // the lease's expiry (its last renewal's)
	Seq      uint64
	End      string // endLive while live
	EndedAt  int64
	// Noted says a route_lapsed receipt recorded this lease's lapse.
	Noted bool
}

// live reports whether the lease is live at control-plane time now.
func (r *route) live(now int64) bool { return r.End == endLive && now < r.Expires }

// ended returns how the lease ended by time now ("" if it is live).
func (r *route) ended(now int64) string {
	if r.End == endLive && now >= r.Expires {
		return endLapsed
	}
	return r.End
}

// RouteInfo is one route as queries report it.
type RouteInfo struct {
	Route    string `json:"route"`
	Gen      uint64 `json:"generation"`
	Owner    string `json:"owner,omitempty"` // the live owner, or the last one
	Lane     string `json:"lane,omitempty"`
	Live     bool   `json:"live"`
	Acquired int64  `json:"acquired_at,omitempty"`
	Expires  int64  `json:"expires_at,omitempty"`
	Left     int64  `json:"left_ns,omitempty"` // time left on a live lease at the clock asked
	Ended    string `json:"ended,omitempty"`   // released, lapsed or revoked
	EndedAt  int64  `json:"ended_at,omitempty"`
}

// Routes lists every route the state knows, by name, as of control-plane
// time now.
func (s *State) Routes(now int64) []RouteInfo {
	names := make([]string, 0, len(s.routes))
	for n := range s.routes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]RouteInfo, 0, len(names))
	for _, n := range names {
		out = append(out, s.routeInfo(s.routes[n], now))
	}
	return out
}

// Route reports one route as of control-plane time now.
func (s *State) Route(name string, now int64) (RouteInfo, bool) {
	r, ok := s.routes[name]
	if !ok {
		return RouteInfo{Route: name}, false
	}
	return s.routeInfo(r, now), true
}

func (s *State) routeInfo(r *route, now int64) RouteInfo {
	in := RouteInfo{Route: r.Name, Gen: r.Gen, Owner: r.Owner, Lane: r.Lane, Acquired: r.Acquired, Expires: r.Expires}
	if r.live(now) {
		in.Live, in.Left = true, r.Expires-now
		return in
	}
	in.Ended = r.ended(now)
	in.EndedAt = r.EndedAt
	if in.Ended == endLapsed && r.End == endLive {
		in.EndedAt = r.Expires
	}
	return in
}

// LapsedRoutes lists, by name, the routes whose lease has lapsed by
// control-plane time now without a route_lapsed receipt yet: what the
// leader proposes OpRouteLapse for.
func (s *State) LapsedRoutes(now int64) []string {
	var out []string
	for n, r := range s.routes {
		if r.ended(now) == endLapsed && !r.Noted {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// WritesRoutes reports whether route ops are decided at the level in
// force.
func (s *State) WritesRoutes() bool { return s.ReceiptFormat() >= ReceiptFormatRoutes }

func (s *State) routesBelowLevel() grants.Envelope {
	return grants.Refuse(grants.ReasonUnknownVersion, "receipt format 5",
		fmt.Sprintf("route leases are recorded from receipt format level %d; the cluster writes level %d (a voter's build predates route leases)",
			ReceiptFormatRoutes, s.ReceiptFormat()))
}

func routeEnvelope(r grants.Reason, route string, gen uint64, detail string) grants.Envelope {
	env := grants.Refuse(r, "route "+route, detail)
	env.Route, env.RouteGen = route, gen
	return env
}

// leaseEnvelope answers with the lease as it stands (no receipt).
func leaseEnvelope(r *route, detail string) grants.Envelope {
	return grants.Envelope{
		Decision: grants.Permit, Route: r.Name, RouteGen: r.Gen, Owner: r.Owner,
		IssuedAt: r.Acquired, ExpiresAt: r.Expires, Seq: r.Seq, Detail: detail,
	}
}

func fmtLeft(d int64) string { return time.Duration(d).Round(time.Millisecond).String() }

func fmtTime(t int64) string { return time.Unix(0, t).UTC().Format(time.RFC3339Nano) }

// routeGrant checks the policy declares the route for the caller and
// returns the lease TTL the request gets (the asked one, at most the
// route's max_ttl, at least policy.MinRouteTTL).
func (s *State) routeGrant(c *Command) (policy.RouteGrant, int64, *grants.Envelope) {
	switch {
	case c.Caller == "" || c.Route == "":
		env := grants.Refuse(grants.ReasonInvalidRequest, "caller and route", "a route op names the caller and the route")
		return policy.RouteGrant{}, 0, &env
	case c.TTL < 0:
		env := grants.Refuse(grants.ReasonInvalidRequest, "ttl", "ttl must not be negative")
		return policy.RouteGrant{}, 0, &env
	case policy.CheckRouteName(c.Route) != nil:
		env := grants.Refuse(grants.ReasonInvalidRequest, "route", policy.CheckRouteName(c.Route).Error())
		return policy.RouteGrant{}, 0, &env
	case s.barred[c.Caller]:
		env := grants.Refuse(grants.ReasonWorkerRevoked, "worker reinstated", "worker "+c.Caller+" is revoked")
		return policy.RouteGrant{}, 0, &env
	case s.policy == nil:
		env := routeEnvelope(grants.ReasonUndeclaredRoute, c.Route, 0, "no policy has been applied yet")
		return policy.RouteGrant{}, 0, &env
	}
	g, detail, ok := s.policy.RouteFor(c.Route, c.Caller, c.Lane)
	if !ok {
		env := routeEnvelope(grants.ReasonUndeclaredRoute, c.Route, 0, detail)
		return g, 0, &env
	}
	ttl := g.MaxTTL
	if c.TTL > 0 && c.TTL < ttl {
		ttl = c.TTL
	}
	ttl = max(ttl, int64(policy.MinRouteTTL))
	return g, ttl, nil
}

func routeEvent(kind events.Kind, now int64, node string, c *Command, r string, gen uint64) events.Event {
	e := base(kind, now, node, c)
	e.Decision = string(grants.Permit)
	e.Route, e.RouteGen = r, gen
	return e
}

func decideRouteAcquire(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesRoutes() {
		return reply(s.routesBelowLevel())
	}
	g, ttl, refusal := s.routeGrant(c)
	if refusal != nil {
		return reply(*refusal)
	}
	r := s.routes[c.Route]
	if r == nil && g.MaxRecords > 0 && s.WritesRouteRetention() {
		if n := s.routeRecordsOf(g.Entry); n >= g.MaxRecords {
			return reply(routeEnvelope(grants.ReasonRouteLimit, c.Route, 0, fmt.Sprintf(
				"%s (%s) holds %d route records, at or past its max_records %d: a free record is forgotten %s after its lease ended, or raise max_records",
				g.Rule, g.Pattern, n, g.MaxRecords, RouteRetention)))
		}
	}
	if r != nil && r.live(now) {
		if r.Owner == c.Caller {
			// Acquiring a route one holds answers with the lease as it
			// stands: renewing is a renewal's business.
			return reply(leaseEnvelope(r, "already the owner of "+r.Name+"; renew to extend the lease"))
		}
		return reply(routeEnvelope(grants.ReasonRouteHeld, c.Route, r.Gen, fmt.Sprintf(
			"route %s is held by %s at generation %d for another %s (until %s)",
			r.Name, r.Owner, r.Gen, fmtLeft(r.Expires-now), fmtTime(r.Expires))))
	}
	// A route with no record (never acquired, or forgotten) starts above
	// the generation high-water mark (0 below format level 7).
	gen := s.routeFloor + 1
	kind := events.KindRouteAcquired
	if r != nil {
		gen = r.Gen + 1
	}
	e := routeEvent(kind, now, node, c, c.Route, gen)
	e.Worker, e.Lane = c.Caller, c.Lane
	e.IssuedAt, e.ExpiresAt = now, AddSat(now, ttl)
	if r != nil {
		if end := r.ended(now); end == endLapsed || end == endRevoked {
			e.Kind = events.KindRouteTaken
			e.PrevOwner, e.PrevGen = r.Owner, r.Gen
			e.Detail = fmt.Sprintf("took over route %s: the lease of %s at generation %d %s", r.Name, r.Owner, r.Gen, end)
		}
	}
	return record(e)
}

// ownedLease returns the caller's live lease on c.Route, or the refusal:
// not_owner when the caller never held it or holds no lease at the
// generation it named, owner_stale when its own lease ended (the detail
// names its generation and the route's).
func (s *State) ownedLease(now int64, c *Command) (*route, *grants.Envelope) {
	r := s.routes[c.Route]
	refuse := func(reason grants.Reason, gen uint64, detail string) (*route, *grants.Envelope) {
		env := routeEnvelope(reason, c.Route, gen, detail)
		return nil, &env
	}
	switch {
	case r == nil && s.routeFloor > 0:
		// Only from level 7: a record may have been forgotten.
		return refuse(grants.ReasonNotOwner, 0, fmt.Sprintf(
			"route %s has no record: never acquired, or forgotten %s after its last lease ended (acquired, it starts above generation %d)",
			c.Route, RouteRetention, s.routeFloor))
	case r == nil:
		return refuse(grants.ReasonNotOwner, 0, "route "+c.Route+" has never been acquired")
	case r.Owner == c.Caller && (c.RouteGen == 0 || c.RouteGen == r.Gen) && r.live(now):
		return r, nil
	case r.Owner == c.Caller && r.live(now) && c.RouteGen > r.Gen:
		return refuse(grants.ReasonNotOwner, r.Gen, fmt.Sprintf(
			"route %s has never reached generation %d: the live lease of %s is at generation %d", r.Name, c.RouteGen, c.Caller, r.Gen))
	case c.RouteGen != 0 && c.RouteGen < r.Gen:
		return refuse(grants.ReasonOwnerStale, r.Gen, fmt.Sprintf(
			"generation %d of route %s ended; the route is at generation %d (%s)", c.RouteGen, r.Name, r.Gen, s.leaseState(r, now)))
	case r.Owner == c.Caller && (c.RouteGen == 0 || c.RouteGen == r.Gen):
		end := r.ended(now)
		at := r.EndedAt
		if r.End == endLive {
			at = r.Expires
		}
		return refuse(grants.ReasonOwnerStale, r.Gen, fmt.Sprintf(
			"the lease of %s on route %s at generation %d %s at %s", c.Caller, r.Name, r.Gen, end, fmtTime(at)))
	}
	return refuse(grants.ReasonNotOwner, r.Gen, fmt.Sprintf("%s holds no lease on route %s (%s)", c.Caller, r.Name, s.leaseState(r, now)))
}

// leaseState words a route's lease for a refusal's detail.
func (s *State) leaseState(r *route, now int64) string {
	if r.live(now) {
		return fmt.Sprintf("held by %s at generation %d for another %s", r.Owner, r.Gen, fmtLeft(r.Expires-now))
	}
	return fmt.Sprintf("free: generation %d of %s %s", r.Gen, r.Owner, r.ended(now))
}

func decideRouteRenew(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesRoutes() {
		return reply(s.routesBelowLevel())
	}
	_, ttl, refusal := s.routeGrant(c)
	if refusal != nil {
		return reply(*refusal)
	}
	r, refusal := s.ownedLease(now, c)
	if refusal != nil {
		return reply(*refusal)
	}
	until := AddSat(now, ttl)
	if until <= r.Expires {
		return reply(leaseEnvelope(r, "the lease already runs until "+fmtTime(r.Expires)))
	}
	e := routeEvent(events.KindRouteRenewed, now, node, c, r.Name, r.Gen)
	e.Worker, e.Lane = r.Owner, r.Lane
	e.IssuedAt, e.ExpiresAt = r.Acquired, until
	return record(e)
}

func decideRouteRelease(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesRoutes() {
		return reply(s.routesBelowLevel())
	}
	if c.Caller == "" || c.Route == "" {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "caller and route", "a route op names the caller and the route"))
	}
	r, refusal := s.ownedLease(now, c)
	if refusal != nil {
		return reply(*refusal)
	}
	e := routeEvent(events.KindRouteReleased, now, node, c, r.Name, r.Gen)
	e.Worker, e.Lane = r.Owner, r.Lane
	e.IssuedAt = r.Acquired
	return record(e)
}

// decideRouteLapse records the lapse of c.Route's lease, once: a route
// whose lease is live, released, revoked or already recorded as lapsed
// is answered without a receipt.
func decideRouteLapse(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesRoutes() {
		return reply(s.routesBelowLevel())
	}
	r := s.routes[c.Route]
	if r == nil || r.ended(now) != endLapsed || r.Noted {
		return reply(grants.Envelope{Decision: grants.Permit, Route: c.Route, Detail: "no unrecorded lapse on route " + c.Route})
	}
	e := routeEvent(events.KindRouteLapsed, now, node, c, r.Name, r.Gen)
	e.Worker, e.Lane = r.Owner, r.Lane
	e.IssuedAt, e.ExpiresAt = r.Acquired, r.Expires
	e.Detail = fmt.Sprintf("the lease of %s at generation %d lapsed at %s", r.Owner, r.Gen, fmtTime(r.Expires))
	return record(e)
}

// routeRecordsOf counts the route records the policy entry entry decides
// (live leases and ended ones not yet forgotten).
func (s *State) routeRecordsOf(entry int) int {
	n := 0
	for name := range s.routes {
		if s.policy.RouteEntry(name) == entry {
			n++
		}
	}
	return n
}

// WritesRouteRetention reports whether free route records are forgotten
// (OpRouteForget) at the level in force.
func (s *State) WritesRouteRetention() bool {
	return s.ReceiptFormat() >= ReceiptFormatRouteRetention
}

// RouteFloor is the generation high-water mark: the highest generation of
// any forgotten route record (0 if none was).
func (s *State) RouteFloor() uint64 { return s.routeFloor }

// freeSince reports when r's lease ended, as of time now, and whether the
// record may be forgotten once RouteRetention has passed since: the lease
// is not live, and a lapse has its route_lapsed receipt.
func (r *route) freeSince(now int64) (int64, bool) {
	switch r.ended(now) {
	case endLive:
		return 0, false
	case endLapsed:
		return r.Expires, r.Noted
	}
	return r.EndedAt, true
}

// forgettable reports whether r may be forgotten at time now.
func (r *route) forgettable(now int64) bool {
	at, ok := r.freeSince(now)
	return ok && now >= AddSat(at, int64(RouteRetention))
}

// ForgettableRoutes lists, by name, at most maxForgetSweep routes whose
// record may be forgotten at control-plane time now: what the leader
// proposes OpRouteForget for. Empty below format level 7.
func (s *State) ForgettableRoutes(now int64) []string {
	if !s.WritesRouteRetention() {
		return nil
	}
	var out []string
	for n, r := range s.routes {
		if r.forgettable(now) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if len(out) > maxForgetSweep {
		out = out[:maxForgetSweep]
	}
	return out
}

// decideRouteForget forgets c.Route's record once its lease has been free
// for RouteRetention; a route with no record, a live lease, or one not
// free for that long yet is answered without a receipt.
func decideRouteForget(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesRouteRetention() {
		return reply(grants.Refuse(grants.ReasonUnknownVersion, "receipt format 7",
			fmt.Sprintf("route records are forgotten from receipt format level %d; the cluster writes level %d (a voter's build predates route retention)",
				ReceiptFormatRouteRetention, s.ReceiptFormat())))
	}
	r := s.routes[c.Route]
	if r == nil || !r.forgettable(now) {
		return reply(grants.Envelope{Decision: grants.Permit, Route: c.Route, Detail: "nothing to forget on route " + c.Route})
	}
	at, _ := r.freeSince(now)
	e := routeEvent(events.KindRouteForgotten, now, node, c, r.Name, r.Gen)
	e.Worker, e.Lane = r.Owner, r.Lane
	e.IssuedAt, e.ExpiresAt = r.Acquired, r.Expires
	e.Detail = fmt.Sprintf("forgot route %s: generation %d of %s ended (%s) at %s; acquired again, it starts above generation %d",
		r.Name, r.Gen, r.Owner, r.ended(now), fmtTime(at), max(s.routeFloor, r.Gen))
	return record(e)
}

// evolveRoute folds a route event.
func (s *State) evolveRoute(e *events.Event) {
	s.touchRoute(e.Route)
	r := s.routes[e.Route]
	switch e.Kind {
	case events.KindRouteAcquired, events.KindRouteTaken:
		if r == nil {
			r = &route{Name: e.Route}
			s.routes[e.Route] = r
		}
		*r = route{
			Name: r.Name, Gen: max(r.Gen, e.RouteGen), Owner: s.intern.str(e.Worker), Lane: s.intern.str(e.Lane),
			Acquired: e.IssuedAt, Expires: e.ExpiresAt, Seq: e.Seq,
		}
		s.scheduleRoute(r)
	case events.KindRouteRenewed:
		if r != nil && r.Gen == e.RouteGen && r.End == endLive {
			r.Expires, r.Seq = e.ExpiresAt, e.Seq
			s.scheduleRoute(r)
		}
	case events.KindRouteReleased:
		if r != nil && r.Gen == e.RouteGen && r.End == endLive {
			r.End, r.EndedAt = endReleased, e.Time
		}
	case events.KindRouteLapsed:
		if r != nil && r.Gen == e.RouteGen {
			if r.End == endLive {
				// The clock has reached the expiry, so prune ended the
				// lease already; a replayed stream may say it first.
				r.End, r.EndedAt = endLapsed, r.Expires
			}
			r.Noted = true
		}
	case events.KindRouteForgotten:
		if r != nil && r.Gen == e.RouteGen {
			delete(s.routes, e.Route)
		}
		// The mark covers the forgotten generation whatever the record
		// said, so that no later acquisition can reuse it.
		s.routeFloor = max(s.routeFloor, e.RouteGen)
	}
}

// routeItem is what a lease's expiry item refers to: the route and the
// lease's generation and expiry as scheduled.
type routeItem struct {
	Name    string
	Gen     uint64
	Expires int64
}

func (s *State) scheduleRoute(r *route) {
	s.schedule(r.Expires, r.Seq, expireRoute, &routeItem{Name: r.Name, Gen: r.Gen, Expires: r.Expires})
}

// pruneRoute ends the lease an expiry item names, if the route still holds
// that lease unchanged: live, at that generation, expiring at the item's
// time.
func (s *State) pruneRoute(it *routeItem, at int64) {
	if r := s.routes[it.Name]; r != nil && r.Gen == it.Gen && r.End == endLive && r.Expires == at {
		r.End, r.EndedAt = endLapsed, at
		s.touchRoute(r.Name)
	}
}

// endLeasesOf returns, sorted, the routes worker holds a live lease on at
// time now: what its revocation ends.
func (s *State) endLeasesOf(worker string, now int64) []string {
	var out []string
	for n, r := range s.routes {
		if r.Owner == worker && r.live(now) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// evolveRevokedRoutes ends the leases a revocation lists.
func (s *State) evolveRevokedRoutes(e *events.Event) {
	for _, n := range e.Routes {
		if r := s.routes[n]; r != nil && r.End == endLive {
			r.End, r.EndedAt = endRevoked, e.Time
			s.touchRoute(n)
		}
	}
}

// routeBinding judges a grant request made under a route: the caller must
// hold the live lease at the generation it names (0: the current one).
// It returns the generation to bind, or the refusal's reason and detail.
func (s *State) routeBinding(now int64, c *Command) (policy.RouteGrant, uint64, grants.Reason, string) {
	if !s.WritesRoutes() {
		env := s.routesBelowLevel()
		return policy.RouteGrant{}, 0, env.Reason, env.Detail
	}
	g, detail, ok := s.policy.RouteFor(c.Route, c.Caller, c.Lane)
	if !ok {
		return g, 0, grants.ReasonUndeclaredRoute, detail
	}
	r, refusal := s.ownedLease(now, c)
	if refusal != nil {
		return g, 0, refusal.Reason, refusal.Detail
	}
	return g, r.Gen, grants.ReasonNone, ""
}

// routeStale reports whether a grant bound to a route generation may no
// longer act at time now, and words why (naming both generations).
func (s *State) routeStale(g *grants.Grant, now int64) (bool, string) {
	if g.Route == "" {
		return false, ""
	}
	r := s.routes[g.Route]
	switch {
	case r == nil:
		return true, fmt.Sprintf("route %s has no lease (the grant bound generation %d)", g.Route, g.RouteGen)
	case r.Gen != g.RouteGen:
		return true, fmt.Sprintf("the grant bound generation %d of route %s; the route is at generation %d (%s)",
			g.RouteGen, g.Route, r.Gen, s.leaseState(r, now))
	case r.Owner != g.Worker || !r.live(now):
		at := r.EndedAt
		if r.End == endLive {
			at = r.Expires
		}
		return true, fmt.Sprintf("the grant bound generation %d of route %s, whose lease %s at %s (the route is at generation %d)",
			g.RouteGen, g.Route, r.ended(now), fmtTime(at), r.Gen)
	}
	return false, ""
}
