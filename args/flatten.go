package args

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/events"
)

// Limits on flattened arguments.
const (
	// MaxString is the longest string value carried verbatim; a longer
	// one is carried as its length and SHA-256 (Elided), so a large file
	// body does not travel through the log. A sink or target that was
	// elided cannot be screened and is refused.
	MaxString = 16 << 10
	// MaxLeaves bounds the scalar values of one call.
	MaxLeaves = 4096
	// MaxPath bounds the JSON pointer of one value.
	MaxPath = 1024
)

// Kind is the JSON type of one argument value. Stored in the log:
// append only.
type Kind uint8

// Argument kinds.
const (
	String Kind = 1
	Number Kind = 2 // Value is the canonical decimal form
	Bool   Kind = 3 // Value is "true" or "false"
	Null   Kind = 4
	Elided Kind = 5 // a string over MaxString: Value is its SHA-256 (hex), Len its length
)

// Leaf is one scalar value of a call's arguments and where it sits: its
// JSON pointer (RFC 6901: "/to/0", "" for a scalar document).
type Leaf struct {
	Path  string
	Kind  Kind
	Value string
	Len   uint64 // byte length of the string (String, Elided)
}

// Flat is a call's arguments as the policy engine sees them: every scalar
// in document order. Carried is false when the arguments were not forwarded
// at all (a digest-only command); then no field can be read.
type Flat struct {
	Carried bool
	Leaves  []Leaf
}

// Flatten canonicalizes JSON arguments (CanonicalJSON) and lists their
// scalars in document order (object keys sorted). It is a pure function of
// the arguments' meaning, independent of any policy, so the leader can
// compute it once and the state machine extract from it.
func Flatten(raw []byte) (Flat, error) {
	canon := raw
	if !IsCanonical(raw) {
		c, err := CanonicalJSON(raw)
		if err != nil {
			return Flat{}, fmt.Errorf("%w: %v", ErrFlatten, err)
		}
		canon = c
	}
	// Every canonical form is certified; the check keeps the walk's
	// assumption local rather than a promise of CanonicalJSON.
	if IsCanonical(canon) {
		if a, ok := flattenCanonical(canon); ok {
			return a, nil
		}
	}
	return flattenGeneral(raw)
}

// flattenGeneral is Flatten for any input: canonicalize, then read the
// canonical form back through encoding/json.
func flattenGeneral(raw []byte) (Flat, error) {
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return Flat{}, fmt.Errorf("%w: %v", ErrFlatten, err)
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	a := Flat{Carried: true}
	if err := flatten(dec, "", &a); err != nil {
		return Flat{}, err
	}
	return a, nil
}

func flatten(dec *json.Decoder, path string, a *Flat) error {
	if len(path) > MaxPath {
		return fmt.Errorf("%w: %w: a field path is longer than %d bytes", ErrFlatten, ErrTooLarge, MaxPath)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFlatten, err)
	}
	leaf := func(arg Leaf) error {
		if len(a.Leaves) >= MaxLeaves {
			return fmt.Errorf("%w: %w: more than %d values", ErrFlatten, ErrTooLarge, MaxLeaves)
		}
		arg.Path = path
		a.Leaves = append(a.Leaves, arg)
		return nil
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return fmt.Errorf("%w: %v", ErrFlatten, err)
				}
				if err := flatten(dec, path+"/"+escapePointer(kt.(string)), a); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := flatten(dec, fmt.Sprintf("%s/%d", path, i), a); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("%w: %v", ErrFlatten, err)
		}
		return nil
	case string:
		if len(t) > MaxString {
			sum := events.Sum([]byte(t))
			return leaf(Leaf{Kind: Elided, Value: hex.EncodeToString(sum[:]), Len: uint64(len(t))})
		}
		return leaf(Leaf{Kind: String, Value: t, Len: uint64(len(t))})
	case json.Number:
		return leaf(Leaf{Kind: Number, Value: string(t)})
	case bool:
		if t {
			return leaf(Leaf{Kind: Bool, Value: "true"})
		}
		return leaf(Leaf{Kind: Bool, Value: "false"})
	case nil:
		return leaf(Leaf{Kind: Null})
	}
	return fmt.Errorf("%w: unexpected token %v", ErrFlatten, tok)
}

// escapePointer escapes one JSON pointer reference token.
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return string(appendPointerToken(make([]byte, 0, len(s)+2), s))
}

// FieldPointer turns a field name as a policy writes it into a JSON
// pointer: "command" is the top-level key, "/headers/to" a pointer.
func FieldPointer(field string) string {
	if strings.HasPrefix(field, "/") {
		return field
	}
	return "/" + escapePointer(field)
}

// Under returns the leaves at or below the JSON pointer p, in order.
func (a Flat) Under(p string) []Leaf {
	var out []Leaf
	for _, l := range a.Leaves {
		if l.Path == p || (strings.HasPrefix(l.Path, p) && len(l.Path) > len(p) && l.Path[len(p)] == '/') {
			out = append(out, l)
		}
	}
	return out
}
