package fsm

import (
	"crypto/sha256"
	stdhash "hash"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// FreezeDigest captures what the state digest needs, for a caller that
// asks for the digest again and again (a status endpoint): the view's
// Digest returns what State.Digest returns now, computed after the
// caller's lock is released, and both the capture and the digest cost in
// proportion to what changed since the previous call, not to the state.
//
// Grants, idempotency records and route leases are most of a state and
// most of its digest's bytes. The state keeps their encodings, in digest
// order, between calls (the mirror) and notes, from the first call on,
// the key of every one Apply or Evolve adds, changes or removes.
// FreezeDigest copies the noted grants and routes (records never change
// once in the state, so they are shared) and the rest of the state
// (small) as Freeze does; Digest re-encodes the noted ones, merges them into the mirror's
// order and hashes the whole in one pass, without building the encoding.
// When more changed than the mirror holds, keeping it costs more than it
// saves: the state drops it, and the next call captures everything.
//
// The caller must hold whatever serialises access to s for reading (as
// for Freeze), and must call Digest on each view, in order, before the
// next FreezeDigest: the views of one state share its mirror, so at most
// one caller may use them at a time.
func (s *State) FreezeDigest() DigestView {
	v := DigestView{rest: s.freezeShared()}
	// A view whose Digest was never called left its changes out of the
	// mirror: start again rather than build on it.
	if s.mirror == nil || s.notes == nil || s.mirror.merged.Load() != s.mirror.captured {
		s.mirror = &digestMirror{}
		s.notes = &mirrorNotes{grants: map[string]struct{}{}, idem: map[idemID]struct{}{}, routes: map[string]struct{}{}}
		v.grants = make([]pendingGrant, 0, len(s.grants))
		gs := make([]grants.Grant, len(s.grants))
		i := 0
		for id, g := range s.grants {
			gs[i] = *g
			v.grants = append(v.grants, pendingGrant{id: id, g: &gs[i]})
			i++
		}
		v.idem = make([]pendingIdem, 0, len(s.idem))
		for k, r := range s.idem {
			v.idem = append(v.idem, pendingIdem{key: k, rec: r})
		}
		v.routes = make([]pendingRoute, 0, len(s.routes))
		for n, r := range s.routes {
			c := *r
			v.routes = append(v.routes, pendingRoute{name: n, r: &c})
		}
	} else {
		for id := range s.notes.grants {
			p := pendingGrant{id: id}
			if g := s.grants[id]; g != nil {
				c := *g
				p.g = &c
			}
			v.grants = append(v.grants, p)
		}
		for k := range s.notes.idem {
			v.idem = append(v.idem, pendingIdem{key: k, rec: s.idem[k]})
		}
		for n := range s.notes.routes {
			p := pendingRoute{name: n}
			if r := s.routes[n]; r != nil {
				c := *r
				p.r = &c
			}
			v.routes = append(v.routes, p)
		}
		clear(s.notes.grants)
		clear(s.notes.idem)
		clear(s.notes.routes)
	}
	s.mirror.captured++
	v.mirror, v.gen = s.mirror, s.mirror.captured
	return v
}

// DigestView is what FreezeDigest captured.
type DigestView struct {
	rest   *State // the state without its grants and records
	mirror *digestMirror
	gen    uint64 // the mirror's capture this view is
	grants []pendingGrant
	idem   []pendingIdem
	routes []pendingRoute
}

// pendingGrant is a grant changed since the mirror was last brought up to
// date: a copy of it, or nil when it was removed.
type pendingGrant struct {
	id string
	g  *grants.Grant
}

// pendingIdem is an idempotency record changed since the mirror was last
// brought up to date (nil: removed).
type pendingIdem struct {
	key idemID
	rec *idemRecord
}

// pendingRoute is a route record changed since the mirror was last
// brought up to date: a copy of it, or nil when it was forgotten.
type pendingRoute struct {
	name string
	r    *route
}

// digestMirror holds the encoded grant and idempotency records of a
// state, each as authority writes it, in authority's order.
type digestMirror struct {
	grants []encoded[string]
	idem   []encoded[idemID]
	routes []encoded[string]
	// captured counts FreezeDigest's captures (under the state's lock),
	// merged is the last one Digest merged (outside it).
	captured uint64
	merged   atomic.Uint64
}

// encoded is one record's key and its bytes in the digest.
type encoded[K any] struct {
	key K
	b   []byte
}

// mirrorNotes are the keys changed since the last FreezeDigest.
type mirrorNotes struct {
	grants map[string]struct{}
	idem   map[idemID]struct{}
	routes map[string]struct{}
}

// Digest returns the state digest as it was when the view was captured.
func (v DigestView) Digest() events.Hash {
	m := v.mirror
	var scratch []byte
	slices.SortFunc(v.grants, func(a, b pendingGrant) int { return strings.Compare(a.id, b.id) })
	m.grants = mergeEncoded(m.grants, v.grants, strings.Compare,
		func(p pendingGrant) (string, bool) { return p.id, p.g != nil },
		func(p pendingGrant) []byte {
			scratch = encodeGrant(scratch[:0], p.g)
			return frame(stGrant, scratch)
		})
	slices.SortFunc(v.idem, func(a, b pendingIdem) int { return compareIdem(a.key, b.key) })
	m.idem = mergeEncoded(m.idem, v.idem, compareIdem,
		func(p pendingIdem) (idemID, bool) { return p.key, p.rec != nil },
		func(p pendingIdem) []byte {
			scratch = encodeIdem(scratch[:0], p.key, p.rec)
			return frame(stIdem, scratch)
		})
	slices.SortFunc(v.routes, func(a, b pendingRoute) int { return strings.Compare(a.name, b.name) })
	m.routes = mergeEncoded(m.routes, v.routes, strings.Compare,
		func(p pendingRoute) (string, bool) { return p.name, p.r != nil },
		func(p pendingRoute) []byte {
			scratch = encodeRoute(scratch[:0], p.r)
			return frame(stRoute, scratch)
		})
	m.merged.Store(v.gen)

	h := hashWriter{h: sha256.New(), buf: make([]byte, 0, 64<<10)}
	w := events.NewWriter(nil)
	v.rest.authorityHead(w)
	h.write(w.Bytes())
	for _, e := range m.grants {
		h.write(e.b)
	}
	for _, e := range m.idem {
		h.write(e.b)
	}
	w = events.NewWriter(w.Bytes())
	v.rest.authorityTail(w, scratch)
	v.rest.writeReplies(w, nil)
	h.write(w.Bytes())
	for _, e := range m.routes {
		h.write(e.b)
	}
	w = events.NewWriter(w.Bytes())
	v.rest.writeRouteFloor(w)
	v.rest.writeFleet(w, nil)
	v.rest.writeWorkerKeys(w, nil)
	h.write(w.Bytes())
	return h.sum()
}

// frame is writeRecord's bytes for one record.
func frame(tag uint32, b []byte) []byte {
	w := events.NewWriter(make([]byte, 0, len(b)+8))
	writeRecord(w, tag, b)
	return w.Bytes()
}

// mergeEncoded merges the changes in ps (sorted by key, one per key) into
// es (sorted by key): a change replaces or inserts its key's entry with
// encode's bytes, or removes it when live says the record is gone.
func mergeEncoded[K any, P any](es []encoded[K], ps []P, cmp func(a, b K) int,
	keyOf func(P) (K, bool), encode func(P) []byte) []encoded[K] {
	if len(ps) == 0 {
		return es
	}
	out := make([]encoded[K], 0, len(es)+len(ps))
	i := 0
	for _, p := range ps {
		k, live := keyOf(p)
		for i < len(es) && cmp(es[i].key, k) < 0 {
			out = append(out, es[i])
			i++
		}
		if i < len(es) && cmp(es[i].key, k) == 0 {
			i++ // replaced or removed
		}
		if live {
			out = append(out, encoded[K]{key: k, b: encode(p)})
		}
	}
	return append(out, es[i:]...)
}

// hashWriter feeds SHA-256 in large writes.
type hashWriter struct {
	h   stdhash.Hash
	buf []byte
}

func (h *hashWriter) write(b []byte) {
	if len(h.buf)+len(b) > cap(h.buf) {
		h.flush()
		if len(b) > cap(h.buf) {
			h.h.Write(b)
			return
		}
	}
	h.buf = append(h.buf, b...)
}

func (h *hashWriter) flush() {
	h.h.Write(h.buf)
	h.buf = h.buf[:0]
}

func (h *hashWriter) sum() events.Hash {
	h.flush()
	var out events.Hash
	copy(out[:], h.h.Sum(nil))
	return out
}

// touchGrant notes that the grant id was added, changed or removed, while
// the state keeps a digest mirror.
func (s *State) touchGrant(id string) {
	if s.notes != nil {
		s.notes.grants[id] = struct{}{}
		s.boundNotes()
	}
}

// touchIdem notes that the idempotency record k was added or removed,
// while the state keeps a digest mirror.
func (s *State) touchIdem(k idemID) {
	if s.notes != nil {
		s.notes.idem[k] = struct{}{}
		s.boundNotes()
	}
}

// touchRoute notes that the route record name was added, changed or
// forgotten, while the state keeps a digest mirror.
func (s *State) touchRoute(name string) {
	if s.notes != nil {
		s.notes.routes[name] = struct{}{}
		s.boundNotes()
	}
}

// boundNotes drops the mirror once more changed than the state holds.
func (s *State) boundNotes() {
	n := len(s.notes.grants) + len(s.notes.idem) + len(s.notes.routes)
	if n > max(mirrorMinChanges, len(s.grants)+len(s.idem)+len(s.routes)) {
		s.mirror, s.notes = nil, nil
	}
}

// mirrorMinChanges is the number of changes a mirror always tolerates,
// however small the state.
const mirrorMinChanges = 1024
