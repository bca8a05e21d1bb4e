package fsm

// Giving memory back. A Go map never shrinks: once a million grants have
// expired, the map that held them keeps the buckets for a million. So the
// state remembers each map's peak size since it was last built, and when
// the map has fallen below a quarter of that peak (and the peak was at
// least shrinkFloor entries) it copies the map into a new one sized for
// what is left. The copy holds the same entries, so nothing observable
// changes: maps are never iterated into output (snapshots sort their
// keys), and whether or when a map is rebuilt depends only on the sizes it
// went through, which are the same on every replica. Rebuilding costs one
// insert per surviving entry, paid for by the three times as many
// removals since the peak. The expiry heap's array shrinks the same way
// (see expiryHeap.pop).

// peaks are the largest sizes the state's top-level maps reached since
// each was last built. Memory only: not state, not in snapshots.
type peaks struct {
	grants, byWorker, idem, ledger, preauth, quota, sources, srcByOwner, reviews, approvals int
}

// notePeak raises *peak to m's size.
func notePeak[K comparable, V any](m map[K]V, peak *int) {
	if len(m) > *peak {
		*peak = len(m)
	}
}

// shrunk returns m, or a copy of it sized for its entries when it has
// fallen below a quarter of its peak.
func shrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if *peak < shrinkFloor || len(m) >= *peak/4 {
		return m
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	*peak = len(m)
	return out
}

// notePeaks records the sizes of the top-level maps. prune calls it before
// it removes anything: between removals the maps only grow, so the size
// just before a removal is the peak since the previous one.
func (s *State) notePeaks() {
	p := &s.peaks
	notePeak(s.grants, &p.grants)
	notePeak(s.byWorker, &p.byWorker)
	notePeak(s.idem, &p.idem)
	notePeak(s.ledger, &p.ledger)
	notePeak(s.preauth, &p.preauth)
	notePeak(s.quota, &p.quota)
	notePeak(s.sources, &p.sources)
	notePeak(s.srcByOwner, &p.srcByOwner)
	notePeak(s.reviews, &p.reviews)
	notePeak(s.approvals, &p.approvals)
}

// shrinkMaps rebuilds the top-level maps that fell below a quarter of
// their peak.
func (s *State) shrinkMaps() {
	p := &s.peaks
	s.grants = shrunk(s.grants, &p.grants)
	s.byWorker = shrunk(s.byWorker, &p.byWorker)
	s.idem = shrunk(s.idem, &p.idem)
	s.ledger = shrunk(s.ledger, &p.ledger)
	s.preauth = shrunk(s.preauth, &p.preauth)
	s.quota = shrunk(s.quota, &p.quota)
	s.sources = shrunk(s.sources, &p.sources)
	s.srcByOwner = shrunk(s.srcByOwner, &p.srcByOwner)
	s.reviews = shrunk(s.reviews, &p.reviews)
	s.approvals = shrunk(s.approvals, &p.approvals)
}

// idSet is a set (a worker's grants, an owner's sources' ids) that gives
// its memory back like the top-level maps.
type idSet[K comparable] struct {
	m    map[K]struct{}
	peak int
}

func newIDSet[K comparable]() *idSet[K] { return &idSet[K]{m: map[K]struct{}{}} }

func (x *idSet[K]) add(id K) {
	x.m[id] = struct{}{}
	notePeak(x.m, &x.peak)
}

func (x *idSet[K]) remove(id K) {
	delete(x.m, id)
	x.m = shrunk(x.m, &x.peak)
}

// len and ids read a nil set as empty.
func (x *idSet[K]) len() int { return len(x.ids()) }

func (x *idSet[K]) ids() map[K]struct{} {
	if x == nil {
		return nil
	}
	return x.m
}
