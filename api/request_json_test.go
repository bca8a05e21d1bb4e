package api

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/testing/fuzzbytes"
)

func ptr[T any](v T) *T { return &v }

// rawArgs are json.RawMessage values for the differential tests: what
// clients send, every corner of encoding/json's compaction and HTML
// escaping, and values json.Marshal refuses.
var rawArgs = []string{
	`{}`, `[]`, `{"command":"go test ./...","timeout":120000}`, `null`, `true`, `false`, `0`, `-1.5e+10`, `"s"`,
	" {\n\t\"a\" : [ 1 , 2.50 , \"x\" ] ,\r\n \"b\" : { } } \n", `{"html":"<a href=\"x\">&amp;</a>"}`,
	"{\"sep\":\"line\u2028para\u2029\"}", `{"esc":"\u2028\u003c\/\"\\\b\f\n\r\t\ud800"}`,
	"{\"bad\":\"\xff\xfe\xc3(\xe2\x80\"}", "{\"del\":\"\x7f\"}", "\"\xe2\x80\xa8\"", "\"\xe2\x80\"",
	`{"n":[0,-0,1E5,1e-5,0.0,123456789012345678901234567890]}`, `{"a":{"b":{"c":[[[{}]]]}}}`,
	strings.Repeat("[", 300) + strings.Repeat("]", 300),
	// Refused by json.Marshal.
	``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`,
	`tru`, `nul`, `truex`, `{} {}`, `{}x`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\x00b\"", "\"a\nb\"",
	`{1:2}`, `{"a" 1}`, `[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]`, `'a'`, `NaN`,
}

// requestTable is the differential table for the encoders.
func requestTable() map[string]any {
	full := GrantRequest{
		V: Version, Lane: "coordinator", Session: "s-1", Tool: "Bash", Args: json.RawMessage(`{"command":"ls -la"}`),
		TTLMillis: 30000, Sources: []string{"web", "u1"}, IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60",
		TargetLabel: "config.yaml", Amount: ptr[uint64](0), Bytes: 4096, Cwd: "/work", ResolvedTarget: "/work/a <b> & c",
		Provenance: []FieldTrace{
			{Field: "/to", Covered: true, Matches: []TraceMatch{{Source: "u1", Transform: "raw", Whole: true}, {Source: "d1", Transform: "dns_labels+hex", Part: "host"}, {Source: "c1", Transform: "raw", Whole: true, Field: "/messages/0/from", FieldWhole: true}}},
			{Field: "/cc"}, {Field: "/x", Matches: []TraceMatch{}},
		},
	}
	return map[string]any{
		"grant zero":      GrantRequest{},
		"grant hot":       GrantRequest{V: Version, Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k1"},
		"grant full":      full,
		"grant extremes":  GrantRequest{V: -1 << 63, TTLMillis: -1 << 63, Amount: ptr[uint64](1<<64 - 1), Bytes: 1<<64 - 1},
		"grant empty":     GrantRequest{Args: json.RawMessage(`{}`), Sources: []string{}, Provenance: []FieldTrace{}},
		"grant empties":   GrantRequest{Args: json.RawMessage(`[]`), Sources: []string{""}, Provenance: []FieldTrace{{}}},
		"grant html":      GrantRequest{Lane: "<l>", Tool: `"&"`, IdempotencyKey: "a\u2028b\u2029c", Cwd: "\x00\x1f\x7f\t\n\r\b\f\\"},
		"grant bad utf8":  GrantRequest{Tool: "a\xffb\xc3(c\xe2\x82d\xed\xa0\x80e", Sources: []string{"\xfe"}, Provenance: []FieldTrace{{Field: "\x80", Matches: []TraceMatch{{Source: "\xc0\xaf"}}}}},
		"grant unicode":   GrantRequest{Lane: "é漢字😀\ufffd", Args: json.RawMessage(`"é漢字😀"`)},
		"spend zero":      SpendRequest{},
		"spend hot":       SpendRequest{V: Version, GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k2"},
		"spend digest":    SpendRequest{V: Version, GrantID: "g", Digest: strings.Repeat("ab", 32), IdempotencyKey: "k"},
		"spend full":      SpendRequest{V: 2, GrantID: "g", Args: json.RawMessage(" [ 1 ] "), Digest: "d", IdempotencyKey: "k", Cwd: "/w", ResolvedTarget: "/w/a"},
		"spend empty":     SpendRequest{Args: json.RawMessage{}},
		"spend html":      SpendRequest{GrantID: "<>&", Args: json.RawMessage(`{"<":">&"}`)},
		"effect zero":     EffectRequest{},
		"effect hot":      EffectRequest{V: Version, GrantID: "g-1", Outcome: "confirmed", Verifier: "exit-code"},
		"effect escapes":  EffectRequest{V: -7, GrantID: "\"\\", Outcome: "\u2029", Verifier: "<\xff>"},
		"grant bad args":  GrantRequest{Args: json.RawMessage(`{"a":}`)},
		"grant empty raw": GrantRequest{Args: json.RawMessage{}},
		"spend bad args":  SpendRequest{Args: json.RawMessage(`[1,]`)},
	}
}

// appendJSON calls the fast encoder of a request value.
func appendJSON(t testing.TB, v any, dst []byte) ([]byte, error) {
	switch r := v.(type) {
	case GrantRequest:
		return r.AppendJSON(dst)
	case SpendRequest:
		return r.AppendJSON(dst)
	case EffectRequest:
		return r.AppendJSON(dst), nil
	}
	t.Fatalf("no encoder for %T", v)
	return nil, nil
}

// checkEncode holds AppendJSON to json.Marshal: the same bytes, or the same
// error and dst unchanged.
func checkEncode(t testing.TB, name string, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := appendJSON(t, v, nil)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%s: error %v, json.Marshal says %v", name, err, wantErr)
	}
	if err != nil {
		if len(got) != 0 {
			t.Fatalf("%s: failed AppendJSON wrote %q", name, got)
		}
		return
	}
	if string(got) != string(want) {
		t.Fatalf("%s: AppendJSON differs from json.Marshal\n got  %q\n want %q", name, got, want)
	}
	got, err = appendJSON(t, v, []byte("prefix"))
	if err != nil || string(got) != "prefix"+string(want) {
		t.Fatalf("%s: AppendJSON does not append: %q %v", name, got, err)
	}
}

func TestRequestAppendJSONMatchesMarshal(t *testing.T) {
	for name, v := range requestTable() {
		checkEncode(t, name, v)
	}
	for i, raw := range rawArgs {
		for _, args := range []json.RawMessage{json.RawMessage(raw), json.RawMessage(raw + " "), json.RawMessage("\t" + raw)} {
			name := "args " + string(rune('a'+i%26))
			checkEncode(t, name, GrantRequest{V: 1, Tool: "t", Args: args})
			checkEncode(t, name, SpendRequest{V: 1, GrantID: "g", Args: args})
		}
	}
	// A failed encode leaves dst as it was.
	r := SpendRequest{Args: json.RawMessage(`{`)}
	if got, err := r.AppendJSON([]byte("keep")); err == nil || string(got) != "keep" {
		t.Fatalf("failed AppendJSON: %q, %v", got, err)
	}
}

// TestRequestEncodersCoverFields sets each field of the encoded types alone,
// through reflection, and holds the encoders to json.Marshal: a field added
// to one of these types but not to its encoder fails here.
func TestRequestEncodersCoverFields(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[GrantRequest](), reflect.TypeFor[SpendRequest](), reflect.TypeFor[EffectRequest]()} {
		for i := range typ.NumField() {
			v := reflect.New(typ).Elem()
			f := v.Field(i)
			fillRequestValue(t, f, fuzzbytes.New([]byte(strings.Repeat("\x03abc\x01", 40))), typ.Field(i).Name)
			if f.IsZero() {
				t.Fatalf("%v.%s was not filled", typ, typ.Field(i).Name)
			}
			checkEncode(t, typ.String()+"."+typ.Field(i).Name, v.Interface())
			checkKey(t, typ.Field(i), v.Interface())
		}
	}
	// The nested provenance types, field by field.
	for _, typ := range []reflect.Type{reflect.TypeFor[FieldTrace](), reflect.TypeFor[TraceMatch]()} {
		for i := range typ.NumField() {
			tr := FieldTrace{Field: "/a"}
			var v reflect.Value
			if typ == reflect.TypeFor[FieldTrace]() {
				tr = FieldTrace{}
				v = reflect.ValueOf(&tr).Elem()
			} else {
				tr.Matches = []TraceMatch{{}}
				v = reflect.ValueOf(&tr.Matches[0]).Elem()
			}
			fillRequestValue(t, v.Field(i), fuzzbytes.New([]byte(strings.Repeat("\x03abc\x01", 40))), typ.Field(i).Name)
			checkEncode(t, typ.String()+"."+typ.Field(i).Name, GrantRequest{Provenance: []FieldTrace{tr}})
			checkKey(t, typ.Field(i), GrantRequest{Provenance: []FieldTrace{tr}})
		}
	}
}

// checkKey checks that the encoding of v names field f: the field was
// filled with a value omitempty keeps.
func checkKey(t *testing.T, f reflect.StructField, v any) {
	t.Helper()
	key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if got, err := appendJSON(t, v, nil); err != nil || !strings.Contains(string(got), `"`+key+`":`) {
		t.Fatalf("field %s: %q does not carry %q (%v)", f.Name, got, key, err)
	}
}

// TestRequestEncoderAssumptions: the encoders write every type as a plain
// struct, string, number or bool, and json.RawMessage through its
// MarshalJSON. A marshaler added to any of them must be mirrored.
func TestRequestEncoderAssumptions(t *testing.T) {
	jm, tm := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler]()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[GrantRequest](), reflect.TypeFor[SpendRequest](), reflect.TypeFor[EffectRequest](),
		reflect.TypeFor[FieldTrace](), reflect.TypeFor[TraceMatch](),
	} {
		p := reflect.PointerTo(typ)
		if p.Implements(jm) || p.Implements(tm) {
			t.Errorf("%v has a marshaler: mirror it in AppendJSON", typ)
		}
	}
}

func TestRequestAppendJSONAllocs(t *testing.T) {
	g := requestTable()["grant full"].(GrantRequest)
	s := requestTable()["spend hot"].(SpendRequest)
	e := requestTable()["effect hot"].(EffectRequest)
	buf := make([]byte, 0, 2048)
	if n := testing.AllocsPerRun(100, func() {
		buf, _ = g.AppendJSON(buf[:0])
		buf, _ = s.AppendJSON(buf[:0])
		buf = e.AppendJSON(buf[:0])
	}); n != 0 {
		t.Fatalf("AppendJSON into a large enough buffer allocates %v times", n)
	}
	// The client's capacity hint fits the usual bodies, without growing.
	hot := requestTable()["grant hot"].(GrantRequest)
	for _, c := range []struct {
		hint int
		body []byte
	}{
		{hot.SizeHint(), must(hot.AppendJSON(nil))}, {s.SizeHint(), must(s.AppendJSON(nil))}, {e.SizeHint(), e.AppendJSON(nil)},
	} {
		if len(c.body) > c.hint || c.hint > len(c.body)+64 {
			t.Errorf("size hint %d for a %d-byte body %s", c.hint, len(c.body), c.body)
		}
	}
	if b := must(g.AppendJSON(nil)); len(b) > g.SizeHint() {
		t.Errorf("size hint %d for a %d-byte body %s", g.SizeHint(), len(b), b)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// fillRequestValue fills v from s by its type: every type a field of the
// encoded requests has.
func fillRequestValue(t testing.TB, v reflect.Value, s *fuzzbytes.Source, name string) {
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		if name != "" {
			v.SetBytes([]byte(`{"k":"<v>"}`)) // TestRequestEncodersCoverFields needs it valid
			return
		}
		switch c := s.Byte(); c % 4 {
		case 0:
			// nil
		case 1:
			v.SetBytes([]byte(rawArgs[int(c>>2)%len(rawArgs)]))
		case 2:
			v.SetBytes([]byte{}) // empty, not nil
		default:
			v.SetBytes(append([]byte(nil), s.Bytes(int(s.Byte()))...))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(s.Bytes(int(s.Byte()))))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(s.Uint64()))
	case reflect.Uint64:
		v.SetUint(s.Uint64())
	case reflect.Bool:
		v.SetBool(s.Byte()%2 == 1)
		if name != "" && !v.Bool() {
			v.SetBool(true) // TestRequestEncodersCoverFields needs it set
		}
	case reflect.Pointer:
		if s.Byte()%2 == 0 && name == "" {
			return // nil
		}
		p := reflect.New(v.Type().Elem())
		fillRequestValue(t, p.Elem(), s, "")
		v.Set(p)
	case reflect.Slice:
		n := int(s.Byte() % 5)
		if n == 4 {
			if name == "" {
				return // nil
			}
			n = 1
		}
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRequestValue(t, sl.Index(i), s, "")
		}
		v.Set(sl)
	case reflect.Struct:
		for i := range v.NumField() {
			fillRequestValue(t, v.Field(i), s, "")
		}
	default:
		t.Fatalf("field %s has type %v, which the request encoders and this test do not know", name, v.Type())
	}
}

// FuzzRequestAppendJSON builds a grant, spend or effect request from the
// fuzz input and holds AppendJSON to json.Marshal.
func FuzzRequestAppendJSON(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x01\x0bcoordinator\x00\x01\x04Bash\x05\x10{\"command\":\"ls\"}"))
	f.Add([]byte("\x01\x01\x01\x05g<&>\"\x09\x03\x03k\xe2\x80\xa8"))
	f.Add([]byte("\x02\x06\xe2\x80\xa8\xff\x00\x1f\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte(strings.Repeat("\x03a\x00b\x09\x01", 40)))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := fuzzbytes.New(in)
		var v reflect.Value
		switch s.Byte() % 3 {
		case 0:
			v = reflect.ValueOf(new(GrantRequest)).Elem()
		case 1:
			v = reflect.ValueOf(new(SpendRequest)).Elem()
		default:
			v = reflect.ValueOf(new(EffectRequest)).Elem()
		}
		for i := range v.NumField() {
			if s.Byte()%3 != 0 { // leave about a third of the fields empty
				fillRequestValue(t, v.Field(i), s, "")
			}
		}
		checkEncode(t, v.Type().String(), v.Interface())
	})
}

// FuzzRequestAppendJSONArgs holds the compaction of raw arguments to
// json.Marshal's, value and error, on arbitrary bytes.
func FuzzRequestAppendJSONArgs(f *testing.F) {
	for _, raw := range rawArgs {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkEncode(t, "spend", SpendRequest{V: 1, GrantID: "g", Args: raw, IdempotencyKey: "k"})
		checkEncode(t, "grant", GrantRequest{V: 1, Tool: "t", Args: raw, IdempotencyKey: "k"})
	})
}

// encodeSink keeps the encoders' results alive.
var encodeSink []byte

// BenchmarkRequestEncode compares json.Marshal with AppendJSON into a
// buffer sized by the client's hint, as Client does, for the hot bodies.
func BenchmarkRequestEncode(b *testing.B) {
	args := json.RawMessage(`{"command":"go test -run TestX ./...","description":"run the tests","timeout":120000}`)
	grant := GrantRequest{V: Version, Lane: "coordinator", Session: "s-1", Tool: "Bash", Args: args,
		IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60", Sources: []string{"web"}}
	spend := SpendRequest{V: Version, GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Args: args, IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f62"}
	effect := EffectRequest{V: Version, GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Outcome: "confirmed", Verifier: "exit-code"}
	for _, c := range []struct {
		name string
		v    any
		fast func() []byte
	}{
		{"grant", grant, func() []byte { return must(grant.AppendJSON(make([]byte, 0, grant.SizeHint()))) }},
		{"spend", spend, func() []byte { return must(spend.AppendJSON(make([]byte, 0, spend.SizeHint()))) }},
		{"effect", effect, func() []byte { return effect.AppendJSON(make([]byte, 0, effect.SizeHint())) }},
	} {
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := json.Marshal(c.v)
				if err != nil {
					b.Fatal(err)
				}
				encodeSink = data
			}
		})
		b.Run(c.name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				encodeSink = c.fast()
			}
		})
	}
}
