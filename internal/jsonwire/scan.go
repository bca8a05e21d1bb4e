package jsonwire

import (
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads JSON from Data starting at Pos, for a decoder that takes
// the inputs it is certain of and hands every other one to encoding/json.
// Each method that reports a bool reports false when the input at Pos is
// not what it reads, or not one it reads with certainty; Pos is then
// somewhere inside the value and the decoder gives up on the whole input.
// Nothing is reported as an error: the fallback decoder says what is wrong.
//
// A decoder embeds a Scanner, or declares one as Scanner{Data: data}, and
// may read Data at Pos itself for what the methods do not cover.
type Scanner struct {
	Data []byte
	Pos  int
}

// SkipSpace passes over JSON whitespace: space, tab, newline and return.
func (s *Scanner) SkipSpace() {
	for s.Pos < len(s.Data) {
		switch s.Data[s.Pos] {
		case ' ', '\t', '\n', '\r':
			s.Pos++
		default:
			return
		}
	}
}

// Consume passes over c if it is the next byte.
func (s *Scanner) Consume(c byte) bool {
	if s.Pos < len(s.Data) && s.Data[s.Pos] == c {
		s.Pos++
		return true
	}
	return false
}

// End reports whether only whitespace is left, passing over it.
func (s *Scanner) End() bool {
	s.SkipSpace()
	return s.Pos == len(s.Data)
}

// Colon passes over the colon between an object's key and its value, and
// the whitespace around it.
func (s *Scanner) Colon() bool {
	// The usual "key":value first: no whitespace (all of which is below
	// '!') on either side.
	if rest := s.Data[s.Pos:]; len(rest) > 1 && rest[0] == ':' && rest[1] > ' ' {
		s.Pos++
		return true
	}
	s.SkipSpace()
	if !s.Consume(':') {
		return false
	}
	s.SkipSpace()
	return true
}

// Object reads an object: '{', members separated by commas, '}', with
// whitespace between them. member reads one member, from its key's opening
// quote to the end of its value (Colon reads what is between); it is not
// called for {}.
func (s *Scanner) Object(member func() bool) bool {
	if !s.Consume('{') {
		return false
	}
	s.SkipSpace()
	if s.Consume('}') {
		return true
	}
	for {
		if !member() {
			return false
		}
		s.SkipSpace()
		if s.Consume(',') {
			s.SkipSpace()
			continue
		}
		return s.Consume('}')
	}
}

// Array reads an array: '[', elements separated by commas, ']', with
// whitespace between them. elem reads one element; it is not called for
// [].
func (s *Scanner) Array(elem func() bool) bool {
	if !s.Consume('[') {
		return false
	}
	s.SkipSpace()
	if s.Consume(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.SkipSpace()
		if s.Consume(',') {
			s.SkipSpace()
			continue
		}
		return s.Consume(']')
	}
}

// plainByte[b] is true for the ASCII bytes a JSON string holds as they are:
// everything from the space to DEL but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// StringBytes reads a string that encoding/json decodes to exactly its
// bytes with the escapes decoded: one whose raw bytes are valid UTF-8 and
// whose \u escapes are not surrogates. Any other string (encoding/json
// replaces invalid bytes and lone surrogates with U+FFFD) is not read. raw
// is the bytes between the quotes, a subslice of Data; escaped reports
// whether they hold an escape, which Unescape or UnescapeString decode.
func (s *Scanner) StringBytes() (raw []byte, escaped, ok bool) {
	if !s.Consume('"') {
		return nil, false, false
	}
	start, ascii := s.Pos, true
	for s.Pos < len(s.Data) {
		if plainByte[s.Data[s.Pos]] {
			s.Pos++
			continue
		}
		switch c := s.Data[s.Pos]; {
		case c == '"':
			raw = s.Data[start:s.Pos]
			s.Pos++
			if !ascii && !utf8.Valid(raw) {
				return nil, false, false
			}
			return raw, escaped, true
		case c == '\\':
			escaped = true
			if s.Pos+1 >= len(s.Data) {
				return nil, false, false
			}
			switch s.Data[s.Pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.Pos += 2
			case 'u':
				r, ok := hex4(s.Data[s.Pos+2:])
				if !ok || utf16.IsSurrogate(r) {
					return nil, false, false
				}
				s.Pos += 6
			default:
				return nil, false, false
			}
		case c < ' ':
			return nil, false, false
		default: // c >= utf8.RuneSelf
			ascii = false
			s.Pos++
		}
	}
	return nil, false, false
}

// Unescape writes to b the decoded form of raw, a string StringBytes read.
func Unescape(b *strings.Builder, raw []byte) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		switch e := raw[i+1]; e {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, _ := hex4(raw[i+2:])
			b.WriteRune(r)
			i += 6
			continue
		default: // '"', '\\', '/'
			b.WriteByte(e)
		}
		i += 2
	}
}

// UnescapeString returns the decoded form of raw, a string StringBytes
// read, in one allocation.
func UnescapeString(raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw))
	Unescape(&b, raw)
	return b.String()
}

// hex4 decodes the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Uint reads a JSON integer that fits a uint64: digits without a sign or
// leading zero. It does not read one that overflows (encoding/json refuses
// it for an integer field). A fraction or exponent after the digits is
// left unread, so that a caller expecting ',', ']' or '}' next gives up,
// as it must: encoding/json refuses those for an integer field too.
func (s *Scanner) Uint() (uint64, bool) {
	start := s.Pos
	var v uint64
	for ; s.Pos < len(s.Data); s.Pos++ {
		c := s.Data[s.Pos]
		if c < '0' || c > '9' {
			break
		}
		if v > math.MaxUint64/10 || v == math.MaxUint64/10 && c-'0' > math.MaxUint64%10 {
			return 0, false // overflow
		}
		v = v*10 + uint64(c-'0')
	}
	n := s.Pos - start
	if n == 0 || n > 1 && s.Data[start] == '0' {
		return 0, false // no digits, or a leading zero (not JSON)
	}
	return v, true
}

// Int reads a JSON integer that fits an int64, as Uint does with an
// optional minus sign.
func (s *Scanner) Int() (int64, bool) {
	neg := s.Consume('-')
	u, ok := s.Uint()
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return -int64(u-1) - 1, true
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}

// Bool reads true or false.
func (s *Scanner) Bool() (v, ok bool) {
	switch {
	case s.Literal("true"):
		return true, true
	case s.Literal("false"):
		return false, true
	}
	return false, false
}

// Literal passes over lit (true, false or null) if it comes next.
func (s *Scanner) Literal(lit string) bool {
	if len(s.Data)-s.Pos >= len(lit) && string(s.Data[s.Pos:s.Pos+len(lit)]) == lit {
		s.Pos += len(lit)
		return true
	}
	return false
}

// Number passes over a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *Scanner) Number() bool {
	s.Consume('-')
	switch {
	case s.Consume('0'):
	case s.Pos < len(s.Data) && '1' <= s.Data[s.Pos] && s.Data[s.Pos] <= '9':
		s.Digits()
	default:
		return false
	}
	if s.Consume('.') && !s.Digits() {
		return false
	}
	if s.Consume('e') || s.Consume('E') {
		if !s.Consume('+') {
			s.Consume('-')
		}
		if !s.Digits() {
			return false
		}
	}
	return true
}

// Digits passes over one or more decimal digits.
func (s *Scanner) Digits() bool {
	start := s.Pos
	for s.Pos < len(s.Data) && '0' <= s.Data[s.Pos] && s.Data[s.Pos] <= '9' {
		s.Pos++
	}
	return s.Pos > start
}

// Byte classes of a string's contents, for skipString.
const (
	strPlain = iota // kept as it is
	strHTML         // kept, but rewritten by HTML escaping: <, >, &, and 0xE2, which U+2028 and U+2029 begin with
	strOther        // the quote, the backslash and the control bytes
)

var strClass = func() (t [256]uint8) {
	for b := range 256 {
		switch {
		case b < ' ' || b == '"' || b == '\\':
			t[b] = strOther
		case b == '<' || b == '>' || b == '&' || b == 0xE2:
			t[b] = strHTML
		}
	}
	return t
}()

// SkipString passes over a string as encoding/json's scanner checks it: no
// control bytes, only JSON's escapes, any other byte (valid UTF-8 or not)
// as it is.
func (s *Scanner) SkipString() bool {
	_, ok := s.skipString()
	return ok
}

// skipString is SkipString; html reports whether the string holds a byte
// of class strHTML.
func (s *Scanner) skipString() (html, ok bool) {
	if !s.Consume('"') {
		return false, false
	}
	for s.Pos < len(s.Data) {
		c := s.Data[s.Pos]
		switch strClass[c] {
		case strPlain:
			s.Pos++
			continue
		case strHTML:
			html = true
			s.Pos++
			continue
		}
		switch {
		case c == '"':
			s.Pos++
			return html, true
		case c == '\\':
			if s.Pos+1 >= len(s.Data) {
				return false, false
			}
			switch s.Data[s.Pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.Pos += 2
			case 'u':
				if _, ok := hex4(s.Data[s.Pos+2:]); !ok {
					return false, false
				}
				s.Pos += 6
			default:
				return false, false
			}
		default: // a control byte
			return false, false
		}
	}
	return false, false
}

// Skip passes over one JSON value, checking its syntax as encoding/json's
// scanner does. The value is at depth 0 and the elements and member values
// of a value at depth n are at depth n+1; a value deeper than maxDepth is
// not read (encoding/json's own limit is far larger).
func (s *Scanner) Skip(maxDepth int) bool {
	return s.walk(maxDepth, nil)
}

// walk is Skip; with a non-nil c it also copies the value to c.dst as
// AppendCompact does.
func (s *Scanner) walk(maxDepth int, c *compactor) bool {
	if maxDepth < 0 || s.Pos >= len(s.Data) {
		return false
	}
	switch b := s.Data[s.Pos]; {
	case b == '"':
		if c == nil {
			return s.SkipString()
		}
		return c.str(s)
	case b == '-' || '0' <= b && b <= '9':
		return s.Number()
	case b == 't':
		return s.Literal("true")
	case b == 'f':
		return s.Literal("false")
	case b == 'n':
		return s.Literal("null")
	case b == '[':
		return s.Array(func() bool { return s.walk(maxDepth-1, c) })
	case b == '{':
		return s.Object(func() bool {
			if c == nil {
				if !s.SkipString() {
					return false
				}
			} else if !c.str(s) {
				return false
			}
			return s.Colon() && s.walk(maxDepth-1, c)
		})
	}
	return false
}
