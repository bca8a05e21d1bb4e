package projection

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/events"
)

// How a route lease ended (Lease.End; "" while it is live as far as the
// stream has told).
const (
	LeaseReleased = "released"
	LeaseLapsed   = "lapsed"
	LeaseRevoked  = "revoked"
)

// Route is the projection of one route: its current (last) generation
// and owner, and every lease the stream recorded on it, oldest first.
type Route struct {
	Name  string `json:"route"`
	Gen   uint64 `json:"generation"`
	Owner string `json:"owner,omitempty"`
	Lane  string `json:"lane,omitempty"`
	// Expires is the last lease's expiry (control-plane clock); End says
	// how it ended, "" while no receipt has ended it (a lease past its
	// expiry has lapsed even before a route_lapsed receipt says so).
	Expires int64   `json:"expires_at,omitempty"`
	End     string  `json:"end,omitempty"`
	Leases  []Lease `json:"leases"`
	// Seqs is every receipt about the route, in order.
	Seqs []uint64 `json:"seqs,omitempty"`
}

// Lease is one generation of a route: who held it, from which receipt,
// its renewals, how and when it ended, and the grants bound to it.
type Lease struct {
	Gen        uint64 `json:"generation"`
	Owner      string `json:"owner"`
	Lane       string `json:"lane,omitempty"`
	AcquiredAt int64  `json:"acquired_at"`
	// AcquiredSeq is the route_acquired or route_taken receipt; a
	// take-over names the lease it replaced (PrevOwner, PrevGen).
	AcquiredSeq uint64   `json:"acquired_seq"`
	Taken       bool     `json:"taken,omitempty"`
	PrevOwner   string   `json:"prev_owner,omitempty"`
	PrevGen     uint64   `json:"prev_gen,omitempty"`
	Renewals    []uint64 `json:"renewals,omitempty"`
	Expires     int64    `json:"expires_at"`
	// End is how the lease ended (released, lapsed, revoked; "" while
	// live as far as the stream told), EndSeq the receipt that said so
	// (route_released, route_lapsed, the revoke, or the take-over that
	// named a lapse no route_lapsed receipt recorded) and EndedAt when.
	End     string   `json:"end,omitempty"`
	EndSeq  uint64   `json:"end_seq,omitempty"`
	EndedAt int64    `json:"ended_at,omitempty"`
	Grants  []string `json:"grants,omitempty"`
}

// Live reports whether the lease is live at control-plane time t as the
// stream tells it: not ended by a receipt, and t before its expiry.
func (l *Lease) Live(t int64) bool { return l.End == "" && t < l.Expires }

// Ended returns how the lease ended by time t, and when ("" and 0 if it
// is live): a lease past its expiry that no receipt ended has lapsed at
// its expiry.
func (l *Lease) Ended(t int64) (string, int64) {
	switch {
	case l.End != "":
		return l.End, l.EndedAt
	case t >= l.Expires:
		return LeaseLapsed, l.Expires
	}
	return "", 0
}

// Lease returns the lease of generation gen.
func (r *Route) Lease(gen uint64) (*Lease, bool) {
	for i := range r.Leases {
		if r.Leases[i].Gen == gen {
			return &r.Leases[i], true
		}
	}
	return nil, false
}

// indexRoute folds one route receipt into its route's record, one case
// per kind.
func indexRoute(tx *bbolt.Tx, e *events.Event) error {
	return updateRoute(tx, e.Route, func(r *Route) {
		r.Seqs = append(r.Seqs, e.Seq)
		l, _ := r.Lease(e.RouteGen)
		switch e.Kind {
		case events.KindRouteAcquired:
			r.Leases = append(r.Leases, Lease{Gen: e.RouteGen, Owner: e.Worker, Lane: e.Lane, AcquiredAt: e.Time,
				AcquiredSeq: e.Seq, Expires: e.ExpiresAt})
		case events.KindRouteTaken:
			// The lease taken over ended without a release: it lapsed
			// (perhaps with no route_lapsed receipt) or was revoked.
			if p, ok := r.Lease(e.PrevGen); ok && p.End == "" {
				p.End, p.EndSeq, p.EndedAt = LeaseLapsed, e.Seq, min(p.Expires, e.Time)
			}
			r.Leases = append(r.Leases, Lease{Gen: e.RouteGen, Owner: e.Worker, Lane: e.Lane, AcquiredAt: e.Time,
				AcquiredSeq: e.Seq, Taken: true, PrevOwner: e.PrevOwner, PrevGen: e.PrevGen, Expires: e.ExpiresAt})
		case events.KindRouteRenewed:
			if l != nil {
				l.Renewals = append(l.Renewals, e.Seq)
				l.Expires = e.ExpiresAt
			}
		case events.KindRouteReleased:
			if l != nil {
				l.End, l.EndSeq, l.EndedAt = LeaseReleased, e.Seq, e.Time
			}
		case events.KindRouteLapsed:
			if l != nil {
				l.End, l.EndSeq, l.EndedAt = LeaseLapsed, e.Seq, l.Expires
			}
		case events.KindRouteForgotten:
			// The issuer forgot its record (the lease ended a retention
			// ago); the projection keeps the history, with the receipt.
		}
		r.current()
	})
}

// indexRevokedRoutes ends the leases a revocation lists.
func indexRevokedRoutes(tx *bbolt.Tx, e *events.Event) error {
	for _, name := range e.Routes {
		if tx.Bucket(bRoutes).Get([]byte(name)) == nil {
			continue // a lease the projection never saw begin
		}
		err := updateRoute(tx, name, func(r *Route) {
			r.Seqs = append(r.Seqs, e.Seq)
			if n := len(r.Leases); n > 0 && r.Leases[n-1].End == "" {
				l := &r.Leases[n-1]
				l.End, l.EndSeq, l.EndedAt = LeaseRevoked, e.Seq, e.Time
			}
			r.current()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// bindRoute records a grant bound to a route generation in its lease.
func bindRoute(tx *bbolt.Tx, e *events.Event) error {
	return updateRoute(tx, e.Route, func(r *Route) {
		if l, ok := r.Lease(e.RouteGen); ok && !slices.Contains(l.Grants, e.GrantID) {
			l.Grants = append(l.Grants, e.GrantID)
		}
	})
}

// current copies the last lease into the route's summary fields.
func (r *Route) current() {
	if n := len(r.Leases); n > 0 {
		l := &r.Leases[n-1]
		r.Gen, r.Owner, r.Lane, r.Expires, r.End = l.Gen, l.Owner, l.Lane, l.Expires, l.End
	}
}

func updateRoute(tx *bbolt.Tx, name string, f func(*Route)) error {
	if name == "" {
		return nil
	}
	b := tx.Bucket(bRoutes)
	r := Route{Name: name}
	if v := b.Get([]byte(name)); v != nil {
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
	}
	f(&r)
	return putJSON(b, []byte(name), &r)
}

// Route returns the record of route name.
func (d *DB) Route(name string) (Route, error) {
	var r Route
	err := d.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bRoutes).Get([]byte(name))
		if v == nil {
			return ErrNotFound
		}
		return unmarshal(v, &r)
	})
	return r, err
}

// Routes lists every route, by name.
func (d *DB) Routes() ([]Route, error) {
	var out []Route
	err := d.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bRoutes).ForEach(func(_, v []byte) error {
			var r Route
			if err := unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

// How a grant's route generation stood against its attempt
// (RouteBinding.Relation).
const (
	RouteLive         = "live"
	RouteEndedBefore  = "ended_before_attempt"
	RouteEndedAfter   = "ended_after_attempt"
	RouteEndedUnspent = "ended_unspent"
	RouteNotProjected = "not_in_projection"
)

// RouteBinding is a grant's route generation in an explanation: the
// lease it bound, how and when that generation ended (Ended "" while
// live at the projection's head; EndSeq the receipt that ended it, 0 for
// a lapse no receipt has recorded yet) and whether it ended before or
// after the grant's attempt.
type RouteBinding struct {
	Route    string      `json:"route"`
	Gen      uint64      `json:"route_gen"`
	Lease    *Lease      `json:"lease,omitempty"`
	Ended    string      `json:"ended,omitempty"`
	EndSeq   uint64      `json:"end_seq,omitempty"`
	EndKind  events.Kind `json:"end_kind,omitempty"`
	EndedAt  int64       `json:"ended_at,omitempty"`
	Relation string      `json:"relation"`
	// attempt is the grant's attempt seq, for the sentence.
	attempt uint64
}

// routeBinding judges g's route generation as of control-plane time now
// (the projection's head).
func routeBinding(tx *bbolt.Tx, g *Grant, now int64) *RouteBinding {
	rb := &RouteBinding{Route: g.Route, Gen: g.RouteGen, Relation: RouteNotProjected, attempt: g.AttemptSeq}
	v := tx.Bucket(bRoutes).Get([]byte(g.Route))
	if v == nil {
		return rb
	}
	var r Route
	if unmarshal(v, &r) != nil {
		return rb
	}
	l, ok := r.Lease(g.RouteGen)
	if !ok {
		return rb
	}
	rb.Lease = l
	rb.Ended, rb.EndedAt = l.Ended(now)
	if rb.Ended == "" {
		rb.Relation = RouteLive
		return rb
	}
	if l.End != "" {
		rb.EndSeq = l.EndSeq
		if e, err := eventIn(tx, l.EndSeq); err == nil {
			rb.EndKind = e.Kind
		}
	}
	switch {
	case g.AttemptSeq == 0:
		rb.Relation = RouteEndedUnspent
	case rb.Ended == LeaseLapsed && rb.EndedAt <= g.AttemptTime,
		rb.Ended != LeaseLapsed && rb.EndSeq < g.AttemptSeq:
		// A lapse ends the lease at its expiry, whenever a receipt says
		// so; a release or revocation at its receipt.
		rb.Relation = RouteEndedBefore
	default:
		rb.Relation = RouteEndedAfter
	}
	return rb
}

// sentence words the binding for an explanation.
func (rb *RouteBinding) sentence() string {
	gen := fmt.Sprintf("generation %d of route %s", rb.Gen, rb.Route)
	if rb.Relation == RouteNotProjected {
		return gen + " is not in the projection"
	}
	if rb.Relation == RouteLive {
		return fmt.Sprintf("%s is live until %s as far as the stream tells", gen, ts(rb.Lease.Expires))
	}
	how := fmt.Sprintf("%s %s at %s", gen, rb.Ended, ts(rb.EndedAt))
	if rb.EndSeq != 0 {
		how += fmt.Sprintf(" (%s, seq %d)", rb.EndKind, rb.EndSeq)
	} else {
		how += " (no receipt records the lapse yet)"
	}
	switch rb.Relation {
	case RouteEndedBefore:
		return fmt.Sprintf("%s, before the attempt at seq %d", how, rb.attempt)
	case RouteEndedAfter:
		return fmt.Sprintf("%s, after the attempt at seq %d", how, rb.attempt)
	}
	return how + ", and the grant was never spent"
}
