package policy

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Limits on the arguments the engine sees.
const (
	// MaxArgString is the longest string value carried verbatim; a longer
	// one is carried as its length and SHA-256 (ArgElided), so a large file
	// body does not travel through the log. A sink or target that was
	// elided cannot be screened and is refused.
	MaxArgString = 16 << 10
	// MaxArgLeaves bounds the scalar values of one call.
	MaxArgLeaves = 4096
	// MaxArgPath bounds the JSON pointer of one value.
	MaxArgPath = 1024
)

// ArgKind is the JSON type of one argument value. Stored in the log:
// append only.
type ArgKind uint8

// Argument kinds.
const (
	ArgString ArgKind = 1
	ArgNumber ArgKind = 2 // Value is the canonical decimal form
	ArgBool   ArgKind = 3 // Value is "true" or "false"
	ArgNull   ArgKind = 4
	ArgElided ArgKind = 5 // a string over MaxArgString: Value is its SHA-256 (hex), Len its length
)

// Arg is one scalar value of a call's arguments and where it sits: its
// JSON pointer (RFC 6901: "/to/0", "" for a scalar document).
type Arg struct {
	Path  string
	Kind  ArgKind
	Value string
	Len   uint64 // byte length of the string (ArgString, ArgElided)
}

// Args are a call's arguments as the engine sees them: every scalar in
// document order. Carried is false when the arguments were not forwarded
// at all (a digest-only command); then no field can be read.
type Args struct {
	Carried bool
	Leaves  []Arg
}

// FlattenArgs canonicalizes JSON arguments (grants.CanonicalJSON) and
// lists their scalars in document order (object keys sorted). It is a pure
// function of the arguments' meaning, independent of any policy, so the
// leader can compute it once and the state machine extract from it.
func FlattenArgs(raw []byte) (Args, error) {
	canon := raw
	if !grants.IsCanonical(raw) {
		c, err := grants.CanonicalJSON(raw)
		if err != nil {
			return Args{}, fmt.Errorf("%w: %v", ErrArgs, err)
		}
		canon = c
	}
	// Every canonical form is certified; the check keeps the walk's
	// assumption local rather than a promise of another package.
	if grants.IsCanonical(canon) {
		if a, ok := flattenCanonical(canon); ok {
			return a, nil
		}
	}
	return flattenGeneral(raw)
}

// flattenGeneral is FlattenArgs for any input: canonicalize, then read the
// canonical form back through encoding/json.
func flattenGeneral(raw []byte) (Args, error) {
	canon, err := grants.CanonicalJSON(raw)
	if err != nil {
		return Args{}, fmt.Errorf("%w: %v", ErrArgs, err)
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.UseNumber()
	a := Args{Carried: true}
	if err := flatten(dec, "", &a); err != nil {
		return Args{}, err
	}
	return a, nil
}

func flatten(dec *json.Decoder, path string, a *Args) error {
	if len(path) > MaxArgPath {
		return fmt.Errorf("%w: %w: a field path is longer than %d bytes", ErrArgs, ErrArgsTooLarge, MaxArgPath)
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrArgs, err)
	}
	leaf := func(arg Arg) error {
		if len(a.Leaves) >= MaxArgLeaves {
			return fmt.Errorf("%w: %w: more than %d values", ErrArgs, ErrArgsTooLarge, MaxArgLeaves)
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
					return fmt.Errorf("%w: %v", ErrArgs, err)
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
			return fmt.Errorf("%w: %v", ErrArgs, err)
		}
		return nil
	case string:
		if len(t) > MaxArgString {
			sum := events.Sum([]byte(t))
			return leaf(Arg{Kind: ArgElided, Value: hex.EncodeToString(sum[:]), Len: uint64(len(t))})
		}
		return leaf(Arg{Kind: ArgString, Value: t, Len: uint64(len(t))})
	case json.Number:
		return leaf(Arg{Kind: ArgNumber, Value: string(t)})
	case bool:
		if t {
			return leaf(Arg{Kind: ArgBool, Value: "true"})
		}
		return leaf(Arg{Kind: ArgBool, Value: "false"})
	case nil:
		return leaf(Arg{Kind: ArgNull})
	}
	return fmt.Errorf("%w: unexpected token %v", ErrArgs, tok)
}

// escapePointer escapes one JSON pointer reference token.
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return string(appendPointerToken(make([]byte, 0, len(s)+2), s))
}

// fieldPointer turns a field name as a policy writes it into a JSON
// pointer: "command" is the top-level key, "/headers/to" a pointer.
func fieldPointer(field string) string {
	if strings.HasPrefix(field, "/") {
		return field
	}
	return "/" + escapePointer(field)
}

// Under returns the leaves at or below the JSON pointer p, in order.
func (a Args) Under(p string) []Arg {
	var out []Arg
	for _, l := range a.Leaves {
		if l.Path == p || (strings.HasPrefix(l.Path, p) && len(l.Path) > len(p) && l.Path[len(p)] == '/') {
			out = append(out, l)
		}
	}
	return out
}
