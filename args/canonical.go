package args

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on the canonical form.
const (
	// MaxBytes bounds the canonical arguments of one request (and the
	// input CanonicalJSON reads).
	MaxBytes = 256 << 10
	// MaxDepth bounds how many arrays and objects may nest in arguments.
	MaxDepth = 64
)

// CanonicalJSON returns the canonical form of a JSON value: object keys
// sorted by the byte order of their UTF-8 encoding, no insignificant
// whitespace, strings re-escaped by encoding/json, and numbers rewritten as
// their exact decimal value in shortest form (1.50, 15e-1 and 1.5 are the
// same number; 12345678901234567890 and 12345678901234567891 stay
// different — no float64 rounding). Two argument documents with the same
// meaning produce the same bytes, so the request digest does not depend on
// how a client formatted its JSON.
//
// Input that two parsers could read differently is rejected rather than
// normalised: duplicate object keys, invalid UTF-8 and escaped lone
// surrogates ("\ud800"), which encoding/json would otherwise silently turn
// into U+FFFD. Also rejected: anything after the value, more than
// MaxDepth nested arrays and objects, exponents beyond ±400, and input
// or canonical output longer than MaxBytes.
//
// A document already in canonical form (as a spend's args are when they
// are flattened) is recognised in one scan and copied.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if IsCanonical(raw) {
		return bytes.Clone(raw), nil
	}
	return canonicalize(raw)
}

// canonicalize is CanonicalJSON the long way: parse, then re-encode.
func canonicalize(raw []byte) ([]byte, error) {
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds limit %d", ErrCanonical, len(raw), MaxBytes)
	}
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("%w: invalid UTF-8", ErrCanonical)
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	c := canonicalizer{dec: dec}
	var buf bytes.Buffer
	if err := c.value(&buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrCanonical)
	}
	if c.written > MaxBytes {
		return nil, fmt.Errorf("%w: canonical form exceeds limit %d: it is %d bytes (the input is %d; escapes and number forms grew it)",
			ErrCanonical, MaxBytes, c.written, len(raw))
	}
	return buf.Bytes(), nil
}

// canonicalizer writes the canonical form of the decoder's next value.
// written counts every byte emitted at the leaves (each byte of the output
// is emitted exactly once; object members are buffered and copied, not
// re-emitted). Past MaxBytes bytes are only counted, not written, so
// the output stays bounded and the refusal can state the whole size (at
// most a few times the input, itself within MaxBytes).
type canonicalizer struct {
	dec     *json.Decoder
	written int
}

func (c *canonicalizer) emit(out *bytes.Buffer, s string) error {
	c.written += len(s)
	if c.written <= MaxBytes {
		out.WriteString(s)
	}
	return nil
}

func (c *canonicalizer) value(out *bytes.Buffer, depth int) error {
	tok, err := c.dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCanonical, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		// depth counts the arrays and objects around this value.
		if depth >= MaxDepth {
			return fmt.Errorf("%w: nesting deeper than %d", ErrCanonical, MaxDepth)
		}
		switch t {
		case '{':
			return c.object(out, depth)
		case '[':
			return c.array(out, depth)
		}
		return fmt.Errorf("%w: unexpected %q", ErrCanonical, t)
	case string:
		return c.emit(out, quote(t))
	case json.Number:
		n, err := canonNumber(string(t))
		if err != nil {
			return err
		}
		return c.emit(out, n)
	case bool:
		if t {
			return c.emit(out, "true")
		}
		return c.emit(out, "false")
	case nil:
		return c.emit(out, "null")
	}
	return fmt.Errorf("%w: unexpected token %v", ErrCanonical, tok)
}

func (c *canonicalizer) object(out *bytes.Buffer, depth int) error {
	type member struct {
		k string
		v []byte
	}
	var members []member
	seen := map[string]bool{}
	for c.dec.More() {
		kt, err := c.dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCanonical, err)
		}
		k, ok := kt.(string)
		if !ok {
			return fmt.Errorf("%w: object key is not a string", ErrCanonical)
		}
		if seen[k] {
			return fmt.Errorf("%w: duplicate object key %q", ErrCanonical, k)
		}
		seen[k] = true
		var vb bytes.Buffer
		if err := c.value(&vb, depth+1); err != nil {
			return err
		}
		members = append(members, member{k, vb.Bytes()})
	}
	if _, err := c.dec.Token(); err != nil {
		return fmt.Errorf("%w: %v", ErrCanonical, err)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].k < members[j].k })
	if err := c.emit(out, "{"); err != nil {
		return err
	}
	for i, m := range members {
		sep := ""
		if i > 0 {
			sep = ","
		}
		if err := c.emit(out, sep+quote(m.k)+":"); err != nil {
			return err
		}
		out.Write(m.v) // already counted when it was emitted
	}
	return c.emit(out, "}")
}

func (c *canonicalizer) array(out *bytes.Buffer, depth int) error {
	if err := c.emit(out, "["); err != nil {
		return err
	}
	for i := 0; c.dec.More(); i++ {
		if i > 0 {
			if err := c.emit(out, ","); err != nil {
				return err
			}
		}
		if err := c.value(out, depth+1); err != nil {
			return err
		}
	}
	if _, err := c.dec.Token(); err != nil {
		return fmt.Errorf("%w: %v", ErrCanonical, err)
	}
	return c.emit(out, "]")
}

// checkSurrogates rejects \u escapes that encode a lone UTF-16 surrogate.
// encoding/json decodes them to U+FFFD, so "\ud800" and "\ufffd" would
// share a digest while a tool reading the raw request could see different
// strings. It only inspects escapes inside strings; syntax errors are left
// to the decoder.
func checkSurrogates(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch b := raw[i]; {
		case !inString:
			inString = b == '"'
		case b == '"':
			inString = false
		case b == '\\':
			if i+1 < len(raw) && raw[i+1] != 'u' {
				i++ // a one-character escape such as \" or \\
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				continue // malformed; the decoder reports it
			}
			i += 5
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low half must follow
				lo, ok := hex4(raw, i+3)
				if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
					return fmt.Errorf("%w: lone surrogate \\u%04x in a string", ErrCanonical, r)
				}
				i += 6
			case utf16.IsSurrogate(r):
				return fmt.Errorf("%w: lone surrogate \\u%04x in a string", ErrCanonical, r)
			}
		}
	}
	return nil
}

// hex4 parses the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(v), err == nil
}

// quote returns s as a JSON string the way encoding/json writes it.
func quote(s string) string {
	b, _ := json.Marshal(s) // never fails for a string
	return string(b)
}

// maxExponent bounds the exponent of a number literal so a literal such as
// 1e999999999 cannot expand to a huge string of zeros.
const maxExponent = 400

// canonNumber returns the exact, shortest decimal form of a JSON number
// literal (already validated by the decoder): no exponent, no leading or
// trailing zeros, no "-" on zero. It works on the digits as text, so its
// cost is linear in the literal's length.
func canonNumber(lit string) (string, error) {
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return "", fmt.Errorf("%w: number %s has an exponent outside ±%d", ErrCanonical, lit, maxExponent)
		}
		mant, exp = lit[:i], e
	}
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || strings.Trim(intPart+frac, "0123456789") != "" {
		return "", fmt.Errorf("%w: bad number %s", ErrCanonical, lit)
	}
	// The value is 0.digits × 10^point.
	digits := intPart + frac
	point := len(intPart) + exp
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return "0", nil
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case point <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -point))
		b.WriteString(digits)
	case point >= len(digits):
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", point-len(digits)))
	default:
		b.WriteString(digits[:point])
		b.WriteByte('.')
		b.WriteString(digits[point:])
	}
	return b.String(), nil
}

// IsCanonical reports whether raw is certified to be in canonical form:
// CanonicalJSON would return it unchanged. It is the one-scan check
// CanonicalJSON itself makes, exported so a reader of canonical arguments
// (Flatten) can walk them without a general JSON decoder. A
// certified document has no whitespace and no exponents, and every string
// and key is written exactly as encoding/json writes its decoded value:
// its only escapes are \" \\ \b \f \n \r \t, \u00XX (lowercase hex) for
// the other control bytes and for <, > and &, and \u2028 and \u2029, so a
// string without a backslash is its value byte for byte, and one with a
// backslash decodes with those escapes alone.
func IsCanonical(raw []byte) bool {
	return len(raw) <= MaxBytes && isCanonical(raw)
}

// isCanonical reports whether raw is, for certain, already in canonical
// form, so that CanonicalJSON would return it unchanged: it does in one
// scan, without allocating, what parsing and re-encoding would show. It
// answers false for anything it does not certify (whitespace, escapes
// encoding/json would not write, characters it would escape written
// as they are, exponents, non-canonical numbers, keys not strictly
// ascending by their decoded bytes, nesting deeper than MaxDepth,
// trailing bytes), and CanonicalJSON then takes the long way. Every
// argument document canonicalised once (a spend's args are flattened from
// their canonical form) is certified.
func isCanonical(raw []byte) bool {
	end, ok := scanCanonical(raw, 0, 0)
	return ok && end == len(raw)
}

// scanCanonical scans the canonical value at raw[i:], nested in depth
// arrays and objects, and returns where it ends.
func scanCanonical(raw []byte, i, depth int) (int, bool) {
	if i >= len(raw) {
		return 0, false
	}
	switch c := raw[i]; {
	case c == '{':
		if depth >= MaxDepth {
			return 0, false
		}
		i++
		if i < len(raw) && raw[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		prevEscaped := false
		for n := 0; ; n++ {
			j, escaped, ok := scanCanonicalString(raw, i)
			if !ok {
				return 0, false
			}
			// Strictly ascending by decoded bytes means sorted and
			// unique. An unescaped key's bytes are the key; an escaped
			// one is compared as it decodes.
			key := raw[i+1 : j-1]
			if n > 0 {
				var cmp int
				if escaped || prevEscaped {
					cmp = compareDecoded(prev, key)
				} else {
					cmp = bytes.Compare(prev, key)
				}
				if cmp >= 0 {
					return 0, false
				}
			}
			prev, prevEscaped = key, escaped
			if j >= len(raw) || raw[j] != ':' {
				return 0, false
			}
			if i, ok = scanCanonical(raw, j+1, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ',':
				i++
			case '}':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '[':
		if depth >= MaxDepth {
			return 0, false
		}
		i++
		if i < len(raw) && raw[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = scanCanonical(raw, i, depth+1); !ok || i >= len(raw) {
				return 0, false
			}
			switch raw[i] {
			case ',':
				i++
			case ']':
				return i + 1, true
			default:
				return 0, false
			}
		}
	case c == '"':
		end, _, ok := scanCanonicalString(raw, i)
		return end, ok
	case c == 't':
		return scanLiteral(raw, i, "true")
	case c == 'f':
		return scanLiteral(raw, i, "false")
	case c == 'n':
		return scanLiteral(raw, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanCanonicalNumber(raw, i)
	}
	return 0, false
}

func scanLiteral(raw []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(raw[i:], []byte(lit)) {
		return 0, false
	}
	return i + len(lit), true
}

// scanCanonicalString scans a string written exactly as quote writes its
// decoded value, and reports whether it holds an escape. Unescaped, it
// holds printable ASCII (DEL included) other than '"', '\\', '<', '>' and
// '&', and valid UTF-8 sequences other than U+2028 and U+2029; escaped, only
// what encoding/json writes for those: \" and \\, \b \f \n \r \t,
// \u00XX in lowercase hex for the other control bytes and for <, > and &,
// and \u2028 and \u2029. Any other escape (\/, \u00e9, \u000a for \n,
// uppercase hex) is one encoding/json would write differently, so the
// string is not certified.
func scanCanonicalString(raw []byte, i int) (end int, escaped, ok bool) {
	if i >= len(raw) || raw[i] != '"' {
		return 0, false, false
	}
	for j := i + 1; j < len(raw); {
		c := raw[j]
		switch {
		case c == '"':
			return j + 1, escaped, true
		case c == '\\':
			n := canonicalEscapeLen(raw[j:])
			if n == 0 {
				return 0, false, false
			}
			escaped = true
			j += n
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 0, false, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(raw[j:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return 0, false, false
			}
			j += size
		}
	}
	return 0, false, false
}

// canonicalEscapeLen returns the length of the escape at the start of e
// if it is the one encoding/json writes for the character it stands for,
// else 0.
func canonicalEscapeLen(e []byte) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
	default:
		return 0
	}
	if len(e) < 6 {
		return 0
	}
	switch string(e[2:6]) {
	case "2028", "2029":
		return 6
	}
	hi, lo := lowerHex(e[4]), lowerHex(e[5])
	if e[2] != '0' || e[3] != '0' || hi < 0 || lo < 0 {
		return 0
	}
	switch c := byte(hi<<4 | lo); {
	case c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
		return 0 // written \b \f \n \r \t
	case c < 0x20 || c == '<' || c == '>' || c == '&':
		return 6
	}
	return 0
}

// lowerHex returns the value of a lowercase hex digit, or -1.
func lowerHex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// compareDecoded compares two keys by the bytes they decode to, as
// bytes.Compare would compare the decoded keys; both are the contents of
// strings scanCanonicalString certified. It decodes as it goes, so it does
// not allocate.
func compareDecoded(a, b []byte) int {
	da, db := decodedBytes{raw: a}, decodedBytes{raw: b}
	for {
		ca, oka := da.next()
		cb, okb := db.next()
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		case ca != cb:
			if ca < cb {
				return -1
			}
			return 1
		}
	}
}

// decodedBytes reads the decoded bytes of a certified string's contents
// one at a time.
type decodedBytes struct {
	raw  []byte
	i    int
	tail string // the rest of a decoded multi-byte character
}

func (d *decodedBytes) next() (byte, bool) {
	if d.tail != "" {
		c := d.tail[0]
		d.tail = d.tail[1:]
		return c, true
	}
	if d.i >= len(d.raw) {
		return 0, false
	}
	c := d.raw[d.i]
	if c != '\\' || d.i+1 >= len(d.raw) {
		d.i++
		return c, true
	}
	e := d.raw[d.i+1]
	d.i += 2
	switch e {
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
	default: // '"' or '\\'
		return e, true
	}
	if d.i+4 > len(d.raw) {
		d.i = len(d.raw)
		return 0, false // not certified; unreachable
	}
	h := d.raw[d.i : d.i+4]
	d.i += 4
	if h[0] == '2' { // \u2028 or \u2029: E2 80 A8 or E2 80 A9
		d.tail = "\x80\xa8"
		if h[3] == '9' {
			d.tail = "\x80\xa9"
		}
		return 0xe2, true
	}
	return byte(lowerHex(h[2])<<4 | lowerHex(h[3])), true
}

// scanCanonicalNumber scans a number in the form canonNumber writes: an
// optional '-', an integer part without leading zeros, an optional
// fraction without trailing zeros, no exponent, and not negative zero.
func scanCanonicalNumber(raw []byte, i int) (int, bool) {
	start := i
	if raw[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i, n = i+1, n+1
		}
		return n
	}
	intStart := i
	n := digits()
	zeroInt := n == 1 && raw[intStart] == '0'
	if n == 0 || (n > 1 && raw[intStart] == '0') {
		return 0, false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		if digits() == 0 || raw[i-1] == '0' {
			return 0, false
		}
		zeroInt = false
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		return 0, false
	}
	if zeroInt && raw[start] == '-' {
		return 0, false // -0 is written 0
	}
	return i, true
}
