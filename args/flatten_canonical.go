package args

import (
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/jsonwire"
)

// flattenCanonical is Flatten for a document IsCanonical has certified:
// no whitespace, numbers already in canonical form, literals
// spelled out, and strings and keys written as encoding/json writes them.
// Under that grammar a value's bytes are its value, except in a string
// with an escape, which jsonwire.Unescape decodes as encoding/json does.
// So the walk needs no general decoder, and it allocates a handful of
// times whatever the document holds: the leaves, one string the unescaped
// values are cut from, one the escaped values are decoded into, one all
// paths are cut from, and one per escaped key (the leader flattens every
// request, so this is on the hot path; shell commands with "2>&1" or "&&"
// are common, and encoding/json escapes those characters).
//
// It reports false, and the caller takes the general path, for anything
// that path answers with an error (too many values, a path too long) and
// for anything unexpected, so every refusal keeps its one wording. The
// fuzz target FuzzFlattenCanonical holds the two paths to the same result.
func flattenCanonical(raw []byte) (Flat, bool) {
	w := canonWalker{raw: raw, doc: string(raw)}
	end, ok := w.value(0)
	if !ok || end != len(raw) {
		return Flat{}, false
	}
	a := Flat{Carried: true}
	if len(w.leaves) == 0 {
		return a, true
	}
	paths, vals := string(w.paths), w.vals.String()
	a.Leaves = make([]Leaf, len(w.leaves))
	for i, l := range w.leaves {
		a.Leaves[i] = l.arg
		a.Leaves[i].Path = paths[l.start:l.end]
		if l.vend > 0 {
			a.Leaves[i].Value = vals[l.vend-int(l.arg.Len) : l.vend]
		}
	}
	return a, true
}

// canonWalker walks a certified canonical document. cur is the JSON
// pointer of the value being read; paths collects the pointer of every
// leaf, which are cut from one string at the end; vals collects the
// decoded form of the escaped string values, cut from its string at the
// end too.
type canonWalker struct {
	raw    []byte
	doc    string // raw as a string: unescaped values are cut from it
	cur    []byte
	paths  []byte
	vals   strings.Builder
	leaves []pendingLeaf
}

// pendingLeaf is a leaf whose path, and value if decoded, are still to
// be cut. It is kept as small as a leaf was before decoding: the pointer's
// offsets fit an int32 (paths holds at most MaxLeaves pointers of at
// most MaxPath bytes, whatever the input).
type pendingLeaf struct {
	arg        Leaf
	start, end int32 // the leaf's pointer in paths
	vend       int   // when > 0, the value is vals[vend-arg.Len : vend]
}

// value reads the value at i and returns where it ends.
func (w *canonWalker) value(i int) (int, bool) {
	if len(w.cur) > MaxPath || i >= len(w.raw) {
		return 0, false
	}
	switch c := w.raw[i]; c {
	case '{':
		return w.object(i + 1)
	case '[':
		return w.array(i + 1)
	case '"':
		end, escaped, ok := w.stringEnd(i)
		if !ok {
			return 0, false
		}
		if escaped {
			return end, w.escapedString(w.raw[i+1 : end-1])
		}
		return end, w.stringLeaf(w.doc[i+1 : end-1])
	case 't':
		return w.literal(i, "true", Leaf{Kind: Bool, Value: "true"})
	case 'f':
		return w.literal(i, "false", Leaf{Kind: Bool, Value: "false"})
	case 'n':
		return w.literal(i, "null", Leaf{Kind: Null})
	}
	end := i
	for end < len(w.raw) && (w.raw[end] == '-' || w.raw[end] == '.' || w.raw[end] >= '0' && w.raw[end] <= '9') {
		end++
	}
	if end == i {
		return 0, false
	}
	return end, w.leaf(Leaf{Kind: Number, Value: w.doc[i:end]})
}

func (w *canonWalker) object(i int) (int, bool) {
	if i < len(w.raw) && w.raw[i] == '}' {
		return i + 1, true
	}
	base := len(w.cur)
	for {
		kend, escaped, ok := w.stringEnd(i)
		if !ok || kend >= len(w.raw) || w.raw[kend] != ':' {
			return 0, false
		}
		key := w.doc[i+1 : kend-1]
		if escaped {
			key = jsonwire.UnescapeString(w.raw[i+1 : kend-1])
		}
		w.cur = append(w.cur, '/')
		w.cur = appendPointerToken(w.cur, key)
		if i, ok = w.value(kend + 1); !ok || i >= len(w.raw) {
			return 0, false
		}
		w.cur = w.cur[:base]
		var more bool
		if i, more, ok = w.next(i, '}'); !ok || !more {
			return i, ok
		}
	}
}

func (w *canonWalker) array(i int) (int, bool) {
	if i < len(w.raw) && w.raw[i] == ']' {
		return i + 1, true
	}
	base := len(w.cur)
	for n := 0; ; n++ {
		w.cur = strconv.AppendInt(append(w.cur, '/'), int64(n), 10)
		var ok bool
		if i, ok = w.value(i); !ok || i >= len(w.raw) {
			return 0, false
		}
		w.cur = w.cur[:base]
		var more bool
		if i, more, ok = w.next(i, ']'); !ok || !more {
			return i, ok
		}
	}
}

// next passes over what follows a member of an object or an element of
// an array at i: a comma (more follows) or the closing byte (the
// container ends after it).
func (w *canonWalker) next(i int, closing byte) (after int, more, ok bool) {
	switch w.raw[i] {
	case ',':
		return i + 1, true, true
	case closing:
		return i + 1, false, true
	}
	return 0, false, false
}

// stringEnd returns the end of the string opening at i, the first quote
// not escaped, and whether the string holds an escape. It passes over a
// backslash and the byte after it together, so the contents never end in
// a lone backslash and jsonwire.Unescape cannot read past them even on a
// document that was not certified.
func (w *canonWalker) stringEnd(i int) (end int, escaped, ok bool) {
	if i >= len(w.raw) || w.raw[i] != '"' {
		return 0, false, false
	}
	for j := i + 1; j < len(w.raw); j++ {
		switch w.raw[j] {
		case '"':
			return j + 1, escaped, true
		case '\\':
			escaped = true
			j++
		}
	}
	return 0, false, false
}

// escapedString records a string value whose contents, raw, hold escapes:
// decoded (a certified string holds only the escapes encoding/json writes,
// which jsonwire.Unescape decodes byte for byte as it does), and elided by
// its decoded length and the SHA-256 of its decoded bytes, as the general
// path does.
func (w *canonWalker) escapedString(raw []byte) bool {
	if len(raw) <= MaxString {
		// An escape is longer than what it decodes to, so this fits
		// MaxString decoded: into vals.
		start := w.vals.Len()
		w.vals.Grow(len(raw))
		jsonwire.Unescape(&w.vals, raw)
		end := w.vals.Len()
		if end == start {
			return false // an escaped string decodes to at least a byte
		}
		return w.record(pendingLeaf{arg: Leaf{Kind: String, Len: uint64(end - start)}, vend: end})
	}
	return w.stringLeaf(jsonwire.UnescapeString(raw))
}

// stringLeaf records the decoded string v: as it is, or past
// MaxString as its length and SHA-256, as the general path does.
func (w *canonWalker) stringLeaf(v string) bool {
	if len(v) > MaxString {
		sum := events.Sum([]byte(v))
		return w.leaf(Leaf{Kind: Elided, Value: hex.EncodeToString(sum[:]), Len: uint64(len(v))})
	}
	return w.leaf(Leaf{Kind: String, Value: v, Len: uint64(len(v))})
}

func (w *canonWalker) literal(i int, lit string, arg Leaf) (int, bool) {
	if len(w.raw)-i < len(lit) || string(w.raw[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), w.leaf(arg)
}

// leaf records a scalar at the current pointer.
func (w *canonWalker) leaf(arg Leaf) bool {
	return w.record(pendingLeaf{arg: arg})
}

// record adds l at the current pointer; past MaxLeaves it reports
// false so the general path words the refusal.
func (w *canonWalker) record(l pendingLeaf) bool {
	if len(w.leaves) >= MaxLeaves {
		return false
	}
	l.start = int32(len(w.paths))
	w.paths = append(w.paths, w.cur...)
	l.end = int32(len(w.paths))
	w.leaves = append(w.leaves, l)
	return true
}

// appendPointerToken appends key as one JSON pointer reference token
// (RFC 6901: "~" as "~0", "/" as "~1"), as escapePointer does.
func appendPointerToken(dst []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
