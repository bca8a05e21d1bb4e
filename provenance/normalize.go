package provenance

import (
	"unicode"
	"unicode/utf8"
)

// Normalize returns the matching form of b: runes lower-cased (with
// unicode.ToLower, then folded to the smallest rune of their case orbit so
// e.g. the Kelvin sign matches k), format characters such as zero-width
// spaces dropped, invalid UTF-8 bytes kept as U+FFFD, and runs of white
// space collapsed to one ASCII space with leading/trailing space trimmed.
func Normalize(b []byte) []byte {
	out := make([]byte, 0, len(b))
	space := false
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		if r < utf8.RuneSelf {
			c := byte(r)
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
				space = true
				continue
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			}
			if space && len(out) > 0 {
				out = append(out, ' ')
			}
			space = false
			out = append(out, c)
			continue
		}
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		r = foldRune(r)
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		out = utf8.AppendRune(out, r)
	}
	return out
}

func foldRune(r rune) rune {
	r = unicode.ToLower(r)
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	// Prefer the lower-case member when it is ASCII (e.g. K/k/Kelvin -> k).
	if min < utf8.RuneSelf {
		return unicode.ToLower(min)
	}
	return r
}
