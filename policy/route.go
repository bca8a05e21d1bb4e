package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/lanes"
)

// Routes (version 2 documents): a route is a named unit of recurring
// work, such as "inbox-triage@acme" or "nightly-backup", that at most one
// worker owns at a time under a lease (see fsm). The document declares
// which routes exist, by name or glob pattern, who may own them (worker
// patterns or lanes), how long one lease may last, and which consequence
// classes work done under the route may spend. A route no entry declares
// cannot be acquired.
//
// The first entry whose name matches decides; an entry that matches the
// route but not the worker refuses it (a later, broader entry does not
// widen it).

// Route declares one route or a family of routes.
type Route struct {
	// Name is a route name or a glob pattern over names ("inbox-*@acme").
	Name string `json:"name"`
	// Workers and Lanes say who may own it: a worker whose id matches one
	// of Workers, or whose lane (as the request names it, and pinned if
	// the document pins the worker) is one of Lanes. At least one of the
	// two is required.
	Workers []string `json:"workers,omitempty"`
	Lanes   []string `json:"lanes,omitempty"`
	// MaxTTL bounds one lease (and each renewal's extension); omitted,
	// DefaultRouteTTL. At most MaxRouteTTL.
	MaxTTL Duration `json:"max_ttl,omitempty"`
	// Consequences are the consequence classes work under the route may
	// spend, on top of what the lane allows; omitted, local_read only;
	// "*" for every class the lane allows.
	Consequences []string `json:"consequences,omitempty"`
	// MaxRecords caps the route records the entry's routes hold at once
	// (live leases and ended ones not yet forgotten, fsm.RouteRetention):
	// acquiring a route with no record beyond it is refused route_limit.
	// 0: no cap. Enforced from receipt format level 7.
	MaxRecords int `json:"max_records,omitempty"`
}

// Lease bounds.
const (
	// DefaultRouteTTL is a route's lease bound when its entry names none.
	DefaultRouteTTL = time.Minute
	// MaxRouteTTL is the longest lease any entry may allow.
	MaxRouteTTL = time.Hour
	// MinRouteTTL is the shortest lease granted, whatever is asked.
	MinRouteTTL = time.Second
	// MaxRouteName is the longest route name, in bytes.
	MaxRouteName = api.MaxRouteLen
	// MaxRouteRecords is the largest max_records an entry may declare.
	MaxRouteRecords = 1_000_000
)

// RouteGrant is what the policy allows an owner of one route.
type RouteGrant struct {
	Rule    string // "routes[i]" of the entry that declared it
	Pattern string
	MaxTTL  int64 // ns
	// MaxRecords is the entry's cap on route records (0: none); Entry is
	// its index, for RouteEntry.
	MaxRecords int
	Entry      int
	classes    [nClasses]bool
}

// Allows reports whether work under the route may spend consequence
// class c. A call the engine classified under no class ("") is allowed.
func (g RouteGrant) Allows(c string) bool {
	if c == "" {
		return true
	}
	i := classIndex(c)
	return i >= 0 && g.classes[i]
}

// Classes lists the consequence classes the route allows, in the fixed
// order of Consequences.
func (g RouteGrant) Classes() []string {
	var out []string
	for i, ok := range g.classes {
		if ok {
			out = append(out, Consequences[i])
		}
	}
	return out
}

type cRoute struct {
	name    lanes.Glob
	workers []lanes.Glob
	lanes   []string
	grant   RouteGrant
}

// CheckRouteName reports whether name can name a route: 1 to MaxRouteName
// bytes of letters, digits and . _ - @ : / (api.ValidRoute, which workers
// check with too).
func CheckRouteName(name string) error { return api.ValidRoute(name) }

func (c *compiled) compileRoutes(p *Policy) error {
	if len(p.Routes) > maxEntries {
		return invalid("routes", "more than %d entries", maxEntries)
	}
	var ps problems
	for i, r := range p.Routes {
		f := fmt.Sprintf("routes[%d]", i)
		bad := len(ps.list) + ps.more
		name, err := lanes.CompileGlob(r.Name)
		if err != nil || r.Name == "" {
			ps.add(invalid(f+".name", "a route name or pattern is required"))
		} else if err := CheckRouteName(strings.ReplaceAll(strings.ReplaceAll(r.Name, "*", "x"), "?", "x")); err != nil {
			ps.add(invalid(f+".name", "%v", err))
		}
		if len(r.Workers) == 0 && len(r.Lanes) == 0 {
			ps.add(invalid(f, "name the workers or lanes that may own the route"))
		}
		workers, err := globs(f+".workers", r.Workers, nil)
		ps.add(err)
		for j, l := range r.Lanes {
			if _, ok := p.Lanes[l]; !ok {
				ps.add(invalid(fmt.Sprintf("%s.lanes[%d]", f, j), "lane %q is not declared in lanes", l))
			}
		}
		ttl := time.Duration(r.MaxTTL)
		switch {
		case ttl == 0:
			ttl = DefaultRouteTTL
		case ttl < MinRouteTTL || ttl > MaxRouteTTL:
			ps.add(invalid(f+".max_ttl", "want %s to %s, got %s", MinRouteTTL, MaxRouteTTL, ttl))
		}
		cls := r.Consequences
		if len(cls) == 0 {
			cls = []string{"local_read"}
		}
		classes, err := classSet(f+".consequences", cls)
		ps.add(err)
		if r.MaxRecords < 0 || r.MaxRecords > MaxRouteRecords {
			ps.add(invalid(f+".max_records", "want 0 (no cap) to %d, got %d", MaxRouteRecords, r.MaxRecords))
		}
		if len(ps.list)+ps.more != bad {
			continue
		}
		c.routes = append(c.routes, cRoute{
			name: name, workers: workers, lanes: slices.Clone(r.Lanes),
			grant: RouteGrant{Rule: f, Pattern: r.Name, MaxTTL: int64(ttl), MaxRecords: r.MaxRecords, Entry: i, classes: classes},
		})
	}
	return ps.err()
}

// RouteFor judges whether worker, in lane, may own route. It returns what
// the owner may do under it, or a refusal detail that says why not: the
// route is not declared (no entry matches it, or the policy is a version
// 1 document, which declares none), or its entry does not name the
// worker or its lane.
func (p *Policy) RouteFor(route, worker, lane string) (RouteGrant, string, bool) {
	if err := CheckRouteName(route); err != nil {
		return RouteGrant{}, err.Error(), false
	}
	if p.c == nil {
		return RouteGrant{}, "route " + route + " is not declared: the policy in force is a version 1 document, which declares no routes", false
	}
	for _, r := range p.c.routes {
		if !r.name.Match(route) {
			continue
		}
		if pinned, ok := p.Workers[worker]; ok && lane != "" && pinned != lane {
			return RouteGrant{}, fmt.Sprintf("worker %s is pinned to lane %s, not %s", worker, pinned, lane), false
		}
		if anyMatch(r.workers, worker) || (lane != "" && slices.Contains(r.lanes, lane)) {
			return r.grant, "", true
		}
		return RouteGrant{}, fmt.Sprintf("route %s is declared by %s (%s) for other owners: worker %s in lane %q may not own it",
			route, r.grant.Rule, r.grant.Pattern, worker, lane), false
	}
	return RouteGrant{}, "route " + route + " is not declared in the policy's routes", false
}

// RouteEntry returns the index of the entry that decides route (the first
// whose name matches), or -1.
func (p *Policy) RouteEntry(route string) int {
	if p.c == nil {
		return -1
	}
	for _, r := range p.c.routes {
		if r.name.Match(route) {
			return r.grant.Entry
		}
	}
	return -1
}

// HasRoutes reports whether the document declares any route.
func (p *Policy) HasRoutes() bool { return p.c != nil && len(p.c.routes) > 0 }
