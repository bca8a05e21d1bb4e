package provenance

import (
	"encoding/binary"
	"slices"
)

// The gram index: for every window, the 8-byte gram at every gramStride-th
// byte, in immutable segments. Register adds a segment for the windows it
// created; segments are merged (rebuilt from their windows) when a newer
// one grows to half the size of the one before it, up to a quarter of
// MaxBytes (at least 4 MB), and compacted (rebuilt from their live
// windows) when a quarter of their bytes have been evicted. So there are
// O(log n) of them beyond the five or so full ones, each byte is indexed
// O(log n) times in total, and one Register rebuilds at most about 4 MB
// of a default registry (some 30 ms).
//
// A segment lays its windows end to end (in id order) and names a posting
// by its offset in that sequence. Postings are grouped by the bucket of
// hash(gram) in a CSR table: dir[b] is the first posting of bucket b, and
// each posting carries an 8-bit tag of the hash, so a lookup reads the
// window bytes of about one posting per hit. Grams with more than
// maxPostingsScan postings in a segment are stop grams: the segment keeps,
// in their bucket, one entry with the stopFlag bit set that indexes their
// hash and count in the stop table, instead of their postings.
//
// Every posting a lookup returns has been checked against the window's
// bytes, so a table that does not match its windows (a corrupt file whose
// checksum still holds) can only lose matches, never invent one.

// hashKey is a bijection of k keyed by seed (the splitmix64 finalizer):
// equal hashes mean equal keys.
func hashKey(seed, k uint64) uint64 {
	k ^= seed
	k ^= k >> 30
	k *= 0xbf58476d1ce4e5b9
	k ^= k >> 27
	k *= 0x94d049bb133111eb
	k ^= k >> 31
	return k
}

const (
	stopEntrySize = 12 // hash (8 bytes) and count (4), little endian
	stopFlag      = 1 << 31
	maxTableBits  = 30
	// pageShift: a segment maps each 4 KB of its offsets to the windows
	// there, to find a posting's window in a step or two.
	pageShift = 12
	// mergeRatio: the two newest segments are merged while the older one
	// holds at most mergeRatio times the live bytes of the newer.
	mergeRatio = 2
	// maxSegments bounds the segments a lookup visits.
	maxSegments = 24
	// minSegCap: merges stop at max(minSegCap, MaxBytes/4) live bytes.
	minSegCap = 4 << 20
)

type posting struct {
	win *window
	off uint32
}

type segment struct {
	ids    []uint64  // window ids, ascending
	wins   []*window // nil: not (or no longer) in the registry
	starts []uint32  // len(wins)+1 offsets of the windows in the segment
	pages  []uint32  // per 4 KB page of offsets, the window at its start
	live   int64     // bytes of live windows
	bits   uint8     // log2 of the buckets
	dir    []byte    // (1<<bits)+1 little-endian uint32
	tags   []byte    // one per posting
	pos    []byte    // one little-endian uint32 per posting (or stop entry)
	stop   []byte    // stop grams: hash and count, sorted by hash
}

// index computes pages from starts.
func (s *segment) index() {
	n := s.size()>>pageShift + 1
	s.pages = make([]uint32, n)
	j := 0
	for k := range s.pages {
		p := uint32(k) << pageShift
		for j+1 < len(s.wins) && s.starts[j+1] <= p {
			j++
		}
		s.pages[k] = uint32(j)
	}
}

func le32(b []byte, i uint64) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }

func (s *segment) size() int64 { return int64(s.starts[len(s.starts)-1]) }

func (s *segment) npost() int { return len(s.tags) }

func tagOf(h uint64, bits uint8) byte { return byte(h >> (56 - bits)) }

// at returns the live window holding segment offset p.
func (s *segment) at(p uint32) (*window, int, bool) {
	st := s.starts
	if p >= st[len(st)-1] {
		return nil, 0, false
	}
	k := p >> pageShift
	lo, hi := int(s.pages[k]), len(s.wins)
	if int(k)+1 < len(s.pages) {
		hi = int(s.pages[k+1]) + 1
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if st[m+1] <= p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	w := s.wins[lo]
	if w == nil || w.dead {
		return nil, 0, false
	}
	return w, int(p - st[lo]), true
}

// lookup appends the live postings of gram g (hash h) to out and returns
// how many it appended; stop reports a stop gram, with its count.
func (s *segment) lookup(g, h uint64, out []posting) (_ []posting, n int, stop bool) {
	b := h >> (64 - uint(s.bits)) // 0 when bits is 0
	lo, hi := le32(s.dir, b), le32(s.dir, b+1)
	if hi > uint32(len(s.tags)) || lo > hi {
		return out, 0, false
	}
	t := tagOf(h, s.bits)
	for i := lo; i < hi; i++ {
		if s.tags[i] != t {
			continue
		}
		p := le32(s.pos, uint64(i))
		if p&stopFlag != 0 {
			e := int(p&^stopFlag) * stopEntrySize
			if e+stopEntrySize <= len(s.stop) && binary.LittleEndian.Uint64(s.stop[e:]) == h {
				return out, int(binary.LittleEndian.Uint32(s.stop[e+8:])), true
			}
			continue
		}
		w, off, ok := s.at(p)
		if !ok || off+gramSize > len(w.data) || binary.LittleEndian.Uint64(w.data[off:]) != g {
			continue
		}
		out = append(out, posting{win: w, off: uint32(off)})
		n++
	}
	return out, n, false
}

// gramPostings returns the live postings of gram g in all segments, or
// stop if g has more than maxPostingsScan of them. Counts of stop grams
// are taken when a segment is built and include windows evicted since,
// which can only make more grams stop grams.
func (r *Registry) gramPostings(g uint64, out []posting) ([]posting, bool) {
	h := hashKey(r.seed, g)
	total := 0
	for _, s := range r.segs {
		var n int
		var stop bool
		out, n, stop = s.lookup(g, h, out)
		total += n
		if stop || total > maxPostingsScan {
			return out, true
		}
	}
	return out, false
}

type gramRec struct {
	h uint64
	p uint32
}

func cmpGramRec(a, b gramRec) int {
	switch {
	case a.h < b.h:
		return -1
	case a.h > b.h:
		return 1
	case a.p < b.p:
		return -1
	case a.p > b.p:
		return 1
	}
	return 0
}

// buildSegment indexes ws, live windows in ascending id order.
func buildSegment(ws []*window, seed uint64) *segment {
	s := &segment{
		ids:    make([]uint64, len(ws)),
		wins:   slices.Clone(ws),
		starts: make([]uint32, len(ws)+1),
	}
	n, off := 0, uint64(0)
	for i, w := range ws {
		s.ids[i] = w.id
		s.starts[i] = uint32(off)
		off += uint64(len(w.data))
		if off >= stopFlag {
			panic("provenance: segment over 2 GB") // MaxBytes <= 1 GB
		}
		if len(w.data) >= gramSize {
			n += (len(w.data)-gramSize)/gramStride + 1
		}
		w.seg = s
	}
	s.starts[len(ws)] = uint32(off)
	s.live = int64(off)
	s.index()

	recs := make([]gramRec, 0, n)
	for i, w := range ws {
		for o := 0; o+gramSize <= len(w.data); o += gramStride {
			recs = append(recs, gramRec{hashKey(seed, binary.LittleEndian.Uint64(w.data[o:])), s.starts[i] + uint32(o)})
		}
	}
	sortGramRecs(recs)
	post := recs[:0]
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].h == recs[i].h {
			j++
		}
		if j-i > maxPostingsScan {
			post = append(post, gramRec{recs[i].h, stopFlag | uint32(len(s.stop)/stopEntrySize)})
			s.stop = binary.LittleEndian.AppendUint64(s.stop, recs[i].h)
			s.stop = binary.LittleEndian.AppendUint32(s.stop, uint32(j-i))
		} else {
			post = append(post, recs[i:j]...)
		}
		i = j
	}
	for uint64(1)<<s.bits < uint64(len(post))/8 && s.bits < maxTableBits {
		s.bits++
	}
	nb := uint64(1) << s.bits
	s.dir = make([]byte, 4*(nb+1))
	s.tags = make([]byte, len(post))
	s.pos = make([]byte, 4*len(post))
	k := 0
	for b := uint64(0); b <= nb; b++ {
		for k < len(post) && post[k].h>>(64-uint(s.bits)) < b {
			k++
		}
		binary.LittleEndian.PutUint32(s.dir[4*b:], uint32(k))
	}
	for i, p := range post {
		s.tags[i] = tagOf(p.h, s.bits)
		binary.LittleEndian.PutUint32(s.pos[4*i:], p.p)
	}
	return s
}

// sortGramRecs sorts by (hash, offset): an LSD radix sort on the top 22
// bits of the hash, stable, so the records (made in offset order) need
// fixing only where different hashes share those bits.
func sortGramRecs(a []gramRec) {
	if len(a) < 512 {
		slices.SortFunc(a, cmpGramRec)
		return
	}
	tmp := make([]gramRec, len(a))
	radixPass(a, tmp, 42)
	radixPass(tmp, a, 53)
	for i := 0; i < len(a); {
		j := i + 1
		for j < len(a) && a[j].h>>42 == a[i].h>>42 {
			j++
		}
		if j-i > 1 && !slices.IsSortedFunc(a[i:j], cmpGramRec) {
			slices.SortFunc(a[i:j], cmpGramRec)
		}
		i = j
	}
}

func radixPass(src, dst []gramRec, shift uint) {
	var cnt [2048]int
	for _, r := range src {
		cnt[(r.h>>shift)&2047]++
	}
	sum := 0
	for i, c := range cnt {
		cnt[i] = sum
		sum += c
	}
	for _, r := range src {
		k := (r.h >> shift) & 2047
		dst[cnt[k]] = r
		cnt[k]++
	}
}

// liveWindows appends the segment's live windows to out, in id order.
func (s *segment) liveWindows(out []*window) []*window {
	for _, w := range s.wins {
		if w != nil && !w.dead {
			out = append(out, w)
		}
	}
	return out
}

// maintainSegments drops empty segments, compacts those half evicted and
// merges the newest ones while they are of similar size.
func (r *Registry) maintainSegments() {
	k := 0
	for _, s := range r.segs {
		switch {
		case s.live == 0:
			continue
		case 4*s.live < 3*s.size():
			s = buildSegment(s.liveWindows(nil), r.seed)
		}
		r.segs[k] = s
		k++
	}
	clear(r.segs[k:])
	r.segs = r.segs[:k]
	// Merges stop at segCap bytes, which bounds the work one Register
	// does; maxSegments still forces them.
	segCap := max(minSegCap, r.opt.MaxBytes/4)
	for n := len(r.segs); n >= 2; n = len(r.segs) {
		older, newer := r.segs[n-2], r.segs[n-1]
		if (older.live > mergeRatio*newer.live || older.live+newer.live > segCap) && n <= maxSegments {
			break
		}
		ws := newer.liveWindows(older.liveWindows(nil))
		r.segs[n-1] = nil
		r.segs = append(r.segs[:n-2], buildSegment(ws, r.seed))
	}
}
