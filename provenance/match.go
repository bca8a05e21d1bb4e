package provenance

import (
	"encoding/binary"
	"slices"
)

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
		r.matchShort(v, hits)
		if len(hits) > 0 {
			return hits, n, 0
		}
		return hits, 0, 0
	}
	var runs [][2]int
	skipped := 0
	// Fragment mode: look up every gram of v; extend each aligned hit.
	var covered diagTable // end of the last run found on each diagonal
	var ps []posting
	for p := 0; p+gramSize <= n; p++ {
		var stop bool
		ps, stop = r.gramPostings(binary.LittleEndian.Uint64(v[p:]), ps[:0])
		if stop {
			// A stop gram: too common to seed a match. A distinctive
			// copied run has rarer grams; a run made only of stop grams
			// is boilerplate. Skipping makes the trace incomplete, and
			// the caller lowers its authority to Evidence.
			skipped++
			continue
		}
		for _, pt := range ps {
			off := int(pt.off)
			dk := diag{pt.win.id, uint32(off - p + n)} // below 2^30
			if end, ok := covered.get(dk); ok && p < end {
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
			run := ve - vs
			if run < FragmentMin {
				// No other seed on this diagonal lies inside a run
				// this short (seeds are gramStride apart and need
				// gramSize matching bytes), so it need not be recorded.
				continue
			}
			covered.put(dk, ve)
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

// diag is a diagonal: a window (by id, which is never 0) and the
// difference of offsets (window minus value, plus the value's length).
type diag struct {
	id uint64
	d  uint32
}

// diagTable maps a diagonal to the end of the last run found on it: an
// open-addressing hash table, as a Go map spends most of a long trace
// hashing.
type diagTable struct {
	keys []diag // id 0: empty
	ends []int32
	n    int
}

func (t *diagTable) slot(k diag) int {
	mask := len(t.keys) - 1
	x := k.id*0x9e3779b97f4a7c15 + uint64(k.d)*0xc2b2ae3d27d4eb4f
	x ^= x >> 32
	i := int(x*0xd6e8feb86659fd93>>40) & mask
	for t.keys[i].id != 0 && t.keys[i] != k {
		i = (i + 1) & mask
	}
	return i
}

func (t *diagTable) get(k diag) (int, bool) {
	if t.n == 0 {
		return 0, false
	}
	i := t.slot(k)
	return int(t.ends[i]), t.keys[i].id != 0
}

func (t *diagTable) put(k diag, end int) {
	if 2*(t.n+1) > len(t.keys) {
		old, oldEnds := t.keys, t.ends
		size := 2 * len(old)
		if size == 0 {
			size = 64
		}
		t.keys, t.ends = make([]diag, size), make([]int32, size)
		for i, ok := range old {
			if ok.id != 0 {
				j := t.slot(ok)
				t.keys[j], t.ends[j] = ok, oldEnds[i]
			}
		}
	}
	i := t.slot(k)
	if t.keys[i].id == 0 {
		t.n++
		t.keys[i] = k
	}
	t.ends[i] = int32(end)
}

// coverage returns the size of the union of the half-open intervals.
func coverage(iv [][2]int) int {
	slices.SortFunc(iv, func(a, b [2]int) int { return a[0] - b[0] })
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
