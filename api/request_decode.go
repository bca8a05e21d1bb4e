package api

import (
	"strings"
	"unicode/utf8"

	"github.com/writ-dev/writ/internal/jsonwire"
)

// Grant, spend and effect bodies are decoded without reflection when they
// have the shape package api/client sends: one object of known keys, each
// once, with plain strings, integers, the args value and (for grants) the
// sources and provenance lists, and "v" equal to Version. These decoders
// are the counterpart of the AppendJSON encoders, and a second
// implementation of the strict decoding an issuer applies to every body
// (encoding/json with unknown fields refused, nothing but whitespace after
// the object, "v" equal to Version, at most MaxBodyBytes), not a
// different protocol: when one succeeds, the request it fills is exactly
// the one the strict decoding gives (reflect.DeepEqual; the differential
// tests and fuzz target in request_decode_test.go hold them to that), and
// the strict decoding would have accepted the body. Everything else — an
// unknown, repeated or case-folded key, null, a number that is not a plain
// integer, a wrong type, a string with invalid UTF-8 or a surrogate
// escape, another version, malformed JSON, an oversize body — makes the
// fast decoder report false, and the caller decodes the body strictly, so
// every refusal and its message stay those of the strict decoder.
//
// Adding a field to GrantRequest, SpendRequest, EffectRequest,
// FieldTrace or TraceMatch means adding it here;
// TestFastDecodersCoverFields fails until it is (the strict decoder would
// accept the new key and the fast one would not, which is correct but
// slow).

// DecodeGrantFast decodes a grant body as the strict decoding does, or
// reports false. On false, r is left partly filled: the caller decodes
// into a new value. r.Args aliases data (a strict decoder's is a copy):
// the request is only read while data is alive and unchanged.
func DecodeGrantFast(data []byte, r *GrantRequest) bool {
	if len(data) > MaxBodyBytes {
		return false
	}
	d := fastDecoder{Scanner: jsonwire.Scanner{Data: data}}
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
			r.TTLMillis, ok = d.Int()
			bit = 1 << 5
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
			if v, ok = d.Uint(); ok {
				r.Amount = &v
			}
			bit = 1 << 9
		case "bytes":
			r.Bytes, ok = d.Uint()
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
		case "review":
			r.Review, ok = d.str()
			bit = 1 << 14
		case "artifact_sha256":
			r.ArtifactSHA256, ok = d.str()
			bit = 1 << 15
		case "route":
			r.Route, ok = d.str()
			bit = 1 << 16
		case "route_gen":
			r.RouteGen, ok = d.Uint()
			bit = 1 << 17
		}
		return bit, ok
	})
	return ok && d.seen&1 != 0 && r.V == Version && d.End()
}

// DecodeSpendFast decodes a spend body as the strict decoding does, or
// reports false, as DecodeGrantFast does.
func DecodeSpendFast(data []byte, r *SpendRequest) bool {
	if len(data) > MaxBodyBytes {
		return false
	}
	d := fastDecoder{Scanner: jsonwire.Scanner{Data: data}}
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
	return ok && d.seen&1 != 0 && r.V == Version && d.End()
}

// DecodeEffectFast decodes an effect body as the strict decoding does, or
// reports false, as DecodeGrantFast does.
func DecodeEffectFast(data []byte, r *EffectRequest) bool {
	if len(data) > MaxBodyBytes {
		return false
	}
	d := fastDecoder{Scanner: jsonwire.Scanner{Data: data}}
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
	return ok && d.seen&1 != 0 && r.V == Version && d.End()
}

// fastDecoder is the state of the fast decoders. Each method reports false
// when the input is not one it decodes with certainty.
type fastDecoder struct {
	jsonwire.Scanner
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
	d.SkipSpace()
	return d.members(&d.seen, member)
}

// members decodes an object as object describes, recording the bits of
// its keys in seen. It loops itself rather than through
// jsonwire.Scanner.Object: one indirect call less per member, which is
// measurable on the smallest bodies.
func (d *fastDecoder) members(seen *uint32, member func(key []byte) (bit uint32, ok bool)) bool {
	if !d.Consume('{') {
		return false
	}
	d.SkipSpace()
	if d.Consume('}') {
		return true
	}
	for {
		key, ok := d.key()
		if !ok {
			return false
		}
		bit, ok := member(key)
		if !ok || bit == 0 || *seen&bit != 0 {
			return false
		}
		*seen |= bit
		d.SkipSpace()
		if d.Consume(',') {
			d.SkipSpace()
			continue
		}
		return d.Consume('}')
	}
}

// key reads an object key, the colon and the space around it. Only keys of
// printable ASCII without escapes are read: encoding/json matches keys to
// fields case-insensitively and after unescaping, so any other key might
// name a field it does not spell, and falls back.
func (d *fastDecoder) key() ([]byte, bool) {
	if !d.Consume('"') {
		return nil, false
	}
	start := d.Pos
	for d.Pos < len(d.Data) {
		c := d.Data[d.Pos]
		if c == '"' {
			key := d.Data[start:d.Pos]
			d.Pos++
			return key, d.Colon()
		}
		if c < ' ' || c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
		d.Pos++
	}
	return nil, false
}

// str decodes a string as encoding/json does, for strings whose raw bytes
// are valid UTF-8 and whose \u escapes are not surrogates: anything else
// (encoding/json replaces such bytes and lone surrogates with U+FFFD)
// falls back. The string is appended to d.text.
func (d *fastDecoder) str() (string, bool) {
	raw, escaped, ok := d.StringBytes()
	if !ok || len(raw) == 0 {
		return "", ok
	}
	if d.text.Cap() == 0 {
		d.text.Grow(textHint)
	}
	n := d.text.Len()
	if escaped {
		jsonwire.Unescape(&d.text, raw)
	} else {
		d.text.Write(raw)
	}
	return d.text.String()[n:], true
}

// int decodes a JSON integer that fits an int into v.
func (d *fastDecoder) int(v *int) bool {
	w, ok := d.Int()
	if !ok || int64(int(w)) != w {
		return false
	}
	*v = int(w)
	return true
}

// strs decodes an array of strings; [] gives an empty, non-nil slice as
// encoding/json does.
func (d *fastDecoder) strs() ([]string, bool) {
	out := make([]string, 0, 4)
	ok := d.Array(func() bool {
		s, ok := d.str()
		out = append(out, s)
		return ok
	})
	return out, ok
}

// traces decodes a grant's provenance: an array of field traces.
func (d *fastDecoder) traces() ([]FieldTrace, bool) {
	out := []FieldTrace{}
	ok := d.Array(func() bool {
		var t FieldTrace
		ok := d.trace(&t)
		out = append(out, t)
		return ok
	})
	return out, ok
}

func (d *fastDecoder) trace(t *FieldTrace) bool {
	var seen uint32
	return d.members(&seen, func(key []byte) (bit uint32, ok bool) {
		switch string(key) {
		case "field":
			t.Field, ok = d.str()
			bit = 1 << 0
		case "matches":
			t.Matches, ok = d.matches()
			bit = 1 << 1
		case "covered":
			t.Covered, ok = d.Bool()
			bit = 1 << 2
		}
		return bit, ok
	})
}

func (d *fastDecoder) matches() ([]TraceMatch, bool) {
	out := []TraceMatch{}
	ok := d.Array(func() bool {
		var m TraceMatch
		var seen uint32
		ok := d.members(&seen, func(key []byte) (bit uint32, ok bool) {
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
				m.Whole, ok = d.Bool()
				bit = 1 << 3
			case "field":
				m.Field, ok = d.str()
				bit = 1 << 4
			case "field_whole":
				m.FieldWhole, ok = d.Bool()
				bit = 1 << 5
			}
			return bit, ok
		})
		out = append(out, m)
		return ok
	})
	return out, ok
}

// raw returns the bytes of one JSON value, as a json.RawMessage field
// holds them: from its first byte to its last, as written. The value is
// checked as encoding/json's scanner checks it (which takes the bytes of
// strings as they are, valid UTF-8 or not).
func (d *fastDecoder) raw() ([]byte, bool) {
	start := d.Pos
	if !d.Skip(maxRawDepth) {
		return nil, false
	}
	return d.Data[start:d.Pos:d.Pos], true
}
