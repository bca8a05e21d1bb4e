package provenance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/writ-dev/writ/authority"
)

// refShort is the reference for short values: every live window scanned
// whole, no index. It returns the ids of the matching sources.
func refShort(r *Registry, v []byte) []string {
	token := len(v) < MinValueLen
	var out []string
	for id, s := range r.sources {
		for _, w := range s.windows {
			if containsIn(w, 0, len(w.data), v, token) {
				out = append(out, id)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// refContent is the definition of short-value matching on the registered
// content itself (no windows): v occurs in it, and for a token it is
// bounded by non-token bytes or the content's ends. It holds for sources
// nothing was evicted from.
func refContent(contents map[string][][]byte, v []byte) []string {
	var out []string
	for id, cs := range contents {
		found := false
		for _, n := range cs {
			for i := 0; !found && i+len(v) <= len(n); i++ {
				if !bytes.Equal(n[i:i+len(v)], v) {
					continue
				}
				e := i + len(v)
				found = len(v) >= MinValueLen ||
					(i == 0 || !isTokenByte(n[i-1])) && (e == len(n) || !isTokenByte(n[e])) && !inLiteral(n, i, e)
			}
		}
		if found {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// refIndex is the index of the original implementation: a map of every
// live window's aligned grams.
func refIndex(r *Registry) map[uint64][]posting {
	index := map[uint64][]posting{}
	for _, id := range sortedIDs(r.sources) {
		for _, w := range r.sources[id].windows {
			for off := 0; off+gramSize <= len(w.data); off += gramStride {
				g := binary.LittleEndian.Uint64(w.data[off:])
				index[g] = append(index[g], posting{w, uint32(off)})
			}
		}
	}
	return index
}

// refFragment is the reference for values of FragmentMin bytes or more:
// the matching of the original implementation on refIndex.
func refFragment(index map[uint64][]posting, v []byte) (map[string]hit, int, int) {
	hits := map[string]hit{}
	var runs [][2]int
	skipped := 0
	type dg struct {
		w *window
		d int
	}
	covered := map[dg]int{}
	n := len(v)
	for p := 0; p+gramSize <= n; p++ {
		ps := index[binary.LittleEndian.Uint64(v[p:])]
		if len(ps) > maxPostingsScan {
			skipped++
			continue
		}
		for _, pt := range ps {
			off := int(pt.off)
			dk := dg{pt.win, off - p}
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
			id := pt.win.src.desc.ID
			if h, ok := hits[id]; !ok || run > h.n {
				hits[id] = hit{mode: mode, n: run}
			}
		}
	}
	return hits, coverage(runs), skipped
}

func hitIDs(hits map[*source]hit) map[string]hit {
	out := map[string]hit{}
	for s, h := range hits {
		out[s.desc.ID] = hit{mode: h.mode, n: h.n}
	}
	return out
}

func ids(hits map[*source]hit) []string {
	var out []string
	for s := range hits {
		out = append(out, s.desc.ID)
	}
	sort.Strings(out)
	return out
}

// checkInvariants checks the structure both indexes keep between calls.
func checkInvariants(t *testing.T, r *Registry) {
	t.Helper()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var total int64
	live := map[*window]bool{}
	for _, s := range r.sources {
		var sb int64
		for _, w := range s.windows {
			live[w] = true
			sb += int64(len(w.data))
			if w.dead || w.seg == nil {
				t.Fatalf("window %d: dead=%v seg=%v", w.id, w.dead, w.seg)
			}
			// The ranges of a window chain over all its bytes.
			type rg struct{ lo, hi uint32 }
			var rs []rg
			spans := map[*fblock]int{}
			for i, b := range w.blocks {
				spans[b] += int(w.spans[i])
			}
			for b, span := range spans {
				n := 0
				for _, x := range b.ranges {
					if x.w == w {
						rs = append(rs, rg{x.lo, x.hi})
						n += int(x.hi - x.lo)
					}
				}
				if b.gone || span != n {
					t.Fatalf("window %d: block gone=%v spans %d of %d", w.id, b.gone, span, n)
				}
			}
			sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
			if len(rs) == 0 || rs[0].lo != 0 || int(rs[len(rs)-1].hi) != len(w.data) {
				t.Fatalf("window %d (len %d): ranges %v", w.id, len(w.data), rs)
			}
			for i := 1; i < len(rs); i++ {
				if rs[i].lo != rs[i-1].hi-blockOverlap {
					t.Fatalf("window %d: ranges %v do not chain", w.id, rs)
				}
			}
		}
		if sb != s.bytes {
			t.Fatalf("source %s: %d bytes, counted %d", s.desc.ID, s.bytes, sb)
		}
		total += sb
	}
	if total != r.total || total > r.opt.MaxBytes {
		t.Fatalf("total %d, counted %d, bound %d", r.total, total, r.opt.MaxBytes)
	}
	var lastID uint64
	for _, s := range r.segs {
		var sl int64
		for i, w := range s.wins {
			if s.ids[i] <= lastID {
				t.Fatalf("segment ids not ascending")
			}
			lastID = s.ids[i]
			if w != nil && !w.dead {
				if !live[w] || w.seg != s {
					t.Fatalf("segment holds window %d of another segment", w.id)
				}
				sl += int64(len(w.data))
			}
		}
		if sl != s.live || 4*s.live < 3*s.size() {
			t.Fatalf("segment live %d (counted %d) of %d", s.live, sl, s.size())
		}
	}
	if len(r.segs) > maxSegments {
		t.Fatalf("%d segments", len(r.segs))
	}
	var filters int
	for i, b := range r.blocks {
		n := 0
		for _, x := range b.ranges {
			if !x.w.dead {
				n += int(x.hi - x.lo)
			}
		}
		if b.gone || n != b.live || b.used > blockCap || b.live == 0 {
			t.Fatalf("block %d: gone=%v live %d (counted %d) used %d", i, b.gone, b.live, n, b.used)
		}
		if i < len(r.blocks)-1 && 2*b.live < b.used {
			t.Fatalf("block %d less than half live: %d of %d", i, b.live, b.used)
		}
		filters += len(b.filt)
	}
	// The documented memory bound of the filters.
	if int64(filters) > total+filterBytes {
		t.Fatalf("filters %d bytes for %d retained", filters, total)
	}
}

// Short values of every length, token and whole, against the reference:
// at window cuts, at content edges, inside words, across blocks.
func TestShortValuesMatchReference(t *testing.T) {
	for _, opt := range []Options{
		{MaxBytes: 1 << 20, WindowSize: 64, Overlap: 16},    // many cuts
		{MaxBytes: 1 << 20, WindowSize: 9000, Overlap: 300}, // windows over several blocks
		{MaxBytes: 1 << 20}, // defaults
		{MaxBytes: 4 << 10, WindowSize: 256, Overlap: 32}, // eviction
	} {
		t.Run(fmt.Sprintf("%d-%d", opt.WindowSize, opt.MaxBytes), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(opt.WindowSize)))
			r := NewRegistry(opt)
			contents := map[string][][]byte{}
			// A small alphabet makes short values recur, at every
			// position relative to cuts and blocks.
			alpha := []string{"a", "b", "ab", "ls", "1", "12", "-", " ", ".", "x9", "é", "\u212a", "qqab", " - "}
			for i := 0; i < 40; i++ {
				var sb strings.Builder
				n := rng.Intn(3000)
				for sb.Len() < n {
					sb.WriteString(alpha[rng.Intn(len(alpha))])
				}
				id := fmt.Sprintf("s%02d", rng.Intn(12))
				mustRegister(t, r, id, authority.ChannelToolResult, Evidence, sb.String())
				contents[id] = append(contents[id], Normalize([]byte(sb.String())))
			}
			checkInvariants(t, r)
			pressured := r.Pressure()
			var values [][]byte
			for _, cs := range contents {
				for _, n := range cs {
					for k := 0; k < 20 && len(n) > 0; k++ {
						l := 1 + rng.Intn(FragmentMin-1)
						i := rng.Intn(len(n))
						if i+l > len(n) {
							l = len(n) - i
						}
						values = append(values, n[i:i+l])
					}
				}
			}
			for l := 1; l < FragmentMin; l++ {
				var v []byte
				for len(v) < l {
					v = append(v, alpha[rng.Intn(len(alpha))]...)
				}
				values = append(values, Normalize(v[:l]))
			}
			for _, v := range values {
				if len(v) == 0 || len(v) >= FragmentMin {
					continue
				}
				r.mu.RLock()
				hits := map[*source]hit{}
				r.matchShort(v, hits)
				want := refShort(r, v)
				r.mu.RUnlock()
				if got := ids(hits); !reflect.DeepEqual(got, want) {
					t.Fatalf("%q: got %v, want %v", v, got, want)
				}
				// Without eviction, window-level matching is the
				// content-level definition.
				var unpressed []string
				for _, id := range refContent(contents, v) {
					if pressured[id] == 0 {
						unpressed = append(unpressed, id)
					}
				}
				var gotUnpressed []string
				for _, id := range want {
					if pressured[id] == 0 {
						gotUnpressed = append(gotUnpressed, id)
					}
				}
				if !reflect.DeepEqual(gotUnpressed, unpressed) {
					t.Fatalf("%q: windows give %v, content %v", v, gotUnpressed, unpressed)
				}
			}
		})
	}
}

// A token is bounded by the content's edges, not by the cuts between
// windows: "ab" at the start of a window, inside the word "qqab", is no
// token; the same bytes at the content's start or end are.
func TestTokenAtWindowCut(t *testing.T) {
	opt := Options{MaxBytes: 1 << 20, WindowSize: 64, Overlap: 16}
	r := NewRegistry(opt)
	step := opt.WindowSize - opt.Overlap
	// The second window starts at "ab" inside "qqab", and the first one
	// ends with "cd" of "cdzz".
	content := strings.Repeat("x", step-3) + " qqab -" + strings.Repeat("y", 9) + " cdzz " + strings.Repeat("w", 60) + " tail"
	if i, j := strings.Index(content, "ab"), strings.Index(content, "cdzz"); i != step || j+2 != opt.WindowSize {
		t.Fatalf("ab at %d, cdzz at %d", i, j)
	}
	mustRegister(t, r, "s", authority.ChannelToolResult, Evidence, content)
	if !strings.HasPrefix(string(r.sources["s"].windows[1].data), "ab ") {
		t.Fatalf("second window %q", r.sources["s"].windows[1].data)
	}
	for _, tc := range []struct {
		v     string
		match bool
	}{
		{"ab", false}, // inside qqab, at a cut
		{"qqab", true},
		{"cd", false}, // inside cdzz, at a cut
		{"cdzz", true},
		{"xxx", false},    // inside the x run, at the content's start
		{"tail", true},    // at the content's end
		{"ab -yyy", true}, // whole (6..15 bytes): any occurrence
	} {
		tr := r.Trace("f", tc.v)
		if got := len(tr.Matches) > 0; got != tc.match {
			t.Errorf("%q: matched %v, want %v", tc.v, got, tc.match)
		}
	}
	// At the content's edges a short word is a token.
	r2 := NewRegistry(opt)
	mustRegister(t, r2, "edge", authority.ChannelToolResult, Evidence, "ls"+strings.Repeat(" filler", 30)+" rm")
	for _, v := range []string{"ls", "rm"} {
		if tr := r2.Trace("f", v); len(tr.Matches) != 1 || tr.Matches[0].Mode != ModeToken {
			t.Errorf("%q: %+v", v, tr.Matches)
		}
	}
}

// Each length from 1 to 15: below MinValueLen only whole tokens match,
// from MinValueLen on any occurrence does.
func TestShortValueLengths(t *testing.T) {
	r := NewRegistry(Options{})
	content := "id = abcdefghijklmnopq ;" // a word of 17 letters
	mustRegister(t, r, "s", authority.ChannelToolResult, Evidence, content)
	word := "abcdefghijklmnopq"
	for l := 1; l < FragmentMin; l++ {
		inner := word[1 : 1+l] // inside the word: never a token
		tr := r.Trace("f", inner)
		if want := l >= MinValueLen; (len(tr.Matches) > 0) != want {
			t.Errorf("inner %q: %+v, want match %v", inner, tr.Matches, want)
		}
		if l >= MinValueLen && (tr.Matches[0].Mode != ModeWhole || tr.Covered != l || tr.Authority != Evidence) {
			t.Errorf("inner %q: %+v", inner, tr)
		}
	}
	for _, tc := range []struct {
		v    string
		mode MatchMode
	}{
		{"id", ModeToken}, {"=", ModeToken}, {"id =", ModeToken}, {";", ModeToken}, {"d =", ""},
		{"= ab", ""}, {"q ;", ""}, {"id = a", ModeWhole}, {"pq ;", ""}, {"nopq ;", ModeWhole},
		{"ID  =", ModeToken}, {"abcdefghijklmnop", ModeWhole}, // normalized; 16 bytes: a fragment
	} {
		tr := r.Trace("f", tc.v)
		switch {
		case tc.mode == "" && len(tr.Matches) != 0:
			t.Errorf("%q: %+v", tc.v, tr.Matches)
		case tc.mode != "" && (len(tr.Matches) != 1 || tr.Matches[0].Mode != tc.mode):
			t.Errorf("%q: %+v, want %s", tc.v, tr.Matches, tc.mode)
		}
	}
}

// Values of FragmentMin bytes or more match exactly as the original map
// index did, while nothing is evicted; with eviction, a source the
// reference finds and the index does not is only ever missed with stop
// grams in the trace (which then counts as evidence).
func TestFragmentsMatchReference(t *testing.T) {
	for _, max := range []int64{8 << 20, 96 << 10} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			rng := rand.New(rand.NewSource(max))
			r := NewRegistry(Options{MaxBytes: max, WindowSize: 1024, Overlap: 64})
			words := strings.Fields("alpha beta gamma delta pay rent to the of 4711 iban GB29NWBK60161331926819 x")
			var all []string
			for i := 0; i < 120; i++ {
				var sb strings.Builder
				for n := rng.Intn(6000); sb.Len() < n; {
					sb.WriteString(words[rng.Intn(len(words))])
					if rng.Intn(5) == 0 {
						fmt.Fprintf(&sb, "%d", rng.Intn(1000))
					}
					sb.WriteByte(" \n-"[rng.Intn(3)])
				}
				mustRegister(t, r, fmt.Sprintf("s%03d", rng.Intn(30)), authority.ChannelToolResult, Evidence, sb.String())
				all = append(all, sb.String())
				if i%40 == 39 {
					checkInvariants(t, r)
				}
			}
			evicted := len(r.Pressure()) > 0
			if evicted != (max < 1<<20) {
				t.Fatalf("evicted=%v", evicted)
			}
			index := refIndex(r)
			for i := 0; i < 300; i++ {
				c := Normalize([]byte(all[rng.Intn(len(all))]))
				if len(c) < FragmentMin {
					continue
				}
				l := FragmentMin + rng.Intn(200)
				s := rng.Intn(len(c))
				if s+l > len(c) {
					l = len(c) - s
				}
				if l < FragmentMin {
					continue
				}
				v := append([]byte(nil), c[s:s+l]...)
				if rng.Intn(3) == 0 { // a model-made middle
					v = append(append(v[:l/2:l/2], "zzzz qqqq"...), c[s+l/2:s+l]...)
				}
				r.mu.RLock()
				hits, cov, skip := r.matchLocked(v)
				rh, rcov, rskip := refFragment(index, v)
				r.mu.RUnlock()
				got := hitIDs(hits)
				if !evicted {
					if !reflect.DeepEqual(got, rh) || cov != rcov || skip != rskip {
						t.Fatalf("%q: got %v %d %d, want %v %d %d", v, got, cov, skip, rh, rcov, rskip)
					}
					continue
				}
				if skip < rskip {
					t.Fatalf("%q: fewer stop grams than the live count gives: %d < %d", v, skip, rskip)
				}
				for id := range rh {
					if _, ok := got[id]; !ok && skip == 0 {
						t.Fatalf("%q: missed %s without stop grams", v, id)
					}
				}
				for id, h := range got {
					if rh[id] != h && skip == rskip {
						t.Fatalf("%q: %s: %v, want %v", v, id, h, rh[id])
					}
				}
			}
		})
	}
}

// A gram common across segments (each below the stop count, together
// above it) is a stop gram, and the trace counts as evidence.
func TestStopGramAcrossSegments(t *testing.T) {
	r := NewRegistry(Options{})
	prompt := "transfer to " + iban
	mustRegister(t, r, "user", authority.ChannelUserPrompt, Instruction, prompt)
	for i := 0; i < 3; i++ {
		// 40 aligned copies of the IBAN's grams per registration.
		mustRegister(t, r, fmt.Sprintf("page%d", i), authority.ChannelWebFetch, Evidence, strings.Repeat(iban+"..", 40))
	}
	if len(r.segs) < 2 {
		t.Fatalf("%d segments", len(r.segs))
	}
	tr := r.Trace("to", iban)
	if tr.StopGrams == 0 || tr.Complete || tr.Authority != Evidence {
		t.Fatalf("%+v", tr)
	}
}

// Registering and evicting keeps both indexes within their invariants
// and memory bound, and a registry's traces survive a round trip through
// its encoding unchanged.
func TestChurnAndRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	r := NewRegistry(Options{MaxBytes: 256 << 10, WindowSize: 2048, Overlap: 128})
	var probes []string
	for i := 0; i < 400; i++ {
		var sb strings.Builder
		n := 1 + rng.Intn([]int{200, 3000, 20000}[rng.Intn(3)])
		for sb.Len() < n {
			fmt.Fprintf(&sb, "w%d ", rng.Intn(5000))
		}
		id := fmt.Sprintf("src-%d", rng.Intn(25))
		auth := Level(rng.Intn(3))
		mustRegister(t, r, id, authority.ChannelToolResult, auth, sb.String())
		f := strings.Fields(sb.String())
		probes = append(probes, f[rng.Intn(len(f))], strings.Join(f[:min(len(f), 6)], " "))
		if i%50 == 0 {
			checkInvariants(t, r)
		}
	}
	checkInvariants(t, r)
	data, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got := NewRegistry(Options{})
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, got)
	if again, _ := got.MarshalBinary(); !bytes.Equal(again, data) {
		t.Fatal("re-encoding differs")
	}
	for _, p := range probes {
		a, b := r.Trace("f", p), got.Trace("f", p)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: %+v vs %+v", p, a, b)
		}
	}
	// The decoded registry keeps working: more churn, same invariants.
	for i := 0; i < 50; i++ {
		mustRegister(t, got, fmt.Sprintf("src-%d", i%7), authority.ChannelToolResult, Evidence, strings.Repeat(fmt.Sprintf("more %d ", i), 500))
	}
	checkInvariants(t, got)
}

// A gram is a stop gram with more than maxPostingsScan postings, not at
// exactly that many.
func TestStopGramThreshold(t *testing.T) {
	const gram = "abcdefgh"
	for _, n := range []int{maxPostingsScan, maxPostingsScan + 1} {
		r := NewRegistry(Options{})
		// One window; every aligned gram of it is gram.
		mustRegister(t, r, "s", authority.ChannelToolResult, Evidence, strings.Repeat(gram, n))
		tr := r.Trace("f", gram+gram)
		if stop := n > maxPostingsScan; (tr.StopGrams > 0) != stop || (len(tr.Matches) > 0) == stop || tr.Complete == stop {
			t.Fatalf("%d postings: %+v", n, tr)
		}
	}
}
