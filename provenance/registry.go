package provenance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Registry tuning. The gram index stores one posting per gramStride bytes
// of each window, keyed by the gram's 8 bytes themselves (no hash
// collisions), so any common run of at least gramSize+gramStride-1 = 15
// bytes shares an indexed gram with the query.
const (
	gramSize   = 8
	gramStride = 8

	// DefaultMaxBytes is the default bound on retained window bytes.
	DefaultMaxBytes = 10 << 20
	// DefaultWindowSize is the size of one content window.
	DefaultWindowSize = 4096
	// DefaultOverlap is how many bytes consecutive windows of one
	// registration share, so a substring of up to Overlap bytes that
	// straddles a cut is still wholly inside one window.
	DefaultOverlap = 256
	// MinValueLen: normalized values shorter than this match only whole
	// tokens (see Trace).
	MinValueLen = 6
	// FragmentMin: normalized values of at least this length match when a
	// run of at least FragmentMin bytes of them occurs in a window; shorter
	// values must occur whole.
	FragmentMin = 16

	maxIDLen        = 1024
	hardMaxBytes    = 1 << 30
	maxPostingsScan = 64
)

// Options configure a Registry. Zero values take defaults.
type Options struct {
	MaxBytes   int64 // bound on retained window bytes (default 10 MB)
	WindowSize int   // default 4096
	Overlap    int   // default 256; must be < WindowSize/2
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxBytes > hardMaxBytes {
		o.MaxBytes = hardMaxBytes
	}
	if o.WindowSize <= 0 {
		o.WindowSize = DefaultWindowSize
	}
	if o.WindowSize < 2*FragmentMin {
		o.WindowSize = 2 * FragmentMin
	}
	if o.Overlap <= 0 {
		o.Overlap = DefaultOverlap
	}
	if o.Overlap < FragmentMin {
		o.Overlap = FragmentMin
	}
	if o.Overlap >= o.WindowSize/2 {
		o.Overlap = o.WindowSize / 2
	}
	// The bound must hold at least a few windows, or fair share is moot.
	if min := int64(4 * o.WindowSize); o.MaxBytes < min {
		o.MaxBytes = min
	}
	return o
}

type window struct {
	dead bool // evicted; its postings are dropped lazily
	id   uint64
	src  *source
	data []byte
}

type source struct {
	desc    Descriptor
	windows []*window // FIFO, oldest first
	bytes   int64
	evicted int64
}

type posting struct {
	win *window
	off uint32
}

// Registry is a bounded, per-session registry of normalized content windows.
// It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	opt     Options
	sources map[string]*source
	index   map[uint64][]posting
	total   int64
	nextID  uint64
	// live and dead count postings in index; when dead postings outnumber
	// live ones the index is compacted, so eviction is amortized O(window).
	live, dead int
	// freq counts retained bytes by value; short-value scans anchor on the
	// value's rarest byte.
	freq [256]int64
}

// NewRegistry returns an empty registry.
func NewRegistry(opt Options) *Registry {
	return &Registry{
		opt:     opt.withDefaults(),
		sources: map[string]*source{},
		index:   map[uint64][]posting{},
	}
}

// Options returns the effective options.
func (r *Registry) Options() Options { return r.opt }

// Register records content under desc. The content is normalized (see
// Normalize) and cut into overlapping windows that are indexed for
// substring matching. Registering the same source id again appends windows;
// the stored authority becomes the lowest of the registrations (a source
// never raises itself by re-registering). When the registry exceeds
// MaxBytes, the oldest windows of the source holding the most bytes (the
// one over its fair share) are evicted first, which may be the registering
// source itself; evicted bytes are recorded as pressure.
func (r *Registry) Register(desc Descriptor, content []byte) error {
	if desc.ID == "" || len(desc.ID) > maxIDLen {
		return errors.New("provenance: source id must be 1..1024 bytes")
	}
	if !desc.Authority.Valid() {
		return fmt.Errorf("provenance: invalid authority level %d", uint8(desc.Authority))
	}
	norm := Normalize(content)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sources[desc.ID]
	if s == nil {
		s = &source{desc: cloneDesc(desc)}
		r.sources[desc.ID] = s
	} else if desc.Authority < s.desc.Authority {
		s.desc.Authority = desc.Authority
	}
	if len(norm) == 0 {
		return nil
	}
	step := r.opt.WindowSize - r.opt.Overlap
	for start := 0; ; start += step {
		end := start + r.opt.WindowSize
		if end > len(norm) {
			end = len(norm)
		}
		r.addWindow(s, append([]byte(nil), norm[start:end]...))
		if end == len(norm) {
			break
		}
	}
	return nil
}

func cloneDesc(d Descriptor) Descriptor {
	d.Origins = append([]string(nil), d.Origins...)
	d.OriginCounters = append([]OriginCounter(nil), d.OriginCounters...)
	return d
}

func (r *Registry) addWindow(s *source, data []byte) {
	r.nextID++
	w := &window{id: r.nextID, src: s, data: data}
	s.windows = append(s.windows, w)
	s.bytes += int64(len(data))
	r.total += int64(len(data))
	for _, c := range data {
		r.freq[c]++
	}
	for off := 0; off+gramSize <= len(data); off += gramStride {
		g := binary.LittleEndian.Uint64(data[off:])
		r.index[g] = append(r.index[g], posting{win: w, off: uint32(off)})
		r.live++
	}
	for r.total > r.opt.MaxBytes {
		r.evictOne(s)
	}
}

// evictOne evicts the oldest window of the source holding the most bytes.
// When the registry is over its bound, that source holds more than
// MaxBytes/len(sources), i.e. more than its fair share, so a source within
// its share is never evicted while another is over it. Ties prefer the
// registering source, then the smallest id.
func (r *Registry) evictOne(registering *source) {
	victim := registering
	for _, s := range r.sources {
		if s.bytes > victim.bytes || (s.bytes == victim.bytes && victim != registering && s.desc.ID < victim.desc.ID) {
			victim = s
		}
	}
	if len(victim.windows) == 0 {
		// Cannot happen while total > 0; avoid looping forever regardless.
		r.total = 0
		return
	}
	w := victim.windows[0]
	victim.windows[0] = nil
	victim.windows = victim.windows[1:]
	n := int64(len(w.data))
	victim.bytes -= n
	victim.evicted += n
	r.total -= n
	for _, c := range w.data {
		r.freq[c]--
	}
	w.dead = true
	np := (len(w.data)-gramSize)/gramStride + 1
	if len(w.data) < gramSize {
		np = 0
	}
	r.live -= np
	r.dead += np
	if r.dead > r.live && r.dead > 1024 {
		r.compact()
	}
}

// compact drops the postings of evicted windows from the index.
func (r *Registry) compact() {
	for g, ps := range r.index {
		k := 0
		for _, p := range ps {
			if !p.win.dead {
				ps[k] = p
				k++
			}
		}
		clear(ps[k:])
		if k == 0 {
			delete(r.index, g)
		} else {
			r.index[g] = ps[:k]
		}
	}
	r.dead = 0
}

// Pressure reports, per source id, how many window bytes have been evicted
// from the registry. A source with pressure may have content the registry
// no longer matches.
func (r *Registry) Pressure() map[string]int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]int64{}
	for id, s := range r.sources {
		if s.evicted > 0 {
			out[id] = s.evicted
		}
	}
	return out
}

// Bytes returns the retained window bytes, total and per source.
func (r *Registry) Bytes() (total int64, perSource map[string]int64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	perSource = make(map[string]int64, len(r.sources))
	for id, s := range r.sources {
		perSource[id] = s.bytes
	}
	return r.total, perSource
}

// Source returns the stored descriptor of a registered source.
func (r *Registry) Source(id string) (Descriptor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s := r.sources[id]
	if s == nil {
		return Descriptor{}, false
	}
	return cloneDesc(s.desc), true
}

// hit is one source matched by one candidate.
type hit struct {
	src  *source
	mode MatchMode
	n    int
}

// matchLocked matches one normalized candidate; r.mu must be held.
// It returns the best hit per source, how many bytes of v are covered by
// some hit, and how many stop grams of v were skipped.
func (r *Registry) matchLocked(v []byte) (map[*source]hit, int, int) {
	hits := map[*source]hit{}
	n := len(v)
	switch {
	case n == 0:
		return hits, 0, 0
	case n < FragmentMin:
		r.scanLocked(v, n < MinValueLen, hits)
		if len(hits) > 0 {
			return hits, n, 0
		}
		return hits, 0, 0
	}
	var runs [][2]int
	skipped := 0
	// Fragment mode: look up every gram of v; extend each aligned hit.
	type diag struct {
		w *window
		d int
	}
	covered := map[diag]int{} // end of the last run found on this diagonal
	for p := 0; p+gramSize <= n; p++ {
		ps := r.index[binary.LittleEndian.Uint64(v[p:])]
		if len(ps) > maxPostingsScan {
			// A stop gram: too common to seed a match. A distinctive
			// copied run has rarer grams; a run made only of stop grams
			// is boilerplate. Skipping makes the trace incomplete, and
			// the caller lowers its authority to Evidence.
			skipped++
			continue
		}
		for _, pt := range ps {
			if pt.win.dead {
				continue
			}
			off := int(pt.off)
			dk := diag{pt.win, off - p}
			if end, ok := covered[dk]; ok && p < end {
				continue
			}
			data := pt.win.data
			vs, ws := p, off
			for vs > 0 && ws > 0 && v[vs-1] == data[ws-1] {
				vs--
				ws--
			}
			ve, we := p+gramSize, off+gramSize
			for ve < n && we < len(data) && v[ve] == data[we] {
				ve++
				we++
			}
			covered[dk] = ve
			run := ve - vs
			if run < FragmentMin {
				continue
			}
			runs = append(runs, [2]int{vs, ve})
			mode := ModeFragment
			if run == n {
				mode = ModeWhole
			}
			if h, ok := hits[pt.win.src]; !ok || run > h.n {
				hits[pt.win.src] = hit{src: pt.win.src, mode: mode, n: run}
			}
		}
	}
	return hits, coverage(runs), skipped
}

// coverage returns the size of the union of the half-open intervals.
func coverage(iv [][2]int) int {
	sort.Slice(iv, func(i, j int) bool { return iv[i][0] < iv[j][0] })
	total, end := 0, 0
	for _, x := range iv {
		if x[0] > end {
			end = x[0]
		}
		if x[1] > end {
			total += x[1] - end
			end = x[1]
		}
	}
	return total
}

// scanLocked finds v as a substring (token=false) or as a whole token
// (token=true) in every window, linearly. Cost is bounded by MaxBytes.
func (r *Registry) scanLocked(v []byte, token bool, hits map[*source]hit) {
	mode := ModeWhole
	if token {
		mode = ModeToken
	}
	k := 0 // anchor on the rarest byte of v
	for i := range v {
		if r.freq[v[i]] < r.freq[v[k]] {
			k = i
		}
	}
	if r.freq[v[k]] == 0 {
		return
	}
	for _, s := range r.sources {
		for _, w := range s.windows {
			if containsAt(w.data, v, k, token) {
				hits[s] = hit{src: s, mode: mode, n: len(v)}
				break
			}
		}
	}
}

func containsAt(data, v []byte, k int, token bool) bool {
	c := v[k]
	for base := k; base < len(data); {
		j := bytes.IndexByte(data[base:], c)
		if j < 0 {
			return false
		}
		j += base
		base = j + 1
		i := j - k
		end := i + len(v)
		if end > len(data) {
			return false
		}
		if !bytes.Equal(data[i:end], v) {
			continue
		}
		if !token || (i == 0 || !isTokenByte(data[i-1])) && (end == len(data) || !isTokenByte(data[end])) {
			return true
		}
	}
	return false
}

// isTokenByte reports whether c continues a token: ASCII letters and digits
// and any byte of a multi-byte rune.
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func sortedIDs(m map[string]*source) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
