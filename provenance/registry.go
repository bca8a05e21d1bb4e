package provenance

import (
	"crypto/rand"
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

// window is one content window. Its data is immutable (it may alias the
// buffer a registry was loaded from) and released when it is evicted.
type window struct {
	id   uint64
	src  *source
	data []byte // nil once evicted
	// first and last: data starts (ends) its registered content, so that
	// edge is a token boundary. The other edges of a window are cuts
	// inside the content; the bytes beyond them are in the neighbouring
	// window, which holds any short value at the cut with its neighbours
	// (Overlap >= FragmentMin).
	first, last bool
	dead        bool      // evicted
	seg         *segment  // the gram-index segment holding its postings
	blocks      []*fblock // the short-value filter blocks holding its ranges
	spans       []int32   // bytes of each of those ranges
}

type source struct {
	desc    Descriptor
	windows []*window // FIFO, oldest first
	bytes   int64
	evicted int64
	// leaves: the fields of a structured result (fields.go), nil for
	// other content; leafBytes their normalized bytes.
	leaves    []fieldLeaf
	leafBytes int64
}

// Registry is a bounded, per-session registry of normalized content windows.
// It is safe for concurrent use.
//
// Two indexes over the windows answer Trace (see index.go and filter.go):
// an exact index of the 8-byte gram at every 8th byte, kept in immutable
// segments that are merged like an LSM tree, for values of FragmentMin
// bytes or more; and a Bloom filter per 4 KB block of window bytes, over
// every 4-byte gram and every short word, that narrows the windows a
// shorter value must be looked for in. Both are stored with the windows by
// MarshalBinary, so loading a registry does not rebuild them, and both are
// updated incrementally by Register.
//
// Memory, with n retained window bytes (n <= MaxBytes): the windows (n
// bytes); the gram index, at most 6 bytes per 8 bytes of its segments
// (a posting, its tag and its share of the bucket directory; grams with
// more than 64 postings keep one entry), and segments are compacted once a
// quarter of their bytes are evicted, so at most n bytes (typically 0.7n);
// and the filters, one 2 KB filter per block whose live bytes are at least
// half of its 4 KB, so at most n bytes plus one block (typically 0.5n).
// A registry loaded with LoadFile aliases the file's buffer, which stays
// allocated until nothing refers to it.
type Registry struct {
	mu      sync.RWMutex
	opt     Options
	seed    uint64 // keys the hashes of both indexes
	sources map[string]*source
	total   int64
	nextID  uint64
	segs    []*segment // gram index, oldest first
	blocks  []*fblock  // short-value filters, in fill order; the last one may be open
	// pressured lists, sorted, the ids of the sources with evictions.
	pressured []string
	// repack holds blocks that eviction left less than half live; Register
	// moves their live ranges into fresh blocks.
	repack []*fblock
	// Fields of structured results (fields.go): leaves by normalized
	// value, their bytes, and the sources holding them, oldest first.
	byValue    map[string][]fieldKey
	fieldBytes int64
	fieldOrder []*source
}

// NewRegistry returns an empty registry.
func NewRegistry(opt Options) *Registry {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails; a zero seed is still correct
	return newRegistry(opt, binary.LittleEndian.Uint64(b[:]))
}

func newRegistry(opt Options, seed uint64) *Registry {
	return &Registry{
		opt:     opt.withDefaults(),
		seed:    seed,
		sources: map[string]*source{},
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
	var added []*window
	step := r.opt.WindowSize - r.opt.Overlap
	for start := 0; ; start += step {
		end := start + r.opt.WindowSize
		if end > len(norm) {
			end = len(norm)
		}
		r.nextID++
		w := &window{id: r.nextID, src: s, data: norm[start:end:end], first: start == 0, last: end == len(norm)}
		r.addWindow(w)
		added = append(added, w)
		if end == len(norm) {
			break
		}
	}
	// Index what survived the evictions above.
	live := added[:0]
	for _, w := range added {
		if !w.dead {
			live = append(live, w)
		}
	}
	if len(live) > 0 {
		// Windows share norm; a window that outlives its neighbours should
		// not keep the whole registration alive, so each gets its own copy.
		for _, w := range live {
			w.data = append([]byte(nil), w.data...)
		}
		r.segs = append(r.segs, buildSegment(live, r.seed))
		for _, w := range live {
			r.filterWindow(w, 0, len(w.data))
		}
	}
	r.maintain()
	return nil
}

func cloneDesc(d Descriptor) Descriptor {
	d.Origins = append([]string(nil), d.Origins...)
	d.OriginCounters = append([]OriginCounter(nil), d.OriginCounters...)
	return d
}

// addWindow appends w to its source and evicts down to the bound. The
// caller indexes w afterwards if it is still live.
func (r *Registry) addWindow(w *window) {
	s := w.src
	s.windows = append(s.windows, w)
	s.bytes += int64(len(w.data))
	r.total += int64(len(w.data))
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
	if victim.evicted == 0 {
		r.addPressured(victim.desc.ID)
	}
	victim.evicted += n
	r.total -= n
	w.dead = true
	w.data = nil
	if w.seg != nil {
		w.seg.live -= n
	}
	for i, b := range w.blocks {
		b.live -= int(w.spans[i])
		if b.live*2 < b.used && !b.queued {
			b.queued = true
			r.repack = append(r.repack, b)
		}
	}
	w.blocks, w.spans = nil, nil
}

func (r *Registry) addPressured(id string) {
	i := sort.SearchStrings(r.pressured, id)
	r.pressured = append(r.pressured, "")
	copy(r.pressured[i+1:], r.pressured[i:])
	r.pressured[i] = id
}

// maintain keeps both indexes within their memory bounds after windows
// were added or evicted.
func (r *Registry) maintain() {
	r.maintainSegments()
	r.repackBlocks()
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
