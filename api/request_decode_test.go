package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The fast decoders are held to strictDecode, the strict decoding an
// issuer applies to every body (package issuer's decodeStrict accepts
// exactly what it accepts, and its own tests hold the two together):
// whenever a fast decoder succeeds, strictDecode accepts the body too and
// decodes the same request.

// strictDecode decodes body into v as an issuer decodes a request body,
// and reports whether it accepted the body: at most MaxBodyBytes, a "v"
// equal to Version, one JSON object with no unknown fields and nothing
// but whitespace after it.
func strictDecode(body []byte, v any) bool {
	if len(body) > MaxBodyBytes {
		return false
	}
	var probe struct {
		V *int `json:"v"`
	}
	if json.Unmarshal(body, &probe) != nil || probe.V == nil || *probe.V != Version {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && !dec.More()
}

// fastResult says which fast decoders took a body.
type fastResult struct{ grant, spend, effect bool }

// checkFast holds each fast decoder to strictDecode on body.
func checkFast(t testing.TB, body []byte) fastResult {
	t.Helper()
	var res fastResult
	{
		var fast, strict GrantRequest
		res.grant = DecodeGrantFast(body, &fast)
		compareDecode(t, body, res.grant, &fast, &strict)
	}
	{
		var fast, strict SpendRequest
		res.spend = DecodeSpendFast(body, &fast)
		compareDecode(t, body, res.spend, &fast, &strict)
	}
	{
		var fast, strict EffectRequest
		res.effect = DecodeEffectFast(body, &fast)
		compareDecode(t, body, res.effect, &fast, &strict)
	}
	return res
}

// compareDecode: when the fast decoder took the body, strictDecode accepts
// it and decodes the same request.
func compareDecode(t testing.TB, body []byte, ok bool, fast, strict any) {
	t.Helper()
	if !ok {
		return
	}
	if !strictDecode(body, strict) {
		t.Fatalf("%T: the fast path took %q, which the strict decoding refuses", fast, body)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%T body %q:\n fast   %#v\n strict %#v", fast, body, fast, strict)
	}
}

// clientBodies are bodies as package api/client encodes them: each must
// take its fast path.
func clientBodies(t testing.TB) (grantBodies, spendBodies, effectBodies [][]byte) {
	amount := uint64(1250)
	for _, r := range []GrantRequest{
		{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k1"},
		{Lane: "coordinator", Session: "s-1", Tool: "Bash", Args: json.RawMessage(`{"command":"go test ./...","timeout":120000}`),
			TTLMillis: 30000, Sources: []string{"web", "u1"}, IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60"},
		{Lane: "payments", Tool: "pay", Args: json.RawMessage(`{"amount":1250,"iban":"DE89 3704 0044 0532 0130 00","memo":"<inv & co>"}`),
			IdempotencyKey: "k", TargetLabel: "Café — \"Zürich\"", Amount: &amount, Bytes: 10, Cwd: "/work/w1", ResolvedTarget: "/work/w1/a\tb"},
		{Lane: "coordinator", Tool: "send_email", Args: json.RawMessage(" {\"to\" : \"a@b.c\"}\n"), IdempotencyKey: "k", Provenance: []FieldTrace{
			{Field: "/to", Covered: true, Matches: []TraceMatch{{Source: "u1", Transform: "raw", Whole: true}, {Source: "d1", Transform: "dns_labels+hex", Part: "host"}, {Source: "c1", Transform: "raw", Whole: true, Field: "/messages/0/from", FieldWhole: true}}},
			{Field: "/cc"},
		}},
		{Lane: "coordinator", Tool: "Read", Args: json.RawMessage(`{"file_path":"/etc/\u00e9\u2028","n":[1,-2.5e3,null,true,{}]}`), IdempotencyKey: "k",
			Sources: []string{}, Provenance: []FieldTrace{}},
		{Lane: "x", Tool: "y", Args: json.RawMessage(`null`), IdempotencyKey: "k"},
	} {
		r.V = Version
		grantBodies = append(grantBodies, mustEncode(t)(r.AppendJSON(nil)))
	}
	for _, r := range []SpendRequest{
		{GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f62"},
		{GrantID: "g1", Digest: strings.Repeat("ab", 32), IdempotencyKey: "k1"},
		{GrantID: "g1", Args: json.RawMessage(`{"file_path":"a"}`), IdempotencyKey: "k", Cwd: "/w", ResolvedTarget: "/w/a"},
		{GrantID: "g1", Args: json.RawMessage(`{"b":1,"a":"<&>"}`), IdempotencyKey: "k"},
		{GrantID: "g1", IdempotencyKey: "k"},
	} {
		r.V = Version
		spendBodies = append(spendBodies, mustEncode(t)(r.AppendJSON(nil)))
	}
	for _, r := range []EffectRequest{
		{GrantID: "g1", Outcome: "confirmed", Verifier: "exit-code"},
		{GrantID: "g1", Outcome: "failed", Verifier: "http status 500 <x>"},
		{GrantID: "g1", Outcome: "bogus", Verifier: ""},
	} {
		r.V = Version
		effectBodies = append(effectBodies, r.AppendJSON(nil))
	}
	return grantBodies, spendBodies, effectBodies
}

// mustEncode returns a function that passes an encoder's bytes through and
// fails t on its error.
func mustEncode(t testing.TB) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// fallbackBodies must each leave every fast path: the strict decoder
// decides them (most it refuses).
var fallbackBodies = []string{
	// Not one object, or more than one.
	``, ` `, `null`, `[]`, `"v"`, `1`, `{`, `{}`, `{"v":1`, `{"v":1,}`, `{,"v":1}`, `{"v":1}x`, `{"v":1}{}`, `{"v":1}]`,
	`{"v":1 "grant_id":"g"}`, `{"v" 1}`, `{v:1}`, "\xef\xbb\xbf{\"v\":1}",
	// The version: missing, other, null, not a plain integer.
	`{"grant_id":"g","args":{},"idempotency_key":"k"}`, `{"v":2,"grant_id":"g","args":{},"idempotency_key":"k"}`,
	`{"v":0,"grant_id":"g"}`, `{"v":-1,"grant_id":"g"}`, `{"v":-0,"grant_id":"g"}`, `{"v":null,"grant_id":"g"}`,
	`{"v":"1","grant_id":"g"}`, `{"v":1.0,"grant_id":"g"}`, `{"v":1e0,"grant_id":"g"}`, `{"v":01,"grant_id":"g"}`,
	`{"v":true,"grant_id":"g"}`, `{"v":18446744073709551617,"grant_id":"g"}`, `{"v":9223372036854775808}`,
	// Duplicate, unknown and case-folded keys.
	`{"v":1,"v":1,"grant_id":"g","args":{},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","grant_id":"h","args":{},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{},"args":{"a":1},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{},"idempotency_key":"k","caller":"evil"}`,
	`{"v":1,"grant_id":"g","args":{},"idempotency_key":"k","worker":"w2"}`,
	`{"V":1,"grant_id":"g","args":{},"idempotency_key":"k"}`, `{"v":1,"Grant_ID":"g","args":{},"idempotency_key":"k"}`,
	`{"v":1,"GRANT_ID":"g","grant_id":"h"}`, "{\"v\":1,\"grant_id\":\"g\",\"\u212aey\":1}",
	`{"v":1,"gr\u0061nt_id":"g","args":{},"idempotency_key":"k"}`, "{\"v\":1,\"grant_\xffid\":\"g\"}",
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","field":"/b"}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","level":"policy"}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"Field":"/a"}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","matches":[{"source":"u1","source":"u2"}]}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","matches":[{"source":"u1","authority":"x"}]}]}`,
	// Null and wrong types.
	`{"v":1,"grant_id":null,"args":{},"idempotency_key":"k"}`, `{"v":1,"grant_id":7,"args":{},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":["g"],"args":{},"idempotency_key":"k"}`, `{"v":1,"grant_id":{"g":1}}`, `{"v":1,"grant_id":true}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":"5"}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":null}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":null}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":"web"}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":["web",null]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":["web",1]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","amount":null}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","amount":-1}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","bytes":1.5}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":null}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[null]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":{}}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","covered":null}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","covered":"true"}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","matches":null}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"field":"/a","matches":[{"whole":1}]}]}`,
	`{"v":1,"grant_id":"g","outcome":"confirmed","verifier":null}`,
	// Huge and odd numbers.
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":9223372036854775808}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":-9223372036854775809}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":1e3}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":30000.0}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":007}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":+5}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","amount":18446744073709551616}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","bytes":99999999999999999999999}`,
	// Strings encoding/json repairs: invalid UTF-8, lone and paired
	// surrogates; and strings that are not JSON.
	"{\"v\":1,\"grant_id\":\"g\xff\",\"args\":{},\"idempotency_key\":\"k\"}",
	"{\"v\":1,\"grant_id\":\"\xed\xa0\x80\",\"args\":{},\"idempotency_key\":\"k\"}",
	`{"v":1,"grant_id":"\ud800","args":{},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"\ud83d\ude00","args":{},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"\x","args":{},"idempotency_key":"k"}`, `{"v":1,"grant_id":"\u12","args":{}}`,
	"{\"v\":1,\"grant_id\":\"a\tb\",\"args\":{},\"idempotency_key\":\"k\"}",
	"{\"v\":1,\"grant_id\":\"a\x00b\",\"args\":{},\"idempotency_key\":\"k\"}",
	`{"v":1,"grant_id":"g,"args":{},"idempotency_key":"k"}`,
	// Args that are not one JSON value, or nest too deep for the fast path.
	`{"v":1,"grant_id":"g","args":,"idempotency_key":"k"}`, `{"v":1,"grant_id":"g","args":{"a":},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{"a":1,},"idempotency_key":"k"}`, `{"v":1,"grant_id":"g","args":[1 2],"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{"a":01},"idempotency_key":"k"}`, `{"v":1,"grant_id":"g","args":{"a":"\q"},"idempotency_key":"k"}`,
	"{\"v\":1,\"grant_id\":\"g\",\"args\":{\"a\":\"\x01\"},\"idempotency_key\":\"k\"}", `{"v":1,"grant_id":"g","args":tru}`,
	`{"v":1,"grant_id":"g","args":{"a":1}`, `{"v":1,"grant_id":"g","args":{1:2}}`, `{"v":1,"grant_id":"g","args":NaN}`,
	`{"v":1,"grant_id":"g","args":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `,"idempotency_key":"k"}`,
}

// fastBodies are bodies outside what package api/client sends that the fast path
// still takes: whitespace, escapes, args as any JSON value, empty lists.
var fastBodies = []string{
	" \t\r\n{ \"v\" : 1 , \"grant_id\" : \"g\" , \"args\" : { \"b\" : [ 1 , 2 ] , \"a\" : null } , \"idempotency_key\" : \"k\" } \n",
	`{"idempotency_key":"k","args":{"a":1},"grant_id":"g","v":1}`,
	`{"v":1,"grant_id":"g\"\\\/\b\f\n\r\t\u0041\u00e9\u20ac\uFFFF","args":{},"idempotency_key":"k"}`,
	"{\"v\":1,\"grant_id\":\"caf\xc3\xa9 \xe6\xbc\xa2 \xf0\x9f\x98\x80 \x7f\",\"args\":{},\"idempotency_key\":\"k\"}",
	"{\"v\":1,\"grant_id\":\"g\",\"args\":{\"bad\":\"\xff\xfe\",\"sur\":\"\\ud800\"},\"idempotency_key\":\"k\"}",
	`{"v":1,"grant_id":"g","args":"x","idempotency_key":"k"}`, `{"v":1,"grant_id":"g","args":-0.5E+10,"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":null,"idempotency_key":"k"}`, `{"v":1,"grant_id":"g","args":[],"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":false}`, `{"v":1}`, `{"v":1,"grant_id":""}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":-0,"bytes":0,"amount":0}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":9223372036854775807,"bytes":18446744073709551615}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":-9223372036854775808}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":[ ],"provenance":[ ]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","sources":[""],"provenance":[{},{"matches":[{}]}]}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","provenance":[{"covered":false,"matches":[{"whole":false,"part":""}]}]}`,
	`{"v":1,"grant_id":"g","outcome":"confirmed","verifier":"v"}`, `{"v":1,"outcome":"","verifier":""}`,
	// Taken by the fast path, then refused by the checks after decoding.
	`{"v":1,"grant_id":"g","idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{},"digest":"` + zeroHash + `","idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","args":{"a":1,"a":2},"idempotency_key":"k"}`,
	`{"v":1,"grant_id":"g","digest":"abc","idempotency_key":"k"}`,
	`{"v":1,"lane":"a.b","tool":"t","args":{},"idempotency_key":"k"}`,
	`{"v":1,"lane":"l","tool":"t","args":{},"idempotency_key":"k","ttl_ms":9300000000000}`,
	`{"v":1,"grant_id":"g","outcome":"CONFIRMED","verifier":"v"}`,
}

func TestFastDecodersMatchStrict(t *testing.T) {
	grantBodies, spendBodies, effectBodies := clientBodies(t)
	for _, set := range []struct {
		name   string
		bodies [][]byte
		want   func(fastResult) bool
	}{
		{"grant", grantBodies, func(r fastResult) bool { return r.grant }},
		{"spend", spendBodies, func(r fastResult) bool { return r.spend }},
		{"effect", effectBodies, func(r fastResult) bool { return r.effect }},
	} {
		for _, body := range set.bodies {
			if !set.want(checkFast(t, body)) {
				t.Errorf("%s body %s, as package api/client sends it, left the fast path", set.name, body)
			}
			// Every prefix, and the body with a byte changed: whatever
			// the fast path makes of them, the strict decoder agrees.
			for i := range body {
				checkFast(t, body[:i])
				for _, c := range []byte{'"', '\\', '{', ',', ' ', 0, 0xff} {
					mut := append([]byte(nil), body...)
					mut[i] = c
					checkFast(t, mut)
				}
			}
		}
	}
	for _, body := range fallbackBodies {
		if r := checkFast(t, []byte(body)); r != (fastResult{}) {
			t.Errorf("body %q took a fast path (%+v); want the strict decoder", body, r)
		}
	}
	for _, body := range fastBodies {
		if r := checkFast(t, []byte(body)); r == (fastResult{}) {
			t.Errorf("body %q left every fast path", body)
		}
	}
	// An oversize body is refused by size, as the strict path does.
	big := []byte(`{"v":1,"grant_id":"` + strings.Repeat("g", MaxBodyBytes) + `"}`)
	if r := checkFast(t, big); r != (fastResult{}) {
		t.Fatalf("oversize body took a fast path: %+v", r)
	}
}

// TestFastDecodersCoverFields sets each field of the request types alone
// (and each field of the provenance types inside a grant), encodes the
// request with json.Marshal and requires the fast path to decode it to the
// same request: a field added to a request type but not to its fast
// decoder fails here.
func TestFastDecodersCoverFields(t *testing.T) {
	value := func(t *testing.T, f reflect.Value) {
		switch f.Kind() {
		case reflect.String:
			f.SetString("x<é>")
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint64:
			f.SetUint(1 << 63)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Slice:
			switch f.Type() {
			case reflect.TypeFor[json.RawMessage]():
				f.SetBytes([]byte(`{"k":[1,"v"]}`))
			case reflect.TypeFor[[]string]():
				f.Set(reflect.ValueOf([]string{"a", "b"}))
			case reflect.TypeFor[[]FieldTrace]():
				f.Set(reflect.ValueOf([]FieldTrace{{Field: "/a"}}))
			case reflect.TypeFor[[]TraceMatch]():
				f.Set(reflect.ValueOf([]TraceMatch{{Source: "u1"}}))
			default:
				t.Fatalf("no test value for %v", f.Type())
			}
		default:
			t.Fatalf("no test value for %v", f.Type())
		}
	}
	check := func(t *testing.T, name string, req any) {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		r := checkFast(t, body)
		var ok bool
		switch req.(type) {
		case *GrantRequest:
			ok = r.grant
		case *SpendRequest:
			ok = r.spend
		case *EffectRequest:
			ok = r.effect
		}
		if !ok {
			t.Errorf("%s: %s left the fast path", name, body)
		}
	}
	for _, mk := range []func() any{
		func() any { return &GrantRequest{V: Version} },
		func() any { return &SpendRequest{V: Version} },
		func() any { return &EffectRequest{V: Version} },
	} {
		typ := reflect.TypeOf(mk()).Elem()
		for i := range typ.NumField() {
			req := mk()
			if typ.Field(i).Name != "V" {
				value(t, reflect.ValueOf(req).Elem().Field(i))
			}
			check(t, typ.String()+"."+typ.Field(i).Name, req)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[FieldTrace](), reflect.TypeFor[TraceMatch]()} {
		for i := range typ.NumField() {
			req := &GrantRequest{V: Version, Provenance: []FieldTrace{{}}}
			v := reflect.ValueOf(&req.Provenance[0]).Elem()
			if typ == reflect.TypeFor[TraceMatch]() {
				req.Provenance[0].Matches = []TraceMatch{{}}
				v = reflect.ValueOf(&req.Provenance[0].Matches[0]).Elem()
			}
			value(t, v.Field(i))
			check(t, typ.String()+"."+typ.Field(i).Name, req)
		}
	}
}

// TestFastDecoderAssumptions: the fast decoders read every type as a plain
// struct, string, number or bool, and json.RawMessage as its raw bytes. An
// unmarshaler added to any of them must be mirrored.
func TestFastDecoderAssumptions(t *testing.T) {
	ju, tu := reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[GrantRequest](), reflect.TypeFor[SpendRequest](), reflect.TypeFor[EffectRequest](),
		reflect.TypeFor[FieldTrace](), reflect.TypeFor[TraceMatch](),
	} {
		p := reflect.PointerTo(typ)
		if p.Implements(ju) || p.Implements(tu) {
			t.Errorf("%v has an unmarshaler: mirror it in the fast decoders", typ)
		}
	}
}

// The bodies of the decoding benchmarks: a grant, a spend carrying the
// call's args in canonical form, and the spend's effect.
const (
	benchGrantBody  = `{"v":1,"lane":"coordinator","session":"s-1","tool":"Bash","args":ARGS,"idempotency_key":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60","sources":["web"]}`
	benchSpendBody  = `{"v":1,"grant_id":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61","args":ARGS,"idempotency_key":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f62"}`
	benchEffectBody = `{"v":1,"grant_id":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61","outcome":"confirmed","verifier":"exit-code"}`
	benchArgs       = `{"command":"go test -run TestX ./...","description":"run the tests","timeout":120000}`
)

// zeroHash is an all-zero digest, well-formed in shape.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

func TestFastDecodersAllocs(t *testing.T) {
	spend := []byte(strings.Replace(benchSpendBody, "ARGS", benchArgs, 1))
	grant := []byte(strings.Replace(benchGrantBody, "ARGS", benchArgs, 1))
	effect := []byte(benchEffectBody)
	// One buffer for all the strings; for the grant, the sources slice too.
	for _, c := range []struct {
		name string
		max  float64
		f    func() bool
	}{
		{"spend", 1, func() bool { var r SpendRequest; return DecodeSpendFast(spend, &r) }},
		{"grant", 2, func() bool { var r GrantRequest; return DecodeGrantFast(grant, &r) }},
		{"effect", 1, func() bool { var r EffectRequest; return DecodeEffectFast(effect, &r) }},
	} {
		if !c.f() {
			t.Fatalf("%s: the benchmark body left the fast path", c.name)
		}
		if n := testing.AllocsPerRun(100, func() { c.f() }); n > c.max {
			t.Errorf("%s: the fast decoder allocates %v times, want at most %v", c.name, n, c.max)
		}
	}
}

// FuzzFastDecoders holds the fast decoders to the strict decoding on
// arbitrary bodies, seeded with real bodies (as package api/client encodes
// them), bodies the fast path takes and bodies it must leave.
//
//	go test -run '^$' -fuzz '^FuzzFastDecoders$' -fuzztime 15s ./api
func FuzzFastDecoders(f *testing.F) {
	grantBodies, spendBodies, effectBodies := clientBodies(f)
	for _, set := range [][][]byte{grantBodies, spendBodies, effectBodies} {
		for _, b := range set {
			f.Add(b)
		}
	}
	for _, set := range [][]string{fallbackBodies, fastBodies} {
		for _, b := range set {
			if len(b) < 4096 {
				f.Add([]byte(b))
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFast(t, body)
	})
}
