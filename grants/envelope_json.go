package grants

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/jsonwire"
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
	dst = jsonwire.AppendString(dst, string(e.Decision))
	dst = jsonwire.AppendStringField(dst, `,"grant_id":`, e.GrantID)
	dst = jsonwire.AppendStringField(dst, `,"review_id":`, e.ReviewID)
	dst = jsonwire.AppendStringField(dst, `,"reason":`, string(e.Reason))
	dst = jsonwire.AppendStringField(dst, `,"missing":`, e.Missing)
	dst = jsonwire.AppendStringField(dst, `,"recovery":`, string(e.Recovery))
	dst = jsonwire.AppendUintField(dst, `,"epoch":`, e.Epoch)
	if e.IssuedAt != 0 {
		dst = strconv.AppendInt(append(dst, `,"issued_at":`...), e.IssuedAt, 10)
	}
	if e.ExpiresAt != 0 {
		dst = strconv.AppendInt(append(dst, `,"expires_at":`...), e.ExpiresAt, 10)
	}
	dst = jsonwire.AppendUintField(dst, `,"seq":`, e.Seq)
	if e.Kind != 0 {
		// Kind.MarshalText is []byte(Kind.String()); String does not
		// allocate for known kinds. encoding/json escapes the text like any
		// string.
		dst = jsonwire.AppendString(append(dst, `,"kind":`...), e.Kind.String())
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
			dst = jsonwire.AppendString(append(dst, `{"key":`...), e.Counters[i].Key)
			dst = strconv.AppendUint(append(dst, `,"value":`...), e.Counters[i].Value, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = jsonwire.AppendStringsField(dst, `,"rules":`, e.Rules)
	dst = jsonwire.AppendStringField(dst, `,"outcome":`, e.Outcome)
	dst = jsonwire.AppendStringField(dst, `,"detail":`, e.Detail)
	dst = jsonwire.AppendStringField(dst, `,"surface":`, e.Surface)
	dst = jsonwire.AppendStringField(dst, `,"operation":`, e.Operation)
	dst = jsonwire.AppendStringField(dst, `,"consequence":`, e.Consequence)
	dst = jsonwire.AppendStringField(dst, `,"target":`, e.Target)
	dst = jsonwire.AppendStringField(dst, `,"target_label":`, e.TargetLabel)
	dst = jsonwire.AppendStringField(dst, `,"instrument":`, e.Instrument)
	dst = jsonwire.AppendStringField(dst, `,"instrument_left":`, e.InstrumentLeft)
	dst = jsonwire.AppendUintField(dst, `,"amount":`, e.Amount)
	dst = jsonwire.AppendUintField(dst, `,"bytes":`, e.Bytes)
	dst = jsonwire.AppendStringField(dst, `,"ledger_key":`, e.LedgerKey)
	dst = jsonwire.AppendStringField(dst, `,"authority":`, e.Authority)
	dst = jsonwire.AppendStringsField(dst, `,"grounds":`, e.Grounds)
	dst = jsonwire.AppendStringField(dst, `,"caption":`, e.Caption)
	dst = jsonwire.AppendStringField(dst, `,"route":`, e.Route)
	dst = jsonwire.AppendUintField(dst, `,"route_gen":`, e.RouteGen)
	dst = jsonwire.AppendStringField(dst, `,"owner":`, e.Owner)
	dst = jsonwire.AppendStringField(dst, `,"prev_owner":`, e.PrevOwner)
	dst = jsonwire.AppendUintField(dst, `,"prev_gen":`, e.PrevGen)
	dst = jsonwire.AppendStringField(dst, `,"worker":`, e.Worker)
	dst = jsonwire.AppendStringField(dst, `,"parent":`, e.Parent)
	dst = jsonwire.AppendStringField(dst, `,"lane":`, e.Lane)
	dst = jsonwire.AppendUintField(dst, `,"incarnation":`, e.Incarnation)
	dst = jsonwire.AppendStringsField(dst, `,"workers":`, e.Workers)
	dst = jsonwire.AppendStringsField(dst, `,"cancelled":`, e.Cancelled)
	dst = jsonwire.AppendStringsField(dst, `,"reviews":`, e.Reviews)
	dst = jsonwire.AppendStringsField(dst, `,"routes":`, e.Routes)
	if e.Source != nil {
		dst = e.Source.AppendJSON(append(dst, `,"source":`...))
	}
	dst = jsonwire.AppendStringField(dst, `,"user_jwt":`, e.UserJWT)
	dst = jsonwire.AppendStringField(dst, `,"credential_note":`, e.CredentialNote)
	return append(dst, '}')
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
	d := newEnvelopeDecoder(data)
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
	jsonwire.Scanner
	// text is one copy of Data that every decoded string without escapes
	// is a substring of: one allocation for all of an envelope's strings.
	text string
	// nested: decoding the envelope a "source" field holds; a further
	// "source" inside it is left to json.Unmarshal.
	nested bool
}

func newEnvelopeDecoder(data []byte) envelopeDecoder {
	return envelopeDecoder{Scanner: jsonwire.Scanner{Data: data}}
}

// maxSkipDepth bounds how deep an unknown field's value may nest before
// the fast path gives the input to json.Unmarshal instead.
const maxSkipDepth = 32

func (d *envelopeDecoder) envelope(e *Envelope) bool {
	return d.object(e) && d.End()
}

// object decodes one envelope object, leaving d after its closing brace.
func (d *envelopeDecoder) object(e *Envelope) bool {
	d.SkipSpace()
	var seen uint64
	return d.Object(func() bool {
		if d.text == "" {
			d.text = string(d.Data)
		}
		key, ok := d.str()
		if !ok || !d.Colon() {
			return false
		}
		bit, known := d.field(e, key)
		switch {
		case !known:
			return unknownKey(key) && d.Skip(maxSkipDepth)
		case bit == 0 || seen&bit != 0:
			// The value did not decode, or the key is repeated
			// (json.Unmarshal decodes a repeated key again into
			// what the first one left).
			return false
		}
		seen |= bit
		return true
	})
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
		e.Epoch, ok = d.Uint()
		bit = 1 << 6
	case "issued_at":
		e.IssuedAt, ok = d.Int()
		bit = 1 << 7
	case "expires_at":
		e.ExpiresAt, ok = d.Int()
		bit = 1 << 8
	case "seq":
		e.Seq, ok = d.Uint()
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
		e.Amount, ok = d.Uint()
		bit = 1 << 23
	case "bytes":
		e.Bytes, ok = d.Uint()
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
	case "caption":
		e.Caption, ok = d.str()
		bit = 1 << 28
	case "route":
		e.Route, ok = d.str()
		bit = 1 << 29
	case "route_gen":
		e.RouteGen, ok = d.Uint()
		bit = 1 << 30
	case "owner":
		e.Owner, ok = d.str()
		bit = 1 << 31
	case "prev_owner":
		e.PrevOwner, ok = d.str()
		bit = 1 << 32
	case "prev_gen":
		e.PrevGen, ok = d.Uint()
		bit = 1 << 33
	// Fleets: bits 40-47.
	case "worker":
		e.Worker, ok = d.str()
		bit = 1 << 40
	case "parent":
		e.Parent, ok = d.str()
		bit = 1 << 41
	case "lane":
		e.Lane, ok = d.str()
		bit = 1 << 42
	case "incarnation":
		e.Incarnation, ok = d.Uint()
		bit = 1 << 43
	case "workers":
		ok = d.strs(&e.Workers)
		bit = 1 << 44
	case "cancelled":
		ok = d.strs(&e.Cancelled)
		bit = 1 << 45
	case "reviews":
		ok = d.strs(&e.Reviews)
		bit = 1 << 46
	case "routes":
		ok = d.strs(&e.Routes)
		bit = 1 << 47
	case "source":
		// An object (null, and a source within a source, fall back).
		if d.nested {
			return 0, true
		}
		d.SkipSpace()
		e.Source = new(Envelope)
		d.nested = true
		ok = d.object(e.Source)
		d.nested = false
		bit = 1 << 48
	// Worker NATS credentials: bits 52-53.
	case "user_jwt":
		e.UserJWT, ok = d.str()
		bit = 1 << 52
	case "credential_note":
		e.CredentialNote, ok = d.str()
		bit = 1 << 53
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

// str decodes a string as json.Unmarshal does, for strings whose raw bytes
// are valid UTF-8 and whose \u escapes are not surrogates: anything else
// (json.Unmarshal replaces such bytes and lone surrogates with U+FFFD)
// falls back. A string without escapes is a substring of d.text.
func (d *envelopeDecoder) str() (string, bool) {
	start := d.Pos + 1 // after the quote, if it is a string
	raw, escaped, ok := d.StringBytes()
	switch {
	case !ok:
		return "", false
	case escaped:
		return jsonwire.UnescapeString(raw), true
	case d.text == "":
		return string(raw), true
	}
	return d.text[start : start+len(raw)], true
}

// hash decodes a digest as Hash.UnmarshalText does: "" or 64 hex digits.
func (d *envelopeDecoder) hash(h *events.Hash) bool {
	if !d.Consume('"') {
		return false
	}
	start := d.Pos
	if end := start + 2*len(h); end < len(d.Data) && d.Data[end] == '"' {
		d.Pos = end // the usual 64 digits: hex.Decode checks them
	}
	for d.Pos < len(d.Data) && d.Data[d.Pos] != '"' {
		d.Pos++
	}
	if d.Pos == len(d.Data) {
		return false
	}
	s := d.Data[start:d.Pos]
	d.Pos++
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
	out := make([]string, 0, 4)
	ok := d.Array(func() bool {
		s, ok := d.str()
		out = append(out, s)
		return ok
	})
	*dst = out
	return ok
}

// counters decodes an array of {"key":..., "value":...} objects.
func (d *envelopeDecoder) counters(dst *[]events.Counter) bool {
	out := make([]events.Counter, 0, 4)
	ok := d.Array(func() bool {
		var c events.Counter
		ok := d.counter(&c)
		out = append(out, c)
		return ok
	})
	*dst = out
	return ok
}

func (d *envelopeDecoder) counter(c *events.Counter) bool {
	var seenKey, seenValue bool
	return d.Object(func() bool {
		key, ok := d.str()
		if !ok || !d.Colon() {
			return false
		}
		switch key {
		case "key":
			if seenKey {
				return false
			}
			seenKey = true
			c.Key, ok = d.str()
		case "value":
			if seenValue {
				return false
			}
			seenValue = true
			c.Value, ok = d.Uint()
		default:
			// One level down from the envelope's own fields.
			ok = unknownKey(key) && d.Skip(maxSkipDepth-1)
		}
		return ok
	})
}
