package policy

import (
	"encoding/hex"
	"strconv"

	"github.com/writ-dev/writ/events"
)

// flattenCanonical is FlattenArgs for a document grants.IsCanonical has
// certified: no whitespace, no escapes in strings or keys, numbers already
// in canonical form, literals spelled out. Under that grammar a value's
// bytes are its value, so the walk needs no decoder and allocates three
// times whatever the document holds: the leaves, one string all values are
// cut from, and one all paths are cut from (the leader flattens every
// request, so this is on the hot path).
//
// It reports false, and the caller takes the general path, for anything
// that path answers with an error (too many values, a path too long) and
// for anything unexpected, so every refusal keeps its one wording. The
// fuzz target FuzzFlattenCanonical holds the two paths to the same result.
func flattenCanonical(raw []byte) (Args, bool) {
	w := canonWalker{raw: raw, doc: string(raw)}
	end, ok := w.value(0)
	if !ok || end != len(raw) {
		return Args{}, false
	}
	a := Args{Carried: true}
	if len(w.leaves) == 0 {
		return a, true
	}
	paths := string(w.paths)
	a.Leaves = make([]Arg, len(w.leaves))
	for i, l := range w.leaves {
		a.Leaves[i] = l.arg
		a.Leaves[i].Path = paths[l.start:l.end]
	}
	return a, true
}

// canonWalker walks a certified canonical document. cur is the JSON
// pointer of the value being read; paths collects the pointer of every
// leaf, which are cut from one string at the end.
type canonWalker struct {
	raw    []byte
	doc    string // raw as a string: values are cut from it
	cur    []byte
	paths  []byte
	leaves []pendingLeaf
}

type pendingLeaf struct {
	arg        Arg
	start, end int // the leaf's pointer in paths
}

// value reads the value at i and returns where it ends.
func (w *canonWalker) value(i int) (int, bool) {
	if len(w.cur) > MaxArgPath || i >= len(w.raw) {
		return 0, false
	}
	switch c := w.raw[i]; c {
	case '{':
		return w.object(i + 1)
	case '[':
		return w.array(i + 1)
	case '"':
		end, ok := w.stringEnd(i)
		if !ok {
			return 0, false
		}
		v := w.doc[i+1 : end-1]
		if len(v) > MaxArgString {
			sum := events.Sum(w.raw[i+1 : end-1])
			return end, w.leaf(Arg{Kind: ArgElided, Value: hex.EncodeToString(sum[:]), Len: uint64(len(v))})
		}
		return end, w.leaf(Arg{Kind: ArgString, Value: v, Len: uint64(len(v))})
	case 't':
		return w.literal(i, "true", Arg{Kind: ArgBool, Value: "true"})
	case 'f':
		return w.literal(i, "false", Arg{Kind: ArgBool, Value: "false"})
	case 'n':
		return w.literal(i, "null", Arg{Kind: ArgNull})
	}
	end := i
	for end < len(w.raw) && (w.raw[end] == '-' || w.raw[end] == '.' || w.raw[end] >= '0' && w.raw[end] <= '9') {
		end++
	}
	if end == i {
		return 0, false
	}
	return end, w.leaf(Arg{Kind: ArgNumber, Value: w.doc[i:end]})
}

func (w *canonWalker) object(i int) (int, bool) {
	if i < len(w.raw) && w.raw[i] == '}' {
		return i + 1, true
	}
	base := len(w.cur)
	for {
		kend, ok := w.stringEnd(i)
		if !ok || kend >= len(w.raw) || w.raw[kend] != ':' {
			return 0, false
		}
		w.cur = append(w.cur, '/')
		w.cur = appendPointerToken(w.cur, w.raw[i+1:kend-1])
		if i, ok = w.value(kend + 1); !ok || i >= len(w.raw) {
			return 0, false
		}
		w.cur = w.cur[:base]
		switch w.raw[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
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
		switch w.raw[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// stringEnd returns the end of the string opening at i: a certified
// string has no escapes, so the next quote closes it.
func (w *canonWalker) stringEnd(i int) (int, bool) {
	if i >= len(w.raw) || w.raw[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(w.raw); j++ {
		if w.raw[j] == '"' {
			return j + 1, true
		}
	}
	return 0, false
}

func (w *canonWalker) literal(i int, lit string, arg Arg) (int, bool) {
	if len(w.raw)-i < len(lit) || string(w.raw[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), w.leaf(arg)
}

// leaf records a scalar at the current pointer; past MaxArgLeaves it
// reports false so the general path words the refusal.
func (w *canonWalker) leaf(arg Arg) bool {
	if len(w.leaves) >= MaxArgLeaves {
		return false
	}
	start := len(w.paths)
	w.paths = append(w.paths, w.cur...)
	w.leaves = append(w.leaves, pendingLeaf{arg: arg, start: start, end: len(w.paths)})
	return true
}

// appendPointerToken appends key as one JSON pointer reference token
// (RFC 6901: "~" as "~0", "/" as "~1"), as escapePointer does.
func appendPointerToken(dst, key []byte) []byte {
	for _, c := range key {
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
