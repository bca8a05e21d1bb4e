package api

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Grant, spend and effect bodies are the requests every tool call sends.
// The AppendJSON methods below encode them without reflection. They are a
// second implementation of what encoding/json already does for these
// types, not a new format: each writes exactly the bytes json.Marshal
// writes (the differential and fuzz tests in request_json_test.go hold them
// to that), and where json.Marshal fails — Args that are not valid JSON —
// each returns json.Marshal's own error. The request types have no
// MarshalJSON method on purpose: json.Marshal keeps its reflective
// behaviour everywhere, and stays the reference the fast encoder is tested
// against.
//
// Adding a field to GrantRequest, SpendRequest, EffectRequest, FieldTrace
// or TraceMatch means adding it here; TestRequestEncodersCoverFields fails
// until it is.

// AppendJSON appends the JSON encoding of r to dst and returns the
// extended buffer. The bytes are identical to those of json.Marshal(r):
// the same field order and omitempty rules, encoding/json's HTML-safe
// string escaping, and Args compacted and HTML-escaped as encoding/json
// does with a json.RawMessage (a nil Args is null). When json.Marshal(r)
// fails, AppendJSON returns dst unchanged and json.Marshal's error.
func (r *GrantRequest) AppendJSON(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = strconv.AppendInt(append(dst, `{"v":`...), int64(r.V), 10)
	dst = appendJSONString(append(dst, `,"lane":`...), r.Lane)
	dst = appendStringField(dst, `,"session":`, r.Session)
	dst = appendJSONString(append(dst, `,"tool":`...), r.Tool)
	dst = append(dst, `,"args":`...)
	if r.Args == nil {
		// json.RawMessage.MarshalJSON of nil.
		dst = append(dst, "null"...)
	} else {
		var ok bool
		if dst, ok = appendCompactJSON(dst, r.Args); !ok {
			return marshalFallback(dst[:n], r)
		}
	}
	if r.TTLMillis != 0 {
		dst = strconv.AppendInt(append(dst, `,"ttl_ms":`...), r.TTLMillis, 10)
	}
	dst = appendStringsField(dst, `,"sources":`, r.Sources)
	dst = appendJSONString(append(dst, `,"idempotency_key":`...), r.IdempotencyKey)
	dst = appendStringField(dst, `,"target_label":`, r.TargetLabel)
	if r.Amount != nil {
		dst = strconv.AppendUint(append(dst, `,"amount":`...), *r.Amount, 10)
	}
	if r.Bytes != 0 {
		dst = strconv.AppendUint(append(dst, `,"bytes":`...), r.Bytes, 10)
	}
	dst = appendStringField(dst, `,"cwd":`, r.Cwd)
	dst = appendStringField(dst, `,"resolved_target":`, r.ResolvedTarget)
	if len(r.Provenance) > 0 {
		dst = append(dst, `,"provenance":[`...)
		for i := range r.Provenance {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = r.Provenance[i].appendJSON(dst)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// appendJSON appends t as json.Marshal encodes it.
func (t *FieldTrace) appendJSON(dst []byte) []byte {
	dst = appendJSONString(append(dst, `{"field":`...), t.Field)
	if len(t.Matches) > 0 {
		dst = append(dst, `,"matches":[`...)
		for i := range t.Matches {
			if i > 0 {
				dst = append(dst, ',')
			}
			m := &t.Matches[i]
			dst = appendJSONString(append(dst, `{"source":`...), m.Source)
			dst = appendJSONString(append(dst, `,"transform":`...), m.Transform)
			dst = appendStringField(dst, `,"part":`, m.Part)
			if m.Whole {
				dst = append(dst, `,"whole":true`...)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if t.Covered {
		dst = append(dst, `,"covered":true`...)
	}
	return append(dst, '}')
}

// AppendJSON appends the JSON encoding of r to dst and returns the
// extended buffer: the bytes of json.Marshal(r), as GrantRequest.AppendJSON
// describes (an empty Args is omitted). When json.Marshal(r) fails,
// AppendJSON returns dst unchanged and json.Marshal's error.
func (r *SpendRequest) AppendJSON(dst []byte) ([]byte, error) {
	n := len(dst)
	dst = strconv.AppendInt(append(dst, `{"v":`...), int64(r.V), 10)
	dst = appendJSONString(append(dst, `,"grant_id":`...), r.GrantID)
	if len(r.Args) > 0 {
		var ok bool
		if dst, ok = appendCompactJSON(append(dst, `,"args":`...), r.Args); !ok {
			return marshalFallback(dst[:n], r)
		}
	}
	dst = appendStringField(dst, `,"digest":`, r.Digest)
	dst = appendJSONString(append(dst, `,"idempotency_key":`...), r.IdempotencyKey)
	dst = appendStringField(dst, `,"cwd":`, r.Cwd)
	dst = appendStringField(dst, `,"resolved_target":`, r.ResolvedTarget)
	return append(dst, '}'), nil
}

// AppendJSON appends the JSON encoding of r to dst and returns the
// extended buffer: the bytes of json.Marshal(r). It cannot fail.
func (r *EffectRequest) AppendJSON(dst []byte) []byte {
	dst = strconv.AppendInt(append(dst, `{"v":`...), int64(r.V), 10)
	dst = appendJSONString(append(dst, `,"grant_id":`...), r.GrantID)
	dst = appendJSONString(append(dst, `,"outcome":`...), r.Outcome)
	dst = appendJSONString(append(dst, `,"verifier":`...), r.Verifier)
	return append(dst, '}')
}

// marshalFallback appends json.Marshal(v) to dst, or returns dst and
// json.Marshal's error.
func marshalFallback(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// sizeHint is a capacity for a grant body's buffer: the body's length
// when its strings need no escaping and V has at most hintSlack digits
// (escapes and provenance may grow it).
func (r *GrantRequest) sizeHint() int {
	n := len(`{"v":,"lane":"","tool":"","args":,"idempotency_key":""}`) + hintSlack +
		len(r.Lane) + len(r.Tool) + len(r.Args) + len(r.IdempotencyKey) +
		optLen(`,"session":""`, len(r.Session)) + optLen(`,"target_label":""`, len(r.TargetLabel)) +
		optLen(`,"cwd":""`, len(r.Cwd)) + optLen(`,"resolved_target":""`, len(r.ResolvedTarget))
	if r.Args == nil {
		n += len("null")
	}
	if r.TTLMillis != 0 {
		n += len(`,"ttl_ms":`) + 20
	}
	if r.Amount != nil {
		n += len(`,"amount":`) + 20
	}
	if r.Bytes != 0 {
		n += len(`,"bytes":`) + 20
	}
	if len(r.Sources) > 0 {
		n += len(`,"sources":[]`)
		for _, s := range r.Sources {
			n += len(s) + len(`"",`)
		}
	}
	return n + 96*len(r.Provenance)
}

// sizeHint is a capacity for a spend body's buffer, as for a grant.
func (r *SpendRequest) sizeHint() int {
	return len(`{"v":,"grant_id":"","idempotency_key":""}`) + hintSlack + len(r.GrantID) + len(r.IdempotencyKey) +
		optLen(`,"args":`, len(r.Args)) + optLen(`,"digest":""`, len(r.Digest)) +
		optLen(`,"cwd":""`, len(r.Cwd)) + optLen(`,"resolved_target":""`, len(r.ResolvedTarget))
}

// sizeHint is a capacity for an effect body's buffer, as for a grant.
func (r *EffectRequest) sizeHint() int {
	return len(`{"v":,"grant_id":"","outcome":"","verifier":""}`) + hintSlack + len(r.GrantID) + len(r.Outcome) + len(r.Verifier)
}

// hintSlack is room in a size hint for V's digits and a few escapes.
const hintSlack = 16

// optLen is the length an omitempty field of n bytes adds: none when it is
// empty.
func optLen(key string, n int) int {
	if n == 0 {
		return 0
	}
	return len(key) + n
}

// appendStringField appends key and s unless s is empty (omitempty).
func appendStringField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

// appendStringsField appends key and the array ss unless ss is empty
// (omitempty).
func appendStringsField(dst []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return dst
	}
	dst = append(dst, key...)
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// jsonSafe[b] is true for the ASCII bytes encoding/json copies into a
// string unescaped with HTML escaping on: everything from the space to DEL
// except the quote, the backslash and <, > and &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping (its default): \" \\ \b \f \n \r \t, \u00XX for the
// other control bytes and for <, > and &, \u2028 and \u2029, and \ufffd for
// each byte that is not part of valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe[b] {
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

// maxCompactDepth bounds how deeply raw arguments may nest before
// appendCompactJSON leaves them to json.Marshal (whose own limit is far
// larger).
const maxCompactDepth = 256

// appendCompactJSON appends raw as encoding/json writes a json.RawMessage
// with HTML escaping on: whitespace outside strings removed, <, > and &
// written \u003c, \u003e and \u0026, U+2028 and U+2029 written \u2028 and
// \u2029, and every other byte (escapes, numbers as written, invalid
// UTF-8 in strings) copied. ok is false when raw is not one valid JSON
// value, or nests deeper than maxCompactDepth; the caller then leaves the
// body to json.Marshal.
func appendCompactJSON(dst, raw []byte) (_ []byte, ok bool) {
	c := compactor{src: raw, dst: dst}
	c.ws()
	if !c.value(0) {
		return dst, false
	}
	c.ws()
	if c.i != len(c.src) {
		return dst, false
	}
	return c.dst, true
}

// compactor is appendCompactJSON's state: a recursive descent over src
// that checks the JSON grammar as encoding/json's scanner does.
type compactor struct {
	src []byte
	i   int
	dst []byte
}

func (c *compactor) ws() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// byte emits b if it is next.
func (c *compactor) byte(b byte) bool {
	if c.i < len(c.src) && c.src[c.i] == b {
		c.dst = append(c.dst, b)
		c.i++
		return true
	}
	return false
}

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.src) {
		return false
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str()
	case b == '-' || '0' <= b && b <= '9':
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

func (c *compactor) object(depth int) bool {
	if depth > maxCompactDepth {
		return false
	}
	c.byte('{')
	c.ws()
	if c.byte('}') {
		return true
	}
	for {
		if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
			return false
		}
		c.ws()
		if !c.byte(':') {
			return false
		}
		c.ws()
		if !c.value(depth) {
			return false
		}
		c.ws()
		if c.byte('}') {
			return true
		}
		if !c.byte(',') {
			return false
		}
		c.ws()
	}
}

func (c *compactor) array(depth int) bool {
	if depth > maxCompactDepth {
		return false
	}
	c.byte('[')
	c.ws()
	if c.byte(']') {
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		c.ws()
		if c.byte(']') {
			return true
		}
		if !c.byte(',') {
			return false
		}
		c.ws()
	}
}

// str copies a string, checking it as encoding/json's scanner does (no
// control bytes, only the escapes JSON has; other bytes, valid UTF-8 or
// not, are taken as they are) and HTML-escaping it as appendCompact does.
func (c *compactor) str() bool {
	c.dst = append(c.dst, '"')
	c.i++
	start := c.i
	for c.i < len(c.src) {
		b := c.src[c.i]
		if b >= ' ' && b < utf8.RuneSelf && jsonSafe[b] {
			c.i++
			continue
		}
		switch {
		case b == '"':
			c.dst = append(c.dst, c.src[start:c.i+1]...)
			c.i++
			return true
		case b == '\\':
			if c.i+1 >= len(c.src) {
				return false
			}
			switch c.src[c.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				if c.i+6 > len(c.src) {
					return false
				}
				for _, h := range c.src[c.i+2 : c.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				c.i += 6
			default:
				return false
			}
		case b < ' ':
			return false
		case b == '<' || b == '>' || b == '&':
			c.dst = append(c.dst, c.src[start:c.i]...)
			c.dst = append(c.dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			c.i++
			start = c.i
		case b == 0xE2 && c.i+2 < len(c.src) && c.src[c.i+1] == 0x80 && c.src[c.i+2]&^1 == 0xA8:
			// U+2028 or U+2029.
			c.dst = append(c.dst, c.src[start:c.i]...)
			c.dst = append(c.dst, '\\', 'u', '2', '0', '2', hexDigits[c.src[c.i+2]&0xF])
			c.i += 3
			start = c.i
		default:
			c.i++
		}
	}
	return false
}

// number copies a JSON number as written:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *compactor) number() bool {
	start := c.i
	if c.src[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.src) && c.src[c.i] == '0':
		c.i++
	case c.i < len(c.src) && '1' <= c.src[c.i] && c.src[c.i] <= '9':
		c.digits()
	default:
		return false
	}
	if c.i < len(c.src) && c.src[c.i] == '.' {
		c.i++
		if !c.digits() {
			return false
		}
	}
	if c.i < len(c.src) && (c.src[c.i] == 'e' || c.src[c.i] == 'E') {
		c.i++
		if c.i < len(c.src) && (c.src[c.i] == '+' || c.src[c.i] == '-') {
			c.i++
		}
		if !c.digits() {
			return false
		}
	}
	c.dst = append(c.dst, c.src[start:c.i]...)
	return true
}

// digits passes over one or more decimal digits.
func (c *compactor) digits() bool {
	start := c.i
	for c.i < len(c.src) && '0' <= c.src[c.i] && c.src[c.i] <= '9' {
		c.i++
	}
	return c.i > start
}

func (c *compactor) literal(lit string) bool {
	if len(c.src)-c.i >= len(lit) && string(c.src[c.i:c.i+len(lit)]) == lit {
		c.dst = append(c.dst, lit...)
		c.i += len(lit)
		return true
	}
	return false
}
