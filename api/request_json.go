package api

import (
	"encoding/json"
	"strconv"

	"github.com/writ-dev/writ/internal/jsonwire"
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
	dst = jsonwire.AppendString(append(dst, `,"lane":`...), r.Lane)
	dst = jsonwire.AppendStringField(dst, `,"session":`, r.Session)
	dst = jsonwire.AppendString(append(dst, `,"tool":`...), r.Tool)
	dst = append(dst, `,"args":`...)
	if r.Args == nil {
		// json.RawMessage.MarshalJSON of nil.
		dst = append(dst, "null"...)
	} else {
		var ok bool
		if dst, ok = jsonwire.AppendCompact(dst, r.Args, maxCompactDepth); !ok {
			return marshalFallback(dst[:n], r)
		}
	}
	if r.TTLMillis != 0 {
		dst = strconv.AppendInt(append(dst, `,"ttl_ms":`...), r.TTLMillis, 10)
	}
	dst = jsonwire.AppendStringsField(dst, `,"sources":`, r.Sources)
	dst = jsonwire.AppendString(append(dst, `,"idempotency_key":`...), r.IdempotencyKey)
	dst = jsonwire.AppendStringField(dst, `,"target_label":`, r.TargetLabel)
	if r.Amount != nil {
		dst = strconv.AppendUint(append(dst, `,"amount":`...), *r.Amount, 10)
	}
	dst = jsonwire.AppendUintField(dst, `,"bytes":`, r.Bytes)
	dst = jsonwire.AppendStringField(dst, `,"cwd":`, r.Cwd)
	dst = jsonwire.AppendStringField(dst, `,"resolved_target":`, r.ResolvedTarget)
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
	dst = jsonwire.AppendStringField(dst, `,"review":`, r.Review)
	dst = jsonwire.AppendStringField(dst, `,"artifact_sha256":`, r.ArtifactSHA256)
	dst = jsonwire.AppendStringField(dst, `,"route":`, r.Route)
	dst = jsonwire.AppendUintField(dst, `,"route_gen":`, r.RouteGen)
	return append(dst, '}'), nil
}

// appendJSON appends t as json.Marshal encodes it.
func (t *FieldTrace) appendJSON(dst []byte) []byte {
	dst = jsonwire.AppendString(append(dst, `{"field":`...), t.Field)
	if len(t.Matches) > 0 {
		dst = append(dst, `,"matches":[`...)
		for i := range t.Matches {
			if i > 0 {
				dst = append(dst, ',')
			}
			m := &t.Matches[i]
			dst = jsonwire.AppendString(append(dst, `{"source":`...), m.Source)
			dst = jsonwire.AppendString(append(dst, `,"transform":`...), m.Transform)
			dst = jsonwire.AppendStringField(dst, `,"part":`, m.Part)
			if m.Whole {
				dst = append(dst, `,"whole":true`...)
			}
			dst = jsonwire.AppendStringField(dst, `,"field":`, m.Field)
			if m.FieldWhole {
				dst = append(dst, `,"field_whole":true`...)
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
	dst = jsonwire.AppendString(append(dst, `,"grant_id":`...), r.GrantID)
	if len(r.Args) > 0 {
		var ok bool
		if dst, ok = jsonwire.AppendCompact(append(dst, `,"args":`...), r.Args, maxCompactDepth); !ok {
			return marshalFallback(dst[:n], r)
		}
	}
	dst = jsonwire.AppendStringField(dst, `,"digest":`, r.Digest)
	dst = jsonwire.AppendString(append(dst, `,"idempotency_key":`...), r.IdempotencyKey)
	dst = jsonwire.AppendStringField(dst, `,"cwd":`, r.Cwd)
	dst = jsonwire.AppendStringField(dst, `,"resolved_target":`, r.ResolvedTarget)
	return append(dst, '}'), nil
}

// AppendJSON appends the JSON encoding of r to dst and returns the
// extended buffer: the bytes of json.Marshal(r). It cannot fail.
func (r *EffectRequest) AppendJSON(dst []byte) []byte {
	dst = strconv.AppendInt(append(dst, `{"v":`...), int64(r.V), 10)
	dst = jsonwire.AppendString(append(dst, `,"grant_id":`...), r.GrantID)
	dst = jsonwire.AppendString(append(dst, `,"outcome":`...), r.Outcome)
	dst = jsonwire.AppendString(append(dst, `,"verifier":`...), r.Verifier)
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

// SizeHint is a capacity for a grant body's buffer: the body's length
// when its strings need no escaping and V has at most hintSlack digits
// (escapes and provenance may grow it).
func (r *GrantRequest) SizeHint() int {
	n := len(`{"v":,"lane":"","tool":"","args":,"idempotency_key":""}`) + hintSlack +
		len(r.Lane) + len(r.Tool) + len(r.Args) + len(r.IdempotencyKey) +
		optLen(`,"session":""`, len(r.Session)) + optLen(`,"target_label":""`, len(r.TargetLabel)) +
		optLen(`,"cwd":""`, len(r.Cwd)) + optLen(`,"resolved_target":""`, len(r.ResolvedTarget)) +
		optLen(`,"review":""`, len(r.Review)) + optLen(`,"artifact_sha256":""`, len(r.ArtifactSHA256))
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

// SizeHint is a capacity for a spend body's buffer, as for a grant.
func (r *SpendRequest) SizeHint() int {
	return len(`{"v":,"grant_id":"","idempotency_key":""}`) + hintSlack + len(r.GrantID) + len(r.IdempotencyKey) +
		optLen(`,"args":`, len(r.Args)) + optLen(`,"digest":""`, len(r.Digest)) +
		optLen(`,"cwd":""`, len(r.Cwd)) + optLen(`,"resolved_target":""`, len(r.ResolvedTarget))
}

// SizeHint is a capacity for an effect body's buffer, as for a grant.
func (r *EffectRequest) SizeHint() int {
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

// maxCompactDepth bounds how deeply raw arguments may nest before
// AppendJSON leaves them to json.Marshal (whose own limit is far larger),
// as jsonwire.Scanner.Skip counts depth.
const maxCompactDepth = 256
