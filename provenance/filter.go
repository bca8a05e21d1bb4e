package provenance

import (
	"bytes"
	"encoding/binary"
)

// Short values (shorter than FragmentMin) are too short for the gram index
// and must be found wherever they occur. Window bytes are laid, as ranges,
// into blocks of up to blockCap bytes, each with a Bloom filter of
// filterBytes over:
//
//   - every 4-byte gram of its ranges (one bit each);
//   - every complete short word: a maximal run of token bytes (see
//     isTokenByte) of at most maxWordLen bytes, bounded on each side by a
//     non-token byte or by the edge of the registered content (three bits
//     each).
//
// A value of 6..15 bytes that occurs in a range has all its 4-byte grams
// there; a token of 1..5 bytes that occurs there as a token has its runs
// of token bytes there as complete words. Trace therefore looks for a
// short value only in the ranges of blocks whose filter holds all of its
// keys, and checks each occurrence against the window bytes, which keeps
// matching exact. A token of non-token bytes only (such as "-") has no
// key and is looked for in every range.
//
// Each key sets its bits within one 64-bit word of the filter, so a probe
// reads one word per key. At 2 KB per 4 KB of window bytes a full filter
// has at most about a fifth of its bits set (random text; prose far
// fewer), so a 6-byte value (three grams) or a word passes the filter of
// about 1% of the blocks that do not hold it, and longer values fewer.
// Probing costs about 10 ns per block (some 25 us for 10 MB).
//
// A window longer than the room left in the open block is split into
// ranges that overlap by blockOverlap bytes, so every occurrence of a
// short value lies in one range.
const (
	blockCap       = 4096
	filterWordBits = 8 // log2 of the filter's 64-bit words
	filterBytes    = 8 << filterWordBits
	blockOverlap   = FragmentMin - 1
	// minSplit: a window is split only into ranges of at least this many
	// bytes, so a split always advances.
	minSplit   = 4 * blockOverlap
	maxWordLen = MinValueLen - 1
	wordKeyTag = 1 << 63 // word keys; gram keys are below 1<<32
)

// fblock is a filter block. Its filter and ranges only grow while it is
// the open (last) block; evictions only lower live.
type fblock struct {
	filt   []byte // filterBytes; may alias a loaded registry's buffer
	ranges []frange
	used   int  // bytes of all ranges ever added
	live   int  // bytes of the ranges of live windows
	queued bool // in Registry.repack
	gone   bool // repacked or empty: dropped from Registry.blocks
}

type frange struct {
	w      *window
	lo, hi uint32
}

// probe is one filter word a value's keys must all be set in.
type probe struct {
	word uint32
	mask uint64
}

func gramProbe(seed uint64, g uint32) probe {
	h := hashKey(seed, uint64(g))
	return probe{uint32(h >> (64 - filterWordBits)), 1 << (h & 63)}
}

func wordProbe(seed uint64, word []byte) probe {
	var k uint64
	for i, c := range word {
		k |= uint64(c) << (8 * i)
	}
	h := hashKey(seed, k|wordKeyTag)
	return probe{uint32(h >> (64 - filterWordBits)), 1<<(h&63) | 1<<(h>>6&63) | 1<<(h>>12&63)}
}

func (b *fblock) set(p probe) {
	i := 8 * p.word
	binary.LittleEndian.PutUint64(b.filt[i:], binary.LittleEndian.Uint64(b.filt[i:])|p.mask)
}

func (b *fblock) mayHold(ps []probe) bool {
	for _, p := range ps {
		if binary.LittleEndian.Uint64(b.filt[8*p.word:])&p.mask != p.mask {
			return false
		}
	}
	return true
}

// openBlock returns the block new ranges go into, with room for at least
// need bytes or, if need does not fit in any block, for minSplit.
func (r *Registry) openBlock(need int) *fblock {
	if n := len(r.blocks); n > 0 {
		b := r.blocks[n-1]
		if room := blockCap - b.used; !b.gone && (room >= need || room >= minSplit) {
			return b
		}
	}
	b := &fblock{filt: make([]byte, filterBytes)}
	r.blocks = append(r.blocks, b)
	return b
}

// filterWindow adds bytes [lo, hi) of live window w to the filters,
// splitting them over blocks as needed.
func (r *Registry) filterWindow(w *window, lo, hi int) {
	for {
		b := r.openBlock(hi - lo)
		end := hi
		if room := blockCap - b.used; end-lo > room {
			end = lo + room
		}
		r.addRange(b, w, lo, end)
		if end == hi {
			return
		}
		lo = end - blockOverlap
	}
}

func (r *Registry) addRange(b *fblock, w *window, lo, hi int) {
	b.ranges = append(b.ranges, frange{w, uint32(lo), uint32(hi)})
	b.used += hi - lo
	b.live += hi - lo
	w.blocks = append(w.blocks, b)
	w.spans = append(w.spans, int32(hi-lo))
	d := w.data
	for i := lo; i+4 <= hi; i++ {
		b.set(gramProbe(r.seed, binary.LittleEndian.Uint32(d[i:])))
	}
	for i := lo; i < hi; {
		if !isTokenByte(d[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(d) && isTokenByte(d[j]) {
			j++
		}
		// The run must start here (not before lo), end within the range
		// and be bounded by the content's edges where it touches the
		// window's.
		if (i > lo || i == 0 || !isTokenByte(d[i-1])) && j <= hi && j-i <= maxWordLen &&
			(i > 0 || w.first) && (j < len(d) || w.last) {
			b.set(wordProbe(r.seed, d[i:j]))
		}
		i = j
	}
}

// shortProbes returns the filter probes of a short normalized value: its
// 4-byte grams and the runs of token bytes it holds whole (all of them for
// a token, the inner ones, bounded by non-token bytes in v, otherwise).
func (r *Registry) shortProbes(v []byte, token bool, out []probe) []probe {
	for i := 0; i+4 <= len(v); i++ {
		out = append(out, gramProbe(r.seed, binary.LittleEndian.Uint32(v[i:])))
	}
	for i := 0; i < len(v); {
		if !isTokenByte(v[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(v) && isTokenByte(v[j]) {
			j++
		}
		if j-i <= maxWordLen && (token || i > 0 && j < len(v)) {
			out = append(out, wordProbe(r.seed, v[i:j]))
		}
		i = j
	}
	return out
}

// matchShort finds the sources holding short value v: whole (as a
// substring) or, below MinValueLen bytes, as a token.
func (r *Registry) matchShort(v []byte, hits map[*source]hit) {
	token := len(v) < MinValueLen
	mode := ModeWhole
	if token {
		mode = ModeToken
	}
	r.matchBlocks(v, token, token, mode, hits)
}

// matchBlocks searches the blocks whose filters admit v's probes (word
// probes when probeToken, else gram probes) for an occurrence of v, as a
// token when bounded is set, and records a hit of mode per source.
func (r *Registry) matchBlocks(v []byte, probeToken, bounded bool, mode MatchMode, hits map[*source]hit) {
	var buf [2 * FragmentMin]probe
	ps := r.shortProbes(v, probeToken, buf[:0])
	for _, b := range r.blocks {
		if b.gone || b.live == 0 || !b.mayHold(ps) {
			continue
		}
		for _, rg := range b.ranges {
			w := rg.w
			if w.dead {
				continue
			}
			if _, ok := hits[w.src]; ok {
				continue
			}
			if containsIn(w, int(rg.lo), int(rg.hi), v, bounded) {
				hits[w.src] = hit{src: w.src, mode: mode, n: len(v)}
			}
		}
	}
}

// containsIn reports whether v occurs in bytes [lo, hi) of w's data; as a
// token, if token is set: bounded on each side by a non-token byte or by
// the edge of the registered content (not a cut between windows).
func containsIn(w *window, lo, hi int, v []byte, token bool) bool {
	d := w.data
	if hi > len(d) {
		hi = len(d)
	}
	for lo+len(v) <= hi {
		j := bytes.Index(d[lo:hi], v)
		if j < 0 {
			return false
		}
		i, e := lo+j, lo+j+len(v)
		if !token || (i > 0 && !isTokenByte(d[i-1]) || i == 0 && w.first) &&
			(e < len(d) && !isTokenByte(d[e]) || e == len(d) && w.last) && !inLiteral(d, i, e) {
			return true
		}
		lo = i + 1
	}
	return false
}

// inLiteral reports whether d[i:e], a number (digits and separators),
// continues a longer number: "250" in "1.250,00" or "98.7" in "98.70" is
// not a token of its own.
func inLiteral(d []byte, i, e int) bool {
	for _, c := range d[i:e] {
		if !isNumByte(c) {
			return false
		}
	}
	if i >= 2 && isDigit(d[i]) && isNumSep(d[i-1]) && isDigit(d[i-2]) {
		return true
	}
	return e+1 < len(d) && isDigit(d[e-1]) && isNumSep(d[e]) && isDigit(d[e+1])
}

func isNumSep(c byte) bool { return c == '.' || c == ',' || c == '\'' }

// repackBlocks moves the live ranges of blocks that eviction left less
// than half live into the open block, and drops empty blocks, so that
// every block but the open one is at least half live.
func (r *Registry) repackBlocks() {
	if len(r.repack) == 0 {
		return
	}
	queue := r.repack
	r.repack = nil
	for _, b := range queue {
		b.queued = false
		if b.gone || b.live*2 >= b.used {
			continue
		}
		b.gone = true // before refiling, so that it is not the open block
		for _, rg := range b.ranges {
			w := rg.w
			if w.dead {
				continue
			}
			for i, wb := range w.blocks {
				if wb == b {
					w.blocks = append(w.blocks[:i], w.blocks[i+1:]...)
					w.spans = append(w.spans[:i], w.spans[i+1:]...)
					break
				}
			}
			r.filterWindow(w, int(rg.lo), int(rg.hi))
		}
	}
	k := 0
	for _, b := range r.blocks {
		if !b.gone {
			r.blocks[k] = b
			k++
		}
	}
	clear(r.blocks[k:])
	r.blocks = r.blocks[:k]
}
