package fsm

import (
	"fmt"
	"sort"

	"github.com/writ-dev/writ/events"
)

// Route records in a snapshot: one nested record per route (tag stRoute),
// in name order, after every other field. A state that never saw a route
// writes none, so its snapshot and digest are what earlier builds wrote.

// Route record tags (append only).
const (
	roName = iota + 1
	roGen
	roOwner
	roLane
	roAcquired
	roExpires
	roSeq
	roEnd
	roEndedAt
	roNoted
)

// writeRouteFloor appends the route generation high-water mark, if a
// record was ever forgotten.
func (s *State) writeRouteFloor(w *events.Writer) {
	if s.routeFloor > 0 {
		w.Uint(stRouteFloor, s.routeFloor)
	}
}

// writeRoutes appends the route records to w.
func (s *State) writeRoutes(w *events.Writer, scratch []byte) []byte {
	if len(s.routes) == 0 {
		return scratch
	}
	names := make([]string, 0, len(s.routes))
	for n := range s.routes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		scratch = encodeRoute(scratch[:0], s.routes[n])
		writeRecord(w, stRoute, scratch)
	}
	return scratch
}

// encodeRoute appends one route record's fields to buf.
func encodeRoute(buf []byte, r *route) []byte {
	rw := events.NewWriter(buf)
	rw.String(roName, r.Name)
	rw.Uint(roGen, r.Gen)
	rw.String(roOwner, r.Owner)
	rw.String(roLane, r.Lane)
	rw.Int(roAcquired, r.Acquired)
	rw.Int(roExpires, r.Expires)
	rw.Uint(roSeq, r.Seq)
	rw.String(roEnd, r.End)
	rw.Int(roEndedAt, r.EndedAt)
	rw.Bool(roNoted, r.Noted)
	return rw.Bytes()
}

// restoreRoute decodes one route record, strictly (known tags, a name, a
// generation, an owner, a known end, names ascending), and schedules the
// expiry of a live lease.
func (s *State) restoreRoute(b []byte, last *string) error {
	r := &route{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case roName:
			d.str(&r.Name)
		case roGen:
			d.uint(&r.Gen)
		case roOwner:
			d.shared(&r.Owner, &s.intern)
		case roLane:
			d.shared(&r.Lane, &s.intern)
		case roAcquired:
			d.int(&r.Acquired)
		case roExpires:
			d.int(&r.Expires)
		case roSeq:
			d.uint(&r.Seq)
		case roEnd:
			d.str(&r.End)
		case roEndedAt:
			d.int(&r.EndedAt)
		case roNoted:
			var v uint64
			d.uint(&v)
			if d.err == nil && v != 1 {
				d.err = fmt.Errorf("route flag value %d", v)
			}
			r.Noted = v == 1
		default:
			d.err = fmt.Errorf("unknown route record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	switch {
	case err != nil:
		return err
	case r.Name == "" || r.Gen == 0 || r.Owner == "" || r.Seq == 0:
		return fmt.Errorf("route record %q without a name, a generation, an owner or a sequence", r.Name)
	case r.End != endLive && r.End != endReleased && r.End != endLapsed && r.End != endRevoked:
		return fmt.Errorf("route %q: unknown lease end %q", r.Name, r.End)
	case *last != "" && r.Name <= *last:
		return fmt.Errorf("route %q is out of order or repeated", r.Name)
	}
	*last = r.Name
	s.routes[r.Name] = r
	if r.End == endLive {
		s.expiry = append(s.expiry, expiryItem{At: r.Expires, Ord: r.Seq<<kindBits | expireRoute,
			Ref: &routeItem{Name: r.Name, Gen: r.Gen, Expires: r.Expires}})
	}
	return nil
}
