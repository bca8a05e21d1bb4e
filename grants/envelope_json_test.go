package grants

import (
	"encoding"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/fuzzbytes"
)

// spendEnvelope is the answer to a successful spend with the grounds a
// version 2 policy adds: the shape of the hot path's envelope.
func spendEnvelope() Envelope {
	return Envelope{
		Decision: Permit, GrantID: "0b6f9c8e-4f5c-4f7e-9a43-6d1f3e2a9b10", Epoch: 7,
		IssuedAt: 1767225600123456789, ExpiresAt: 1767225660123456789, Seq: 184467,
		Kind: events.KindAttempt, Digest: digestA,
		Counters: []events.Counter{{Key: "worker/w1", Value: 3}, {Key: "lane/isolated", Value: 12}, {Key: "source/s9", Value: 1}},
		Rules:    []string{"allow-read", "review-net"},
		Surface:  "fs", Operation: "read", Consequence: "local_read",
		Target: "file:///srv/app/config.yaml", TargetLabel: "config.yaml",
		Instrument: "pre-42", InstrumentLeft: "3 uses", Amount: 1, Bytes: 4096, LedgerKey: "fs/read/config",
		Authority: "owner", Grounds: []string{"path<-user:s1"},
	}
}

// envelopeTable is the differential table: hot-path answers and every
// corner of the encoding.
func envelopeTable() map[string]Envelope {
	all := spendEnvelope()
	all.ReviewID, all.Reason, all.Missing, all.Recovery = "r-1", ReasonShapeReview, "review", RecoverRefreshApproval
	all.Outcome, all.Detail = OutcomeConfirmed, "detail"
	return map[string]Envelope{
		"zero":        {},
		"spend":       spendEnvelope(),
		"every field": all,
		"refuse":      Refuse(ReasonExpired, "expiry", "the grant expired at 12:00"),
		"unavailable": Refuse(ReasonIssuerUnavail, "capacity", "issuer is at its in-flight limit; retry with the same idempotency key"),
		"approval":    {Decision: ApprovalRequired, ReviewID: "rv-9", Reason: ReasonReviewRequired, Recovery: RecoverRefreshApproval, Kind: events.KindApprovalRequired, Grounds: []string{"a", ""}},
		"html":        {Decision: Deny, Detail: `<script>alert("x&y")</script>`, Target: "a>b<c&d"},
		"controls":    {Detail: "tab\tnl\ncr\rbs\bff\fnul\x00us\x1fdel\x7f quote\" back\\ slash/"},
		"separators":  {Detail: "line\u2028para\u2029end", Missing: "é漢字😀\ufffd"},
		"bad utf8":    {Detail: "a\xffb\xc3(c\xe2\x82d\xed\xa0\x80e\xf0\x9f\x98", GrantID: "\x80", Counters: []events.Counter{{Key: "\xfe", Value: 0}}},
		"extremes":    {IssuedAt: -1 << 63, ExpiresAt: 1<<63 - 1, Epoch: 1<<64 - 1, Seq: 1, Amount: 1<<64 - 1, Bytes: 10},
		"negative":    {IssuedAt: -5, ExpiresAt: -1},
		"odd kind":    {Kind: 999},
		"each kind":   {Kind: events.KindApproval},
		"empty lists": {Counters: []events.Counter{}, Rules: []string{}, Grounds: nil},
		"empty items": {Counters: []events.Counter{{}}, Rules: []string{""}, Grounds: []string{"", ""}},
		"digest only": {Digest: events.Hash{31: 1}},
		"odd strings": {Decision: "maybe", Reason: "new_reason", Recovery: "new_recovery"},
	}
}

func TestEnvelopeAppendJSONMatchesMarshal(t *testing.T) {
	for name, env := range envelopeTable() {
		checkAppendJSON(t, name, env)
	}
	for k := events.Kind(0); k < 40; k++ {
		checkAppendJSON(t, k.String(), Envelope{Kind: k})
	}
}

func checkAppendJSON(t *testing.T, name string, env Envelope) {
	t.Helper()
	want, err := json.Marshal(env)
	if err != nil {
		t.Fatalf("%s: json.Marshal: %v", name, err)
	}
	if got := env.AppendJSON(nil); string(got) != string(want) {
		t.Fatalf("%s: AppendJSON differs from json.Marshal\n got  %s\n want %s", name, got, want)
	}
	if got := env.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
		t.Fatalf("%s: AppendJSON does not append: %s", name, got)
	}
}

// decodeInputs are hand-written inputs for the fallback paths and for
// inputs json.Unmarshal refuses.
var decodeInputs = []string{
	``, ` `, `null`, ` null `, `{}`, ` { } `, `[]`, `"x"`, `1`, `true`, `{`, `}`, `{"decision"}`,
	`{"decision":"permit"}`, "\t{\r\n\"decision\" : \"permit\" ,\n\"seq\":1}\n",
	`{"decision":"permit"} x`, `{"decision":"permit"}{}`, `{"decision":"permit",}`, `{,}`,
	`{"decision":"per\u006dit"}`, `{"detail":"a\"b"}`, `{"detail":"a\\b\/c\n"}`, `{"detail":"\ud800"}`,
	`{"detail":"\u2028 <>&"}`, "{\"detail\":\"a\tb\"}", "{\"detail\":\"a\x00b\"}", "{\"detail\":\"a\xffb\"}",
	"{\"detail\":\"é\"}", "{\"d\xc3\xa9tail\":\"x\"}",
	`{"decision":null}`, `{"counters":null}`, `{"rules":null}`, `{"rules":[null]}`, `{"digest":null}`, `{"kind":null}`,
	`{"decision":1}`, `{"decision":true}`, `{"epoch":"1"}`, `{"rules":"a"}`, `{"counters":{}}`, `{"counters":[1]}`,
	`{"decision":"permit","decision":"deny"}`, `{"rules":["a","b"],"rules":["c"]}`,
	`{"counters":[{"key":"a","value":1}],"counters":[{"value":2}]}`,
	`{"counters":[{"key":"a","key":"b"}]}`, `{"counters":[{"value":1,"value":2}]}`,
	`{"counters":[{"Key":"a","VALUE":1}]}`, `{"counters":[{"key":"a","value":1,"extra":[1,{"x":null}]}]}`,
	`{"counters":[{}]}`, `{"counters":[]}`, `{"rules":[]}`, `{"grounds":[ ]}`, `{"rules":["a" , "b"]}`, `{"rules":["a",]}`,
	`{"Decision":"permit"}`, `{"DECISION":"permit"}`, `{"grant_ID":"g"}`, `{"Seq":1,"seq":2}`, `{"seq":1,"Seq":2}`,
	"{\"\u212aind\":\"permit\"}", "{\"\u017feq\":1}", `{"decision_":"x"}`, `{"grant-id":"x"}`,
	`{"future":1}`, `{"future":{"a":[1,2,{"b":"c"}],"d":true,"e":false,"f":null}}`, `{"future":"\u0041"}`,
	`{"future":-0.5e+10}`, `{"future":1E5}`, `{"future":01}`, `{"future":-}`, `{"future":1.}`, `{"future":.5}`,
	`{"future":tru}`, `{"future":nul}`, `{"future":[1,]}`, `{"future":{"a"}}`, `{"future":{"a":1,}}`,
	`{"future":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
	// Unknown values are checked as encoding/json's scanner checks them:
	// invalid UTF-8 and lone surrogates are valid JSON that json.Unmarshal
	// skips.
	"{\"future\":\"a\xffb\",\"decision\":\"permit\"}", `{"future":{"\ud800":"\udfff"},"seq":1}`,
	"{\"counters\":[{\"key\":\"k\",\"extra\":[\"\xff\"]}]}", `{"future":"\x"}`, "{\"future\":\"a\x01\"}",
	`{"epoch":0}`, `{"epoch":00}`, `{"epoch":01}`, `{"epoch":-1}`, `{"epoch":-0}`, `{"epoch":1.0}`, `{"epoch":1e3}`,
	`{"epoch":18446744073709551615}`, `{"epoch":18446744073709551616}`, `{"epoch":99999999999999999999}`,
	`{"issued_at":-9223372036854775808}`, `{"issued_at":-9223372036854775809}`, `{"issued_at":9223372036854775807}`,
	`{"issued_at":9223372036854775808}`, `{"issued_at":-0}`, `{"issued_at":-}`, `{"issued_at":- 1}`,
	`{"kind":"attempt"}`, `{"kind":"ATTEMPT"}`, `{"kind":""}`, `{"kind":"kind(99)"}`, `{"kind":3}`,
	`{"digest":""}`, `{"digest":"` + strings.Repeat("ab", 32) + `"}`, `{"digest":"` + strings.Repeat("AB", 32) + `"}`,
	`{"digest":"` + strings.Repeat("ab", 31) + `"}`, `{"digest":"` + strings.Repeat("zz", 32) + `"}`,
	`{"digest":"` + strings.Repeat("ab", 31) + `\u0061b"}`, `{"digest":[1,2]}`,
	`{"amount":1,"bytes":2,"ledger_key":"k","authority":"a","grounds":["g"]}`,
}

// checkDecode holds DecodeEnvelope to json.Unmarshal's value and error.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var want Envelope
	wantErr := json.Unmarshal(data, &want)
	got, err := DecodeEnvelope(data)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("input %q: error %v, json.Unmarshal says %v", data, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %q:\n got  %#v\n want %#v", data, got, want)
	}
}

func TestDecodeEnvelopeMatchesUnmarshal(t *testing.T) {
	for _, in := range decodeInputs {
		checkDecode(t, []byte(in))
	}
	for _, env := range envelopeTable() {
		data, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		checkDecode(t, data)
		// Every prefix: truncated answers must fail as json.Unmarshal fails.
		for i := range data {
			checkDecode(t, data[:i])
		}
	}
}

// TestDecodeEnvelopeFastPath: what the issuer sends with plain strings is
// decoded without json.Unmarshal, and a new field from a newer issuer does
// not leave the fast path.
func TestDecodeEnvelopeFastPath(t *testing.T) {
	for _, name := range []string{"zero", "spend", "every field", "refuse", "unavailable", "approval", "extremes", "each kind", "empty items", "digest only", "odd strings"} {
		env := envelopeTable()[name]
		data, _ := json.Marshal(env)
		for _, in := range [][]byte{data, append(data[:len(data)-1:len(data)-1], `,"added_later":{"x":[1,-2.5e3,"s",true,null]}}`...)} {
			var got Envelope
			d := newEnvelopeDecoder(in)
			if !d.envelope(&got) {
				t.Fatalf("%s: %s left the fast path", name, in)
			}
			if !reflect.DeepEqual(got, env) {
				t.Fatalf("%s: decoded %#v, want %#v", name, got, env)
			}
		}
	}
}

func TestDecodeEnvelopeAllocs(t *testing.T) {
	env := spendEnvelope()
	data := env.AppendJSON(nil)
	// One copy of the input for every plain string, the counters, rules and
	// grounds slices, and the one string with an escape (its "<").
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeEnvelope(data) }); n > 5 {
		t.Fatalf("DecodeEnvelope allocates %v times, want at most 5", n)
	}
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { buf = env.AppendJSON(buf[:0]) }); n != 0 {
		t.Fatalf("AppendJSON into a large enough buffer allocates %v times", n)
	}
}

// TestEnvelopeCodecCoversFields sets each field of Envelope alone, through
// reflection, and checks both directions: a field added to Envelope but not
// to the codec fails here.
func TestEnvelopeCodecCoversFields(t *testing.T) {
	typ := reflect.TypeFor[Envelope]()
	for i := range typ.NumField() {
		var env Envelope
		f := reflect.ValueOf(&env).Elem().Field(i)
		fillValue(t, f, fuzzbytes.New([]byte(strings.Repeat("\x03abc", 20))), typ.Field(i).Name)
		if f.IsZero() {
			t.Fatalf("field %s was not filled", typ.Field(i).Name)
		}
		checkAppendJSON(t, typ.Field(i).Name, env)
		data := env.AppendJSON(nil)
		var got Envelope
		if d := newEnvelopeDecoder(data); !d.envelope(&got) || !reflect.DeepEqual(got, env) {
			t.Fatalf("field %s: the fast path does not decode %s", typ.Field(i).Name, data)
		}
	}
}

// TestEnvelopeCodecAssumptions: the codec writes Counter and the string
// types as plain structs and strings, Kind and Hash through MarshalText,
// and Envelope itself through reflection in encoding/json (so that
// json.Marshal stays the reference). A marshaler added to any of them must
// be mirrored in the codec.
func TestEnvelopeCodecAssumptions(t *testing.T) {
	jm, ju := reflect.TypeFor[json.Marshaler](), reflect.TypeFor[json.Unmarshaler]()
	tm, tu := reflect.TypeFor[encoding.TextMarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Envelope](), reflect.TypeFor[events.Counter](), reflect.TypeFor[Decision](),
		reflect.TypeFor[Reason](), reflect.TypeFor[Recovery](), reflect.TypeFor[events.Kind](), reflect.TypeFor[events.Hash](),
	} {
		p := reflect.PointerTo(typ)
		if p.Implements(jm) || p.Implements(ju) {
			t.Errorf("%v has a JSON marshaler: mirror it in AppendJSON and DecodeEnvelope", typ)
		}
		text := typ == reflect.TypeFor[events.Kind]() || typ == reflect.TypeFor[events.Hash]()
		if p.Implements(tm) != text || p.Implements(tu) != text {
			t.Errorf("%v: text marshalers changed: mirror them in AppendJSON and DecodeEnvelope", typ)
		}
	}
}

// fillValue fills v from s by its type: every type a field of Envelope has.
func fillValue(t testing.TB, v reflect.Value, s *fuzzbytes.Source, name string) {
	switch v.Type() {
	case reflect.TypeFor[events.Kind]():
		k := events.Kind(s.Byte() % 16)
		if k == 15 {
			k = events.Kind(binary.LittleEndian.Uint16(append(s.Bytes(2), 0, 0)))
		}
		v.SetUint(uint64(k))
		return
	case reflect.TypeFor[events.Hash]():
		if s.Byte()%2 == 1 {
			var h events.Hash
			copy(h[:], s.Bytes(32))
			h[0] |= 1 // non-zero even past the end of the input
			v.Set(reflect.ValueOf(h))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(s.Bytes(int(s.Byte()))))
	case reflect.Uint64:
		v.SetUint(s.Uint64())
	case reflect.Int64:
		v.SetInt(int64(s.Uint64()))
	case reflect.Slice:
		n := int(s.Byte() % 5)
		if n == 4 {
			return // nil
		}
		sl := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillValue(t, sl.Index(i), s, name)
		}
		v.Set(sl)
	case reflect.Struct:
		for i := range v.NumField() {
			fillValue(t, v.Field(i), s, name)
		}
	case reflect.Pointer:
		// The answer to a source registration an effect carried: one
		// level deep, as the issuer writes it.
		if name == "Source" && v.Type() == reflect.TypeFor[*Envelope]() {
			inner := reflect.New(v.Type().Elem())
			for i := range inner.Elem().NumField() {
				if f := inner.Elem().Type().Field(i).Name; f != "Source" {
					fv := inner.Elem().Field(i)
					fillValue(t, fv, s, f)
					if fv.Kind() == reflect.Slice && fv.Len() == 0 {
						fv.SetZero() // omitempty: an empty list decodes as none
					}
				}
			}
			v.Set(inner)
			return
		}
		t.Fatalf("field %s has type %v, which the envelope codec and this test do not know", name, v.Type())
	default:
		t.Fatalf("field %s has type %v, which the envelope codec and this test do not know", name, v.Type())
	}
}

// FuzzEnvelopeAppendJSON builds an envelope from the fuzz input and holds
// AppendJSON to json.Marshal, and DecodeEnvelope to json.Unmarshal on the
// result.
func FuzzEnvelopeAppendJSON(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x04deny\x03g-1\x00\x07expired\x05<&>\"\\\x01\x02"))
	f.Add([]byte("\x06\xe2\x80\xa8\xff\x00\x1f\x05\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte(strings.Repeat("\x03a\x00b\x09", 40)))
	f.Fuzz(func(t *testing.T, in []byte) {
		var env Envelope
		s := fuzzbytes.New(in)
		v := reflect.ValueOf(&env).Elem()
		for i := range v.NumField() {
			if s.Byte()%3 != 0 { // leave about a third of the fields empty
				fillValue(t, v.Field(i), s, v.Type().Field(i).Name)
			}
		}
		want, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		got := env.AppendJSON(nil)
		if string(got) != string(want) {
			t.Fatalf("AppendJSON differs from json.Marshal\n got  %q\n want %q", got, want)
		}
		checkDecode(t, got)
	})
}

// FuzzDecodeEnvelope holds DecodeEnvelope to json.Unmarshal on arbitrary
// input, seeded with real envelopes and the hand-written corner cases.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, env := range envelopeTable() {
		data, err := json.Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, in := range decodeInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecode(t, in)
	})
}

func benchEnvelopes() []struct {
	name string
	env  Envelope
} {
	attempt := Envelope{
		Decision: Permit, GrantID: "0b6f9c8e-4f5c-4f7e-9a43-6d1f3e2a9b10", Epoch: 7,
		IssuedAt: 1767225600123456789, ExpiresAt: 1767225660123456789, Seq: 184467,
		Kind: events.KindAttempt, Digest: digestA,
	}
	return []struct {
		name string
		env  Envelope
	}{
		{"spend", attempt}, // what fsm answers a spend with
		{"grounds", spendEnvelope()},
		{"refuse", Refuse(ReasonUnknownGrant, "live grant", "")},
	}
}

// encodeSink keeps json.Marshal's result alive; encodeLen keeps
// AppendJSON's work from being optimized away.
var (
	encodeSink []byte
	encodeLen  int
)

// BenchmarkEnvelopeEncode compares json.Marshal with AppendJSON into a
// 1 KiB stack buffer, as issuer.respond does, and into a fresh heap buffer.
func BenchmarkEnvelopeEncode(b *testing.B) {
	for _, c := range benchEnvelopes() {
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := json.Marshal(c.env)
				if err != nil {
					b.Fatal(err)
				}
				encodeSink = data
			}
		})
		b.Run(c.name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var buf [1024]byte
				encodeLen += len(c.env.AppendJSON(buf[:0]))
			}
		})
		b.Run(c.name+"/AppendJSON-heap", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				encodeSink = c.env.AppendJSON(make([]byte, 0, 512))
			}
		})
	}
}

// BenchmarkEnvelopeDecode compares json.Unmarshal with DecodeEnvelope.
func BenchmarkEnvelopeDecode(b *testing.B) {
	for _, c := range benchEnvelopes() {
		data := c.env.AppendJSON(nil)
		b.Run(c.name+"/json.Unmarshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var env Envelope
				if err := json.Unmarshal(data, &env); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/DecodeEnvelope", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeEnvelope(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ExampleDecodeEnvelope shows the codec's round trip.
func ExampleDecodeEnvelope() {
	env := Refuse(ReasonExpired, "expiry", "")
	data := env.AppendJSON(nil)
	back, err := DecodeEnvelope(data)
	fmt.Println(string(data))
	fmt.Println(back.Reason, back.Recovery, err)
	// Output:
	// {"decision":"deny","reason":"expired","missing":"expiry","recovery":"request_new_grant"}
	// expired request_new_grant <nil>
}
