package grants

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/writ-dev/writ/events"
)

// The envelope is the hottest JSON on the wire: the issuer encodes one per
// answer and every client decodes one per call. AppendJSON and
// DecodeEnvelope do that work without reflection. They are a second
// implementation of what encoding/json already does for Envelope, not a new
// format: AppendJSON writes exactly the bytes json.Marshal writes, and
// DecodeEnvelope returns exactly what json.Unmarshal returns (the fuzz
// targets in envelope_json_test.go hold them to that). Envelope has no
// MarshalJSON or UnmarshalJSON method on purpose: json.Marshal and
// json.Unmarshal keep their reflective behaviour everywhere an Envelope is
// nested in another value, and stay the reference the fast codec is tested
// against.
//
// Adding a field to Envelope means adding it to AppendJSON and to
// envelopeDecoder.field; TestEnvelopeCodecCoversFields fails until both know
// it.

// AppendJSON appends the JSON encoding of e to dst and returns the extended
// buffer. The bytes are identical to those of json.Marshal(e): the same
// field order and omitempty/omitzero rules, Kind and Digest encoded through
// their MarshalText methods, and encoding/json's HTML-safe string escaping
// (<, >, &, U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD).
func (e *Envelope) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"decision":`...)
	dst = appendJSONString(dst, string(e.Decision))
	dst = appendStringField(dst, `,"grant_id":`, e.GrantID)
	dst = appendStringField(dst, `,"review_id":`, e.ReviewID)
	dst = appendStringField(dst, `,"reason":`, string(e.Reason))
	dst = appendStringField(dst, `,"missing":`, e.Missing)
	dst = appendStringField(dst, `,"recovery":`, string(e.Recovery))
	dst = appendUintField(dst, `,"epoch":`, e.Epoch)
	if e.IssuedAt != 0 {
		dst = strconv.AppendInt(append(dst, `,"issued_at":`...), e.IssuedAt, 10)
	}
	if e.ExpiresAt != 0 {
		dst = strconv.AppendInt(append(dst, `,"expires_at":`...), e.ExpiresAt, 10)
	}
	dst = appendUintField(dst, `,"seq":`, e.Seq)
	if e.Kind != 0 {
		// Kind.MarshalText is []byte(Kind.String()); String does not
		// allocate for known kinds. encoding/json escapes the text like any
		// string.
		dst = appendJSONString(append(dst, `,"kind":`...), e.Kind.String())
	}
	if !e.Digest.IsZero() {
		// Hash.MarshalText of a non-zero hash: 64 lower-case hex digits,
		// which need no escaping.
		dst = append(dst, `,"digest":"`...)
		dst = hex.AppendEncode(dst, e.Digest[:])
		dst = append(dst, '"')
	}
	if len(e.Counters) > 0 {
		dst = append(dst, `,"counters":[`...)
		for i := range e.Counters {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(append(dst, `{"key":`...), e.Counters[i].Key)
			dst = strconv.AppendUint(append(dst, `,"value":`...), e.Counters[i].Value, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = appendStringsField(dst, `,"rules":`, e.Rules)
	dst = appendStringField(dst, `,"outcome":`, e.Outcome)
	dst = appendStringField(dst, `,"detail":`, e.Detail)
	dst = appendStringField(dst, `,"surface":`, e.Surface)
	dst = appendStringField(dst, `,"operation":`, e.Operation)
	dst = appendStringField(dst, `,"consequence":`, e.Consequence)
	dst = appendStringField(dst, `,"target":`, e.Target)
	dst = appendStringField(dst, `,"target_label":`, e.TargetLabel)
	dst = appendStringField(dst, `,"instrument":`, e.Instrument)
	dst = appendStringField(dst, `,"instrument_left":`, e.InstrumentLeft)
	dst = appendUintField(dst, `,"amount":`, e.Amount)
	dst = appendUintField(dst, `,"bytes":`, e.Bytes)
	dst = appendStringField(dst, `,"ledger_key":`, e.LedgerKey)
	dst = appendStringField(dst, `,"authority":`, e.Authority)
	dst = appendStringsField(dst, `,"grounds":`, e.Grounds)
	return append(dst, '}')
}

// appendStringField appends key and s unless s is empty (omitempty).
func appendStringField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), s)
}

// appendUintField appends key and v unless v is zero (omitempty).
func appendUintField(dst []byte, key string, v uint64) []byte {
	if v == 0 {
		return dst
	}
	return strconv.AppendUint(append(dst, key...), v, 10)
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

// DecodeEnvelope decodes a JSON envelope. It returns exactly what
// json.Unmarshal into a zero Envelope gives: the same value, and an error
// whenever json.Unmarshal returns one (then the error is json.Unmarshal's
// own).
//
// What the issuer sends — one flat object with known keys, strings,
// integers, the counters array and string arrays — is decoded without
// reflection. Anything else (null, duplicate keys, keys that match a field
// only case-insensitively, numbers that are not plain integers, surrogate
// escapes, invalid UTF-8, malformed input) is handed to json.Unmarshal.
// Unknown keys are skipped as json.Unmarshal skips them, so an envelope
// from a newer issuer still decodes without leaving the fast path.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var e Envelope
	d := envelopeDecoder{data: data}
	if d.envelope(&e) {
		return e, nil
	}
	// A second variable: &slow escapes to the heap, but only on this path.
	var slow Envelope
	err := json.Unmarshal(data, &slow)
	return slow, err
}

// envelopeDecoder is the fast path of DecodeEnvelope. Each method reports
// false when the input is not one it decodes with certainty; the caller
// then gives the whole input to json.Unmarshal.
type envelopeDecoder struct {
	data []byte
	// text is one copy of data that every decoded string is a substring
	// of: one allocation for all of an envelope's strings.
	text string
	i    int
}

// maxSkipDepth bounds how deep an unknown field's value may nest before
// the fast path gives the input to json.Unmarshal instead.
const maxSkipDepth = 32

func (d *envelopeDecoder) envelope(e *Envelope) bool {
	d.ws()
	if !d.consume('{') {
		return false
	}
	d.ws()
	if d.consume('}') {
		return d.end()
	}
	d.text = string(d.data)
	var seen uint64
	for {
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if !d.consume(':') {
			return false
		}
		d.ws()
		bit, known := d.field(e, key)
		switch {
		case !known:
			if !unknownKey(key) || !d.skip(0) {
				return false
			}
		case bit == 0 || seen&bit != 0:
			// The value did not decode, or the key is repeated
			// (json.Unmarshal decodes a repeated key again into
			// what the first one left).
			return false
		default:
			seen |= bit
		}
		d.ws()
		if d.consume(',') {
			d.ws()
			continue
		}
		if d.consume('}') {
			return d.end()
		}
		return false
	}
}

// field decodes the value of the known field key into e. It returns the
// field's bit for duplicate detection (0 when the value did not decode) and
// whether key names a field at all.
func (d *envelopeDecoder) field(e *Envelope, key string) (bit uint64, known bool) {
	var ok bool
	switch key {
	case "decision":
		var s string
		s, ok = d.str()
		e.Decision, bit = Decision(s), 1<<0
	case "grant_id":
		e.GrantID, ok = d.str()
		bit = 1 << 1
	case "review_id":
		e.ReviewID, ok = d.str()
		bit = 1 << 2
	case "reason":
		var s string
		s, ok = d.str()
		e.Reason, bit = Reason(s), 1<<3
	case "missing":
		e.Missing, ok = d.str()
		bit = 1 << 4
	case "recovery":
		var s string
		s, ok = d.str()
		e.Recovery, bit = Recovery(s), 1<<5
	case "epoch":
		e.Epoch, ok = d.uint()
		bit = 1 << 6
	case "issued_at":
		e.IssuedAt, ok = d.int()
		bit = 1 << 7
	case "expires_at":
		e.ExpiresAt, ok = d.int()
		bit = 1 << 8
	case "seq":
		e.Seq, ok = d.uint()
		bit = 1 << 9
	case "kind":
		var s string
		if s, ok = d.str(); ok {
			e.Kind, ok = kindByName()[s]
		}
		bit = 1 << 10
	case "digest":
		ok = d.hash(&e.Digest)
		bit = 1 << 11
	case "counters":
		ok = d.counters(&e.Counters)
		bit = 1 << 12
	case "rules":
		ok = d.strs(&e.Rules)
		bit = 1 << 13
	case "outcome":
		e.Outcome, ok = d.str()
		bit = 1 << 14
	case "detail":
		e.Detail, ok = d.str()
		bit = 1 << 15
	case "surface":
		e.Surface, ok = d.str()
		bit = 1 << 16
	case "operation":
		e.Operation, ok = d.str()
		bit = 1 << 17
	case "consequence":
		e.Consequence, ok = d.str()
		bit = 1 << 18
	case "target":
		e.Target, ok = d.str()
		bit = 1 << 19
	case "target_label":
		e.TargetLabel, ok = d.str()
		bit = 1 << 20
	case "instrument":
		e.Instrument, ok = d.str()
		bit = 1 << 21
	case "instrument_left":
		e.InstrumentLeft, ok = d.str()
		bit = 1 << 22
	case "amount":
		e.Amount, ok = d.uint()
		bit = 1 << 23
	case "bytes":
		e.Bytes, ok = d.uint()
		bit = 1 << 24
	case "ledger_key":
		e.LedgerKey, ok = d.str()
		bit = 1 << 25
	case "authority":
		e.Authority, ok = d.str()
		bit = 1 << 26
	case "grounds":
		ok = d.strs(&e.Grounds)
		bit = 1 << 27
	default:
		return 0, false
	}
	if !ok {
		return 0, true
	}
	return bit, true
}

// unknownKey reports whether json.Unmarshal certainly ignores the key:
// encoding/json matches keys to fields case-insensitively (with Unicode
// folding), so a key is only safe to skip when it has no upper-case letter
// and no non-ASCII byte, and so cannot fold onto a field's lower-case name
// it differs from.
func unknownKey(key string) bool {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// kindByName maps the names of the kinds this version knows to their
// values, as Kind.UnmarshalText does. A kind missing here (none is) only
// costs the fast path.
var kindByName = sync.OnceValue(func() map[string]events.Kind {
	m := make(map[string]events.Kind)
	for k := events.Kind(1); k < 1<<10; k++ {
		if k.Known() {
			m[k.String()] = k
		}
	}
	return m
})

// end reports whether only whitespace is left.
func (d *envelopeDecoder) end() bool {
	d.ws()
	return d.i == len(d.data)
}

func (d *envelopeDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *envelopeDecoder) consume(c byte) bool {
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// str decodes a string as json.Unmarshal does, for strings whose raw bytes
// are valid UTF-8 and whose \u escapes are not surrogates: anything else
// (json.Unmarshal replaces such bytes and lone surrogates with U+FFFD)
// falls back. A string without escapes is a substring of d.text.
func (d *envelopeDecoder) str() (string, bool) {
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
			if escaped {
				return unescape(raw), true
			}
			if d.text == "" {
				return string(raw), true
			}
			return d.text[start : d.i-1], true
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
		case c >= utf8.RuneSelf:
			ascii = false
			d.i++
		default:
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

// unescape decodes the escapes of a string str has checked.
func unescape(raw []byte) string {
	var b strings.Builder
	b.Grow(len(raw))
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
	return b.String()
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
func (d *envelopeDecoder) uint() (uint64, bool) {
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

// int decodes a JSON integer that fits an int64.
func (d *envelopeDecoder) int() (int64, bool) {
	neg := d.consume('-')
	u, ok := d.uint()
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

// hash decodes a digest as Hash.UnmarshalText does: "" or 64 hex digits.
func (d *envelopeDecoder) hash(h *events.Hash) bool {
	if !d.consume('"') {
		return false
	}
	start := d.i
	if end := start + 2*len(h); end < len(d.data) && d.data[end] == '"' {
		d.i = end // the usual 64 digits: hex.Decode checks them
	}
	for d.i < len(d.data) && d.data[d.i] != '"' {
		d.i++
	}
	if d.i == len(d.data) {
		return false
	}
	s := d.data[start:d.i]
	d.i++
	switch len(s) {
	case 0:
		*h = events.Hash{}
		return true
	case 2 * len(h):
		_, err := hex.Decode(h[:], s)
		return err == nil
	}
	return false
}

// strs decodes an array of strings; [] gives an empty, non-nil slice as
// json.Unmarshal does.
func (d *envelopeDecoder) strs(dst *[]string) bool {
	if !d.consume('[') {
		return false
	}
	d.ws()
	out := make([]string, 0, 4)
	if d.consume(']') {
		*dst = out
		return true
	}
	for {
		s, ok := d.str()
		if !ok {
			return false
		}
		out = append(out, s)
		d.ws()
		if d.consume(']') {
			*dst = out
			return true
		}
		if !d.consume(',') {
			return false
		}
		d.ws()
	}
}

// counters decodes an array of {"key":..., "value":...} objects.
func (d *envelopeDecoder) counters(dst *[]events.Counter) bool {
	if !d.consume('[') {
		return false
	}
	d.ws()
	out := make([]events.Counter, 0, 4)
	if d.consume(']') {
		*dst = out
		return true
	}
	for {
		var c events.Counter
		if !d.counter(&c) {
			return false
		}
		out = append(out, c)
		d.ws()
		if d.consume(']') {
			*dst = out
			return true
		}
		if !d.consume(',') {
			return false
		}
		d.ws()
	}
}

func (d *envelopeDecoder) counter(c *events.Counter) bool {
	if !d.consume('{') {
		return false
	}
	d.ws()
	if d.consume('}') {
		return true
	}
	var seenKey, seenValue bool
	for {
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if !d.consume(':') {
			return false
		}
		d.ws()
		switch key {
		case "key":
			if seenKey {
				return false
			}
			seenKey = true
			if c.Key, ok = d.str(); !ok {
				return false
			}
		case "value":
			if seenValue {
				return false
			}
			seenValue = true
			if c.Value, ok = d.uint(); !ok {
				return false
			}
		default:
			if !unknownKey(key) || !d.skip(1) {
				return false
			}
		}
		d.ws()
		if d.consume(',') {
			d.ws()
			continue
		}
		return d.consume('}')
	}
}

// skip passes over the value of an unknown key, checking it is valid JSON.
func (d *envelopeDecoder) skip(depth int) bool {
	if depth > maxSkipDepth || d.i >= len(d.data) {
		return false
	}
	switch c := d.data[d.i]; {
	case c == '"':
		_, ok := d.str()
		return ok
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
			if _, ok := d.str(); !ok {
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

func (d *envelopeDecoder) literal(lit string) bool {
	if len(d.data)-d.i >= len(lit) && string(d.data[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// number passes over a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *envelopeDecoder) number() bool {
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
func (d *envelopeDecoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
