package fsm

import (
	"bufio"
	"crypto/sha256"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// FreezeDigest captures what the state digest needs, for a caller that
// asks for the digest again and again (a status endpoint): the view's
// Digest returns what State.Digest returns now, computed after the
// caller's lock is released. The capture costs in proportion to what
// changed since the previous call; so does the digest, but for one
// SHA-256 pass over the state's encoding.
//
// Grants, idempotency records and route leases are most of a state and
// most of its digest's bytes. The state keeps their encodings, in digest
// order, between calls (the mirror) and notes, from the first call on,
// the key of every one Apply or Evolve adds, changes or removes.
// FreezeDigest copies the noted grants and routes (records never change
// once in the state, so they are shared) and, as Freeze does, the small
// rest of the state; Digest re-encodes the noted ones, merges them into
// the mirror's order and hashes the whole in one pass, without building
// the encoding. When more changed than the state holds, keeping the
// mirror costs more than it saves: the state drops it, and the next call
// captures everything.
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
		v.grants = capture(s.grants, nil, copyOf)
		v.idem = capture(s.idem, nil, shared)
		v.routes = capture(s.routes, nil, copyOf)
	} else {
		v.grants = capture(s.grants, s.notes.grants, copyOf)
		v.idem = capture(s.idem, s.notes.idem, shared)
		v.routes = capture(s.routes, s.notes.routes, copyOf)
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
	rest   *State // the state without its grants, records and routes
	mirror *digestMirror
	gen    uint64 // the mirror's capture this view is
	grants []pending[string, grants.Grant]
	idem   []pending[idemID, idemRecord]
	routes []pending[string, route]
}

// pending is an entry changed since the mirror was last brought up to
// date: its value as captured, or nil when it was removed.
type pending[K, V any] struct {
	key K
	v   *V
}

// capture returns the entries of m under keys (all of m when keys is
// nil), each value passed through keep, and nil for a key m no longer
// holds.
func capture[K comparable, V any](m map[K]*V, keys map[K]struct{}, keep func(*V) *V) []pending[K, V] {
	if keys == nil {
		out := make([]pending[K, V], 0, len(m))
		for k, v := range m {
			out = append(out, pending[K, V]{key: k, v: keep(v)})
		}
		return out
	}
	out := make([]pending[K, V], 0, len(keys))
	for k := range keys {
		p := pending[K, V]{key: k}
		if v := m[k]; v != nil {
			p.v = keep(v)
		}
		out = append(out, p)
	}
	return out
}

// copyOf copies a value Apply changes in place (a grant, a route).
func copyOf[V any](v *V) *V {
	c := *v
	return &c
}

// shared keeps a value nothing changes once stored (an idempotency
// record).
func shared[V any](v *V) *V { return v }

// digestMirror holds the encoded grants, idempotency records and routes
// of a state, each as the digest writes it, in the digest's order.
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
	m.grants = merge(m.grants, v.grants, strings.Compare, func(_ string, g *grants.Grant) []byte {
		scratch = encodeGrant(scratch[:0], g)
		return frame(stGrant, scratch)
	})
	m.idem = merge(m.idem, v.idem, compareIdem, func(k idemID, r *idemRecord) []byte {
		scratch = encodeIdem(scratch[:0], k, r)
		return frame(stIdem, scratch)
	})
	m.routes = merge(m.routes, v.routes, strings.Compare, func(_ string, r *route) []byte {
		scratch = encodeRoute(scratch[:0], r)
		return frame(stRoute, scratch)
	})
	m.merged.Store(v.gen)

	// The bytes State.Digest hashes, in its order: authority (head,
	// grants, records, tail), replies, routes, then the rest.
	h := sha256.New()
	bw := bufio.NewWriterSize(h, 64<<10)
	w := events.NewWriter(nil)
	v.rest.authorityHead(w)
	bw.Write(w.Bytes())
	writeEncoded(bw, m.grants)
	writeEncoded(bw, m.idem)
	w = events.NewWriter(w.Bytes())
	v.rest.authorityTail(w, scratch)
	v.rest.writeReplies(w, nil)
	bw.Write(w.Bytes())
	writeEncoded(bw, m.routes)
	w = events.NewWriter(w.Bytes())
	v.rest.writeRouteFloor(w)
	v.rest.writeFleet(w, nil)
	v.rest.writeWorkerKeys(w, nil)
	bw.Write(w.Bytes())
	bw.Flush() // a hash.Hash never fails a write
	var out events.Hash
	h.Sum(out[:0])
	return out
}

// writeEncoded writes every entry's bytes, in order.
func writeEncoded[K any](w *bufio.Writer, es []encoded[K]) {
	for _, e := range es {
		w.Write(e.b)
	}
}

// frame is writeRecord's bytes for one record.
func frame(tag uint32, b []byte) []byte {
	w := events.NewWriter(make([]byte, 0, len(b)+8))
	writeRecord(w, tag, b)
	return w.Bytes()
}

// merge sorts the changes ps and merges them into es (sorted by key): a
// change replaces or inserts its key's entry with encode's bytes, or
// removes the entry when its value is nil.
func merge[K, V any](es []encoded[K], ps []pending[K, V], cmp func(a, b K) int, encode func(K, *V) []byte) []encoded[K] {
	if len(ps) == 0 {
		return es
	}
	slices.SortFunc(ps, func(a, b pending[K, V]) int { return cmp(a.key, b.key) })
	out := make([]encoded[K], 0, len(es)+len(ps))
	i := 0
	for _, p := range ps {
		for i < len(es) && cmp(es[i].key, p.key) < 0 {
			out = append(out, es[i])
			i++
		}
		if i < len(es) && cmp(es[i].key, p.key) == 0 {
			i++ // replaced or removed
		}
		if p.v != nil {
			out = append(out, encoded[K]{key: p.key, b: encode(p.key, p.v)})
		}
	}
	return append(out, es[i:]...)
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
