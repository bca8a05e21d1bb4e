// Package jsonwire is reflection-free JSON writing and scanning that
// matches encoding/json byte for byte, for writ's hot wire codecs.
//
// The codecs built on it (grants.Envelope, the api request encoders and the
// issuer's fast request decoders) are second implementations of what
// encoding/json does for their types, held to it by differential tests:
// the writers here produce exactly encoding/json's bytes, and the Scanner
// accepts only what encoding/json accepts, so that a codec can hand every
// input it is not certain of to encoding/json.
package jsonwire

import (
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// htmlSafe[b] is true for the ASCII bytes encoding/json copies into a
// string unescaped with HTML escaping on: everything from the space to DEL
// except the quote, the backslash and <, > and &.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

// AppendString appends s as a JSON string the way encoding/json does with
// HTML escaping (its default): \" \\ \b \f \n \r \t, \u00XX for the other
// control bytes and for <, > and &, \u2028 and \u2029, and \ufffd for each
// byte that is not part of valid UTF-8.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if htmlSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendStringField appends key (the comma, quoted name and colon, as in
// `,"name":`) and s unless s is empty: a string field with omitempty.
func AppendStringField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return AppendString(append(dst, key...), s)
}

// AppendUintField appends key and v unless v is zero: an unsigned integer
// field with omitempty.
func AppendUintField(dst []byte, key string, v uint64) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendUint(append(dst, key...), v, 10)
}

// AppendStringsField appends key and the array ss unless ss is empty: a
// []string field with omitempty.
func AppendStringsField(dst []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return dst
	}
	dst = append(dst, key...)
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}

// AppendCompact appends src as encoding/json writes a json.RawMessage
// with HTML escaping on: whitespace outside strings removed, <, > and &
// written \u003c, \u003e and \u0026, U+2028 and U+2029 written \u2028 and
// \u2029, and every other byte (escapes, numbers as written, invalid UTF-8
// in strings) copied. ok is false, and dst is returned unchanged, when src
// is not one valid JSON value (as encoding/json's scanner checks it) or
// nests deeper than maxDepth (as Scanner.Skip counts it).
func AppendCompact(dst, src []byte, maxDepth int) (_ []byte, ok bool) {
	s := Scanner{Data: src}
	s.SkipSpace()
	c := compactor{dst: dst, start: s.Pos, mark: s.Pos}
	if !s.walk(maxDepth, &c) {
		return dst, false
	}
	c.gap(&s)
	end := s.Pos
	if !s.End() {
		return dst, false
	}
	return append(c.dst, src[c.start:end]...), true
}

// compactor is AppendCompact's state as Scanner.walk passes over the
// value. Bytes are copied in runs: dst lacks only Data[start:Pos].
type compactor struct {
	dst   []byte
	start int
	// mark is where the last string ended: Data[mark:Pos] is structure,
	// whitespace, numbers and literals, which gap compacts.
	mark int
}

// gap takes the whitespace out of Data[mark:Pos], which holds no string.
func (c *compactor) gap(s *Scanner) {
	for i := c.mark; i < s.Pos; i++ {
		if isSpace(s.Data[i]) {
			c.dst = append(c.dst, s.Data[c.start:i]...)
			for _, b := range s.Data[i:s.Pos] {
				if !isSpace(b) {
					c.dst = append(c.dst, b)
				}
			}
			c.start = s.Pos
			break
		}
	}
	c.mark = s.Pos
}

// str passes over a string as Scanner.SkipString does, HTML-escaping it.
func (c *compactor) str(s *Scanner) bool {
	c.gap(s)
	from := s.Pos
	html, ok := s.skipString()
	if html {
		c.dst = appendHTMLEscaped(append(c.dst, s.Data[c.start:from]...), s.Data[from:s.Pos])
		c.start = s.Pos
	}
	c.mark = s.Pos
	return ok
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r'
}

// appendHTMLEscaped appends str, a JSON string as written, with the
// escapes encoding/json's HTML escaping adds to a json.RawMessage: <, >
// and & written \u003c, \u003e and \u0026, U+2028 and U+2029 written
// \u2028 and \u2029.
func appendHTMLEscaped(dst, str []byte) []byte {
	start := 0
	for i := 0; i < len(str); i++ {
		switch b := str[i]; {
		case b == '<' || b == '>' || b == '&':
			dst = append(dst, str[start:i]...)
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			start = i + 1
		case b == 0xE2 && i+2 < len(str) && str[i+1] == 0x80 && str[i+2]&^1 == 0xA8:
			dst = append(dst, str[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[str[i+2]&0xF])
			i += 2
			start = i + 1
		}
	}
	return append(dst, str[start:]...)
}
