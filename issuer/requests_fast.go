package issuer

import (
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/writ-dev/writ/api"
)

// Grant, spend and effect bodies are decoded without reflection when they
// have the shape api.Client sends: one object of known keys, each once,
// with plain strings, integers, the args value and (for grants) the
// sources and provenance lists, and "v" equal to api.Version. The fast
// decoders below are a second implementation of what decodeStrict does
// for these bodies, not a different protocol: when one succeeds, the
// request it fills is exactly the one decodeStrict gives (reflect.DeepEqual;
// the differential tests and fuzz targets in requests_fast_test.go hold
// them to that), and decodeStrict would have accepted the body. Everything
// else — an unknown, repeated or case-folded key, null, a number that is
// not a plain integer, a wrong type, a string with invalid UTF-8 or a
// surrogate escape, another version, malformed JSON, an oversize body —
// makes the fast decoder report false, and the caller decodes the body
// with decodeStrict, so every refusal and its message stay those of the
// strict decoder.
//
// Adding a field to api.GrantRequest, api.SpendRequest, api.EffectRequest,
// api.FieldTrace or api.TraceMatch means adding it here;
// TestFastDecodersCoverFields fails until it is (the strict decoder would
// accept the new key and the fast one would not, which is correct but
// slow).

// decodeGrantFast decodes a grant body as decodeStrict does, or reports
// false. On false, r is left partly filled: the caller decodes into a new
// value. r.Args aliases data (the strict decoder's is a copy): the request
// is only read while data is alive and unchanged.
func decodeGrantFast(data []byte, r *api.GrantRequest) bool {
	if len(data) > api.MaxBodyBytes {
		return false
	}
	d := fastDecoder{data: data}
	ok := d.object(func(key []byte) (bit uint32, ok bool) {
		switch string(key) {
		case "v":
			bit, ok = 1<<0, d.int(&r.V)
		case "lane":
			r.Lane, ok = d.str()
			bit = 1 << 1
		case "session":
			r.Session, ok = d.str()
			bit = 1 << 2
		case "tool":
			r.Tool, ok = d.str()
			bit = 1 << 3
		case "args":
			r.Args, ok = d.raw()
			bit = 1 << 4
		case "ttl_ms":
			bit, ok = 1<<5, d.int64(&r.TTLMillis)
		case "sources":
			r.Sources, ok = d.strs()
			bit = 1 << 6
		case "idempotency_key":
			r.IdempotencyKey, ok = d.str()
			bit = 1 << 7
		case "target_label":
			r.TargetLabel, ok = d.str()
			bit = 1 << 8
		case "amount":
			var v uint64
			if v, ok = d.uint(); ok {
				r.Amount = &v
			}
			bit = 1 << 9
		case "bytes":
			r.Bytes, ok = d.uint()
			bit = 1 << 10
		case "cwd":
			r.Cwd, ok = d.str()
			bit = 1 << 11
		case "resolved_target":
			r.ResolvedTarget, ok = d.str()
			bit = 1 << 12
		case "provenance":
			r.Provenance, ok = d.traces()
			bit = 1 << 13
		}
		return bit, ok
	})
	return ok && d.seen&1 != 0 && r.V == api.Version && d.end()
}

// decodeSpendFast decodes a spend body as decodeStrict does, or reports
// false, as decodeGrantFast does.
func decodeSpendFast(data []byte, r *api.SpendRequest) bool {
	if len(data) > api.MaxBodyBytes {
		return false
	}
	d := fastDecoder{data: data}
	ok := d.object(func(key []byte) (bit uint32, ok bool) {
		switch string(key) {
		case "v":
			bit, ok = 1<<0, d.int(&r.V)
		case "grant_id":
			r.GrantID, ok = d.str()
			bit = 1 << 1
		case "args":
			r.Args, ok = d.raw()
			bit = 1 << 2
		case "digest":
			r.Digest, ok = d.str()
			bit = 1 << 3
		case "idempotency_key":
			r.IdempotencyKey, ok = d.str()
			bit = 1 << 4
		case "cwd":
			r.Cwd, ok = d.str()
			bit = 1 << 5
		case "resolved_target":
			r.ResolvedTarget, ok = d.str()
			bit = 1 << 6
		}
		return bit, ok
	})
	return ok && d.seen&1 != 0 && r.V == api.Version && d.end()
}

// decodeEffectFast decodes an effect body as decodeStrict does, or reports
// false, as decodeGrantFast does.
func decodeEffectFast(data []byte, r *api.EffectRequest) bool {
	if len(data) > api.MaxBodyBytes {
		return false
	}
	d := fastDecoder{data: data}
	ok := d.object(func(key []byte) (bit uint32, ok bool) {
		switch string(key) {
		case "v":
			bit, ok = 1<<0, d.int(&r.V)
		case "grant_id":
			r.GrantID, ok = d.str()
			bit = 1 << 1
		case "outcome":
			r.Outcome, ok = d.str()
			bit = 1 << 2
		case "verifier":
			r.Verifier, ok = d.str()
			bit = 1 << 3
		}
		return bit, ok
	})
	return ok && d.seen&1 != 0 && r.V == api.Version && d.end()
}

// fastDecoder is the state of the fast decoders. Each method reports false
// when the input is not one it decodes with certainty.
type fastDecoder struct {
	data []byte
	i    int
	// seen has the bit of each key the top-level object had.
	seen uint32
	// text holds every decoded string: one allocation for all of a
	// body's strings in the usual case, sized by the strings rather than
	// the body, so a string kept in a command never pins the body or its
	// arguments. A string already handed out stays valid when text
	// grows.
	text strings.Builder
}

// textHint is text's first capacity: the strings of a usual grant or
// spend body.
const textHint = 192

// maxRawDepth bounds how deeply the args value may nest before the fast
// path gives the body to the strict decoder instead.
const maxRawDepth = 128

// object decodes the top-level object: member decodes the value of each
// key and returns the key's bit (0: not a key of the request, and the body
// falls back); a repeated key falls back too (encoding/json decodes it
// again into what the first occurrence left). An empty object decodes,
// but without "v" the callers fall back.
func (d *fastDecoder) object(member func(key []byte) (bit uint32, ok bool)) bool {
	d.ws()
	if !d.consume('{') {
		return false
	}
	d.ws()
	if d.consume('}') {
		return true
	}
	for {
		key, ok := d.key()
		if !ok {
			return false
		}
		bit, ok := member(key)
		if !ok || bit == 0 || d.seen&bit != 0 {
			return false
		}
		d.seen |= bit
		d.ws()
		if d.consume(',') {
			d.ws()
			continue
		}
		return d.consume('}')
	}
}

// key reads an object key, the colon and the space around it. Only keys of
// printable ASCII without escapes are read: encoding/json matches keys to
// fields case-insensitively and after unescaping, so any other key might
// name a field it does not spell, and falls back.
func (d *fastDecoder) key() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.data) {
		c := d.data[d.i]
		if c == '"' {
			key := d.data[start:d.i]
			d.i++
			d.ws()
			if !d.consume(':') {
				return nil, false
			}
			d.ws()
			return key, true
		}
		if c < ' ' || c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// end reports whether only whitespace is left.
func (d *fastDecoder) end() bool {
	d.ws()
	return d.i == len(d.data)
}

func (d *fastDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) consume(c byte) bool {
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// str decodes a string as encoding/json does, for strings whose raw bytes
// are valid UTF-8 and whose \u escapes are not surrogates: anything else
// (encoding/json replaces such bytes and lone surrogates with U+FFFD)
// falls back.
func (d *fastDecoder) str() (string, bool) {
	if !d.consume('"') {
		return "", false
	}
	start, ascii, escaped := d.i, true, false
	for d.i < len(d.data) {
		if plainByte[d.data[d.i]] {
			d.i++
			continue
		}
		switch c := d.data[d.i]; {
		case c == '"':
			raw := d.data[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			if len(raw) == 0 {
				return "", true
			}
			if d.text.Cap() == 0 {
				d.text.Grow(textHint)
			}
			n := d.text.Len()
			if escaped {
				unescape(&d.text, raw)
			} else {
				d.text.Write(raw)
			}
			return d.text.String()[n:], true
		case c == '\\':
			escaped = true
			if d.i+1 >= len(d.data) {
				return "", false
			}
			switch d.data[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				r, ok := jsonHex4(d.data[d.i+2:])
				if !ok || utf16.IsSurrogate(r) {
					return "", false
				}
				d.i += 6
			default:
				return "", false
			}
		case c < ' ':
			return "", false
		default: // c >= utf8.RuneSelf
			ascii = false
			d.i++
		}
	}
	return "", false
}

// plainByte[b] is true for the ASCII bytes a JSON string holds as they are:
// everything from the space to DEL but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for b := ' '; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// unescape writes the decoded form of a string str has checked.
func unescape(b *strings.Builder, raw []byte) {
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
			r, _ := jsonHex4(raw[i+2:])
			b.WriteRune(r)
			i += 6
			continue
		default: // '"', '\\', '/'
			b.WriteByte(e)
		}
		i += 2
	}
}

// jsonHex4 decodes the four hex digits of a \u escape.
func jsonHex4(b []byte) (rune, bool) {
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

// uint decodes a JSON integer that fits a uint64 (no sign, fraction or
// exponent).
func (d *fastDecoder) uint() (uint64, bool) {
	start := d.i
	var v uint64
	for ; d.i < len(d.data); d.i++ {
		c := d.data[d.i]
		if c < '0' || c > '9' {
			break
		}
		if v > math.MaxUint64/10 || v == math.MaxUint64/10 && c-'0' > math.MaxUint64%10 {
			return 0, false // overflow
		}
		v = v*10 + uint64(c-'0')
	}
	n := d.i - start
	if n == 0 || n > 1 && d.data[start] == '0' {
		return 0, false // no digits, or a leading zero (not JSON)
	}
	// A fraction or exponent that follows is not a ',' or '}', so the
	// caller falls back.
	return v, true
}

// int64 decodes a JSON integer that fits an int64 into v.
func (d *fastDecoder) int64(v *int64) bool {
	neg := d.consume('-')
	u, ok := d.uint()
	switch {
	case !ok:
		return false
	case neg && u <= 1<<63:
		*v = -int64(u-1) - 1
		return true
	case !neg && u <= math.MaxInt64:
		*v = int64(u)
		return true
	}
	return false
}

// int decodes a JSON integer that fits an int into v.
func (d *fastDecoder) int(v *int) bool {
	var w int64
	if !d.int64(&w) || int64(int(w)) != w {
		return false
	}
	*v = int(w)
	return true
}

// bool decodes true or false.
func (d *fastDecoder) bool() (v, ok bool) {
	switch {
	case d.literal("true"):
		return true, true
	case d.literal("false"):
		return false, true
	}
	return false, false
}

// strs decodes an array of strings; [] gives an empty, non-nil slice as
// encoding/json does.
func (d *fastDecoder) strs() ([]string, bool) {
	if !d.consume('[') {
		return nil, false
	}
	d.ws()
	out := make([]string, 0, 4)
	if d.consume(']') {
		return out, true
	}
	for {
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		d.ws()
		if d.consume(']') {
			return out, true
		}
		if !d.consume(',') {
			return nil, false
		}
		d.ws()
	}
}

// traces decodes a grant's provenance: an array of field traces.
func (d *fastDecoder) traces() ([]api.FieldTrace, bool) {
	if !d.consume('[') {
		return nil, false
	}
	d.ws()
	out := []api.FieldTrace{}
	if d.consume(']') {
		return out, true
	}
	for {
		var t api.FieldTrace
		if !d.trace(&t) {
			return nil, false
		}
		out = append(out, t)
		d.ws()
		if d.consume(']') {
			return out, true
		}
		if !d.consume(',') {
			return nil, false
		}
		d.ws()
	}
}

// members decodes a nested object as object does the top level.
func (d *fastDecoder) members(member func(key []byte) (bit uint32, ok bool)) bool {
	if !d.consume('{') {
		return false
	}
	d.ws()
	if d.consume('}') {
		return true
	}
	var seen uint32
	for {
		key, ok := d.key()
		if !ok {
			return false
		}
		bit, ok := member(key)
		if !ok || bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.ws()
		if d.consume(',') {
			d.ws()
			continue
		}
		return d.consume('}')
	}
}

func (d *fastDecoder) trace(t *api.FieldTrace) bool {
	return d.members(func(key []byte) (bit uint32, ok bool) {
		switch string(key) {
		case "field":
			t.Field, ok = d.str()
			bit = 1 << 0
		case "matches":
			t.Matches, ok = d.matches()
			bit = 1 << 1
		case "covered":
			t.Covered, ok = d.bool()
			bit = 1 << 2
		}
		return bit, ok
	})
}

func (d *fastDecoder) matches() ([]api.TraceMatch, bool) {
	if !d.consume('[') {
		return nil, false
	}
	d.ws()
	out := []api.TraceMatch{}
	if d.consume(']') {
		return out, true
	}
	for {
		var m api.TraceMatch
		ok := d.members(func(key []byte) (bit uint32, ok bool) {
			switch string(key) {
			case "source":
				m.Source, ok = d.str()
				bit = 1 << 0
			case "transform":
				m.Transform, ok = d.str()
				bit = 1 << 1
			case "part":
				m.Part, ok = d.str()
				bit = 1 << 2
			case "whole":
				m.Whole, ok = d.bool()
				bit = 1 << 3
			}
			return bit, ok
		})
		if !ok {
			return nil, false
		}
		out = append(out, m)
		d.ws()
		if d.consume(']') {
			return out, true
		}
		if !d.consume(',') {
			return nil, false
		}
		d.ws()
	}
}

// raw returns the bytes of one JSON value, as a json.RawMessage field
// holds them: from its first byte to its last, as written. The value is
// checked as encoding/json's scanner checks it (which takes the bytes of
// strings as they are, valid UTF-8 or not).
func (d *fastDecoder) raw() ([]byte, bool) {
	start := d.i
	if !d.skip(0) {
		return nil, false
	}
	return d.data[start:d.i:d.i], true
}

// skip passes over one JSON value, checking its syntax.
func (d *fastDecoder) skip(depth int) bool {
	if depth > maxRawDepth || d.i >= len(d.data) {
		return false
	}
	switch c := d.data[d.i]; {
	case c == '"':
		return d.skipStr()
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '[':
		d.i++
		d.ws()
		if d.consume(']') {
			return true
		}
		for {
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.consume(']') {
				return true
			}
			if !d.consume(',') {
				return false
			}
			d.ws()
		}
	case c == '{':
		d.i++
		d.ws()
		if d.consume('}') {
			return true
		}
		for {
			if !d.skipStr() {
				return false
			}
			d.ws()
			if !d.consume(':') {
				return false
			}
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			d.ws()
			if d.consume('}') {
				return true
			}
			if !d.consume(',') {
				return false
			}
			d.ws()
		}
	}
	return false
}

// skipStr passes over a string as encoding/json's scanner reads it: no
// control bytes, only JSON's escapes, any other byte as it is.
func (d *fastDecoder) skipStr() bool {
	if !d.consume('"') {
		return false
	}
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			return true
		case c == '\\':
			if d.i+1 >= len(d.data) {
				return false
			}
			switch d.data[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if _, ok := jsonHex4(d.data[d.i+2:]); !ok {
					return false
				}
				d.i += 6
			default:
				return false
			}
		case c < ' ':
			return false
		default:
			d.i++
		}
	}
	return false
}

func (d *fastDecoder) literal(lit string) bool {
	if len(d.data)-d.i >= len(lit) && string(d.data[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// number passes over a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDecoder) number() bool {
	d.consume('-')
	switch {
	case d.consume('0'):
	case d.i < len(d.data) && '1' <= d.data[d.i] && d.data[d.i] <= '9':
		d.digits()
	default:
		return false
	}
	if d.consume('.') && !d.digits() {
		return false
	}
	if d.consume('e') || d.consume('E') {
		if !d.consume('+') {
			d.consume('-')
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

// digits passes over one or more decimal digits.
func (d *fastDecoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
