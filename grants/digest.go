package grants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/events"
)

// MaxArgsBytes bounds the canonical arguments of one request.
const MaxArgsBytes = 256 << 10

// MaxArgsDepth bounds nesting in arguments.
const MaxArgsDepth = 64

// ErrBadArgs is returned when tool arguments are not a JSON value that
// canonicalizes.
var ErrBadArgs = errors.New("grants: bad arguments")

// CanonicalJSON returns the canonical form of a JSON value: object keys
// sorted by the byte order of their UTF-8 encoding, no insignificant
// whitespace, strings re-escaped by encoding/json, and numbers rewritten as
// their exact decimal value in shortest form (1.50, 15e-1 and 1.5 are the
// same number; 12345678901234567890 and 12345678901234567891 stay
// different — no float64 rounding). Two argument documents with the same
// meaning produce the same bytes, so the request digest does not depend on
// how a client formatted its JSON. Duplicate object keys are rejected: they
// are a classic way to make two parsers disagree about what a request says.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if len(raw) > MaxArgsBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds limit %d", ErrBadArgs, len(raw), MaxArgsBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canon(dec, &buf, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrBadArgs)
	}
	return buf.Bytes(), nil
}

func canon(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > MaxArgsDepth {
		return fmt.Errorf("%w: nesting deeper than %d", ErrBadArgs, MaxArgsDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgs, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type kv struct {
				k string
				v []byte
			}
			var kvs []kv
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("%w: %v", ErrBadArgs, err)
				}
				k, ok := kt.(string)
				if !ok {
					return fmt.Errorf("%w: object key is not a string", ErrBadArgs)
				}
				if seen[k] {
					return fmt.Errorf("%w: duplicate object key %q", ErrBadArgs, k)
				}
				seen[k] = true
				var vb bytes.Buffer
				if err := canon(dec, &vb, depth+1); err != nil {
					return err
				}
				kvs = append(kvs, kv{k, vb.Bytes()})
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: %v", ErrBadArgs, err)
			}
			sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
			out.WriteByte('{')
			for i, e := range kvs {
				if i > 0 {
					out.WriteByte(',')
				}
				writeString(out, e.k)
				out.WriteByte(':')
				out.Write(e.v)
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			first := true
			for dec.More() {
				if !first {
					out.WriteByte(',')
				}
				first = false
				if err := canon(dec, out, depth+1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return fmt.Errorf("%w: %v", ErrBadArgs, err)
			}
			out.WriteByte(']')
		default:
			return fmt.Errorf("%w: unexpected %q", ErrBadArgs, t)
		}
	case string:
		writeString(out, t)
	case json.Number:
		n, err := canonNumber(string(t))
		if err != nil {
			return err
		}
		out.WriteString(n)
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	}
	return nil
}

func writeString(out *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // never fails for a string
	out.Write(b)
}

// RequestDigest is H(tool, canonical args): SHA-256 over a domain tag, the
// tool name and the canonical argument bytes, each length-prefixed so no two
// (tool, args) pairs share an input.
func RequestDigest(tool string, canonicalArgs []byte) events.Hash {
	w := events.NewWriter(make([]byte, 0, 32+len(tool)+len(canonicalArgs)))
	w.String(1, "writ.request.v1")
	w.String(2, tool)
	w.Raw(3, canonicalArgs)
	return events.Sum(w.Bytes())
}

// DigestArgs canonicalizes raw JSON arguments and returns the request
// digest.
func DigestArgs(tool string, rawArgs []byte) (events.Hash, error) {
	c, err := CanonicalJSON(rawArgs)
	if err != nil {
		return events.Hash{}, err
	}
	return RequestDigest(tool, c), nil
}

// maxExponent bounds the exponent of a number literal so a literal such as
// 1e999999999 cannot make canonicalization allocate a huge integer.
const maxExponent = 400

// canonNumber returns the exact, shortest decimal form of a JSON number.
func canonNumber(lit string) (string, error) {
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return "", fmt.Errorf("%w: number %s has an exponent outside ±%d", ErrBadArgs, lit, maxExponent)
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return "", fmt.Errorf("%w: bad number %s", ErrBadArgs, lit)
	}
	if r.IsInt() {
		return r.Num().String(), nil
	}
	// A decimal literal has a finite decimal expansion; find its length.
	x := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	for digits := 1; digits <= 2*maxExponent+len(lit); digits++ {
		x.Mul(x, ten)
		if x.IsInt() {
			return r.FloatString(digits), nil
		}
	}
	return "", fmt.Errorf("%w: number %s has too many digits", ErrBadArgs, lit)
}
