package jsonwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// stringInputs are strings for the writer and, quoted, for the scanner:
// every escape encoding/json writes, HTML characters, separators, and
// invalid UTF-8.
var stringInputs = []string{
	"", "plain", "a b/c", `quote" back\ slash/`, "tab\tnl\ncr\rbs\bff\fnul\x00us\x1fdel\x7f",
	`<script>alert("x&y")</script>`, "line\u2028para\u2029end", "é漢字😀\ufffd",
	"a\xffb\xc3(c\xe2\x82d\xed\xa0\x80e\xf0\x9f\x98", "\x80", "\xe2\x80", "\xe2\x80\xa8\xe2\x80\xa9",
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range stringInputs {
		checkAppendString(t, s)
	}
	for b := range 256 {
		checkAppendString(t, string([]byte{'a', byte(b), 'z'}))
	}
}

func checkAppendString(t testing.TB, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
		t.Fatalf("AppendString(%q) = %s, want %s", s, got[1:], want)
	}
}

// TestFieldsMatchMarshal: the field helpers write what json.Marshal writes
// for omitempty fields, empty or not.
func TestFieldsMatchMarshal(t *testing.T) {
	type fields struct {
		X  int      `json:"x"`
		S  string   `json:"s,omitempty"`
		U  uint64   `json:"u,omitempty"`
		SS []string `json:"ss,omitempty"`
	}
	for _, f := range []fields{
		{}, {S: "<a>", U: 1<<64 - 1, SS: []string{"", "\xff", "x"}}, {U: 7}, {SS: []string{}}, {SS: []string{""}},
	} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		got := []byte(`{"x":0`)
		got = AppendStringField(got, `,"s":`, f.S)
		got = AppendUintField(got, `,"u":`, f.U)
		got = AppendStringsField(got, `,"ss":`, f.SS)
		got = append(got, '}')
		if string(got) != string(want) {
			t.Fatalf("%+v: wrote %s, json.Marshal %s", f, got, want)
		}
	}
}

// compactInputs are raw values for AppendCompact and the scanner: valid and
// invalid JSON of every kind.
var compactInputs = []string{
	`null`, `true`, `false`, `0`, `-0`, `12`, `-1.5e+3`, `1E-2`, `0.0`, `"s"`, `""`, `[]`, `{}`,
	" { \"a\" : [ 1 , 2 , { } ] ,\n\t\"b\":\"x y\" } ", `{"html":"<a href='x'>&amp;</a>"}`,
	"[\"\u2028\u2029\",\"\xe2\x80\xa8\"]", `"\u2028 \\ \" \/ \b\f\n\r\t \u00e9 \uD83D\uDE00 \ud800"`,
	"\"\xff\xfe invalid\"", `{"a":{"b":{"c":[[[]]]}}}`, "[1,\n2]", `"<>&"`, `"\u003c"`,
	// Invalid.
	``, ` `, `nul`, `tru`, `01`, `-`, `1.`, `.5`, `1e`, `+1`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
	`[1 2]`, `"a`, `"\x"`, `"\u12"`, "\"a\x01\"", `{"a":}`, `[`, `]`, `1 2`, `'a'`, `NaN`, `{"a":1}}`,
	strings.Repeat("[", 300) + strings.Repeat("]", 300),
}

func TestAppendCompactMatchesMarshal(t *testing.T) {
	for _, in := range append(compactInputs, stringInputsQuoted()...) {
		checkCompact(t, []byte(in))
	}
}

func stringInputsQuoted() []string {
	var out []string
	for _, s := range stringInputs {
		out = append(out, `"`+s+`"`)
	}
	return out
}

// checkCompact holds AppendCompact to json.Marshal of a json.RawMessage:
// the same bytes, and success exactly when json.Marshal succeeds (for
// input shallow enough for the depth bound).
func checkCompact(t testing.TB, in []byte) {
	t.Helper()
	maxDepth := min(len(in), 64)
	want, err := json.Marshal(json.RawMessage(in))
	got, ok := AppendCompact([]byte("x"), in, maxDepth)
	switch {
	case ok && err != nil:
		t.Fatalf("AppendCompact(%q) = %s; json.Marshal fails: %v", in, got, err)
	case ok && string(got) != "x"+string(want):
		t.Fatalf("AppendCompact(%q) = %s, json.Marshal %s", in, got[1:], want)
	case !ok && string(got) != "x":
		t.Fatalf("AppendCompact(%q) failed but wrote %q", in, got)
	case !ok && err == nil && nesting(in) < maxDepth:
		t.Fatalf("AppendCompact(%q) failed; json.Marshal gives %s", in, want)
	}
}

// nesting is how deeply the arrays and objects of in nest (as if it were
// valid JSON).
func nesting(in []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '[' || c == '{'):
			depth++
			most = max(most, depth)
		case !inString && (c == ']' || c == '}'):
			depth--
		}
	}
	return most
}

func TestAppendCompactDepth(t *testing.T) {
	for _, c := range []struct {
		in       string
		maxDepth int
		ok       bool
	}{
		{`1`, 0, true}, {`[]`, 0, true}, {`[1]`, 0, false}, {`[1]`, 1, true}, {`{"a":[1]}`, 1, false},
		{`{"a":[1]}`, 2, true}, {`[[]]`, 1, true}, {`[[[]]]`, 1, false}, {`1`, -1, false},
	} {
		if _, ok := AppendCompact(nil, []byte(c.in), c.maxDepth); ok != c.ok {
			t.Errorf("AppendCompact(%s, %d): ok %v, want %v", c.in, c.maxDepth, ok, c.ok)
		}
	}
}

// checkScanner holds each of the Scanner's readers, run over all of in, to
// encoding/json: what a reader accepts, json.Unmarshal or json.Valid
// accepts with the same result.
func checkScanner(t testing.TB, in []byte) {
	t.Helper()
	valid := json.Valid(in)
	trimmed := bytes.Trim(in, " \t\r\n")

	s := Scanner{Data: in}
	s.SkipSpace()
	maxDepth := min(len(in), 9999)
	if ok := s.Skip(maxDepth) && s.End(); ok != valid && (ok || len(in) < 9999) {
		t.Fatalf("Skip(%q) = %v, json.Valid %v", in, ok, valid)
	}

	s = Scanner{Data: in}
	s.SkipSpace()
	number := len(trimmed) > 0 && (trimmed[0] == '-' || '0' <= trimmed[0] && trimmed[0] <= '9')
	if ok := s.Number() && s.End(); ok != (valid && number) {
		t.Fatalf("Number(%q) = %v, json.Valid %v", in, ok, valid)
	}

	s = Scanner{Data: in}
	s.SkipSpace()
	if raw, escaped, ok := s.StringBytes(); ok && s.End() {
		var want string
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("StringBytes(%q) reads %q; json.Unmarshal fails: %v", in, raw, err)
		}
		got := string(raw)
		if escaped {
			got = UnescapeString(raw)
		} else if bytes.IndexByte(raw, '\\') >= 0 {
			t.Fatalf("StringBytes(%q): an escape not reported", in)
		}
		if got != want {
			t.Fatalf("StringBytes(%q) decodes %q, json.Unmarshal %q", in, got, want)
		}
	}

	plain := plainInteger(trimmed)
	s = Scanner{Data: in}
	s.SkipSpace()
	u, ok := s.Uint()
	ok = ok && s.End()
	var wantU uint64
	errU := json.Unmarshal(in, &wantU)
	switch {
	case ok && (errU != nil || u != wantU):
		t.Fatalf("Uint(%q) = %d; json.Unmarshal %d, %v", in, u, wantU, errU)
	case !ok && errU == nil && plain:
		t.Fatalf("Uint(%q) fails; json.Unmarshal gives %d", in, wantU)
	}

	s = Scanner{Data: in}
	s.SkipSpace()
	i, ok := s.Int()
	ok = ok && s.End()
	var wantI int64
	errI := json.Unmarshal(in, &wantI)
	switch {
	case ok && (errI != nil || i != wantI):
		t.Fatalf("Int(%q) = %d; json.Unmarshal %d, %v", in, i, wantI, errI)
	case !ok && errI == nil && (plain || len(trimmed) > 1 && trimmed[0] == '-' && plainInteger(trimmed[1:])):
		t.Fatalf("Int(%q) fails; json.Unmarshal gives %d", in, wantI)
	}

	s = Scanner{Data: in}
	s.SkipSpace()
	b, ok := s.Bool()
	ok = ok && s.End()
	var wantB bool
	errB := json.Unmarshal(in, &wantB)
	// json.Unmarshal takes null for a bool as for any type, leaving it
	// as it was; the codecs leave null to encoding/json.
	if ok != (errB == nil && string(trimmed) != "null") || ok && b != wantB {
		t.Fatalf("Bool(%q) = %v, %v; json.Unmarshal %v, %v", in, b, ok, wantB, errB)
	}

	checkCompact(t, in)
}

// plainInteger reports whether b is an integer as JSON writes it, with no
// sign, fraction or exponent.
func plainInteger(b []byte) bool {
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var scannerInputs = []string{
	`0`, `1`, `-1`, `-0`, `18446744073709551615`, `18446744073709551616`, `99999999999999999999`,
	`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`,
	`1.0`, `1e3`, `-`, `--1`, `00`, ` 42 `, "\t-7\n", `true`, `false`, ` true `, `null`,
}

func TestScannerMatchesEncodingJSON(t *testing.T) {
	inputs := append(append(append([]string{}, scannerInputs...), compactInputs...), stringInputsQuoted()...)
	for _, in := range inputs {
		checkScanner(t, []byte(in))
	}
}

// TestStringBytes: strings encoding/json decodes to their own bytes are
// read; strings it would change (invalid UTF-8, surrogate escapes) are
// not, nor malformed ones.
func TestStringBytes(t *testing.T) {
	for _, c := range []struct {
		in      string
		raw     string
		escaped bool
		ok      bool
	}{
		{`""`, ``, false, true},
		{`"abc"`, `abc`, false, true},
		{`"é漢字😀"`, `é漢字😀`, false, true},
		{`"a\nb"`, `a\nb`, true, true},
		{`"\u00e9\/"`, `\u00e9\/`, true, true},
		{`"\uD83D\uDE00"`, ``, false, false},
		{`"\udfff"`, ``, false, false},
		{"\"\xff\"", ``, false, false},
		{"\"a\x1fb\"", ``, false, false},
		{`"\x"`, ``, false, false},
		{`"\u12g4"`, ``, false, false},
		{`"abc`, ``, false, false},
		{`abc`, ``, false, false},
	} {
		s := Scanner{Data: []byte(c.in)}
		raw, escaped, ok := s.StringBytes()
		if string(raw) != c.raw || escaped != c.escaped || ok != c.ok {
			t.Errorf("StringBytes(%s) = %q, %v, %v; want %q, %v, %v", c.in, raw, escaped, ok, c.raw, c.escaped, c.ok)
		}
		if ok && s.Pos != len(c.in) {
			t.Errorf("StringBytes(%s) stops at %d", c.in, s.Pos)
		}
	}
	var b strings.Builder
	b.WriteString("kept|")
	Unescape(&b, []byte(`a\"\\\/\b\f\n\r\t\u00e9\u2028z`))
	if want := "kept|a\"\\/\b\f\n\r\t\u00e9\u2028z"; b.String() != want {
		t.Errorf("Unescape wrote %q, want %q", b.String(), want)
	}
}

// TestObjectArray: the structure readers pass over whitespace and commas
// and call back once per member or element, not at all for empty ones.
func TestObjectArray(t *testing.T) {
	s := Scanner{Data: []byte(` { "a" : [ 1 , 2 ] , "b" : [ ] } `)}
	s.SkipSpace()
	var keys []string
	var elems []uint64
	ok := s.Object(func() bool {
		raw, _, ok := s.StringBytes()
		keys = append(keys, string(raw))
		return ok && s.Colon() && s.Array(func() bool {
			v, ok := s.Uint()
			elems = append(elems, v)
			return ok
		})
	})
	if !ok || !s.End() || strings.Join(keys, ",") != "a,b" || len(elems) != 2 || elems[0] != 1 || elems[1] != 2 {
		t.Fatalf("Object: ok %v, keys %q, elems %v", ok, keys, elems)
	}
	for _, in := range []string{`{"a":1,}`, `{"a":1 "b":2}`, `{"a":1`, `[1,]`, `[1 2]`, `[1`, `{`, `[`, `{]`, `[}`} {
		s := Scanner{Data: []byte(in)}
		if s.Object(func() bool { return s.SkipString() && s.Colon() && s.Skip(4) }) {
			t.Errorf("Object read %s", in)
		}
		s = Scanner{Data: []byte(in)}
		if s.Array(func() bool { return s.Skip(4) }) {
			t.Errorf("Array read %s", in)
		}
	}
}

func TestSkipDepth(t *testing.T) {
	for _, c := range []struct {
		in       string
		maxDepth int
		ok       bool
	}{
		{`"s"`, 0, true}, {`[]`, 0, true}, {`{}`, 0, true}, {`[1]`, 0, false}, {`[1]`, 1, true},
		{`{"a":{"b":1}}`, 1, false}, {`{"a":{"b":1}}`, 2, true}, {`[[[["x"]]]]`, 3, false}, {`[[[["x"]]]]`, 4, true},
		{`1`, -1, false},
	} {
		s := Scanner{Data: []byte(c.in)}
		if ok := s.Skip(c.maxDepth) && s.End(); ok != c.ok {
			t.Errorf("Skip(%s, %d) = %v, want %v", c.in, c.maxDepth, ok, c.ok)
		}
	}
}

func TestAllocs(t *testing.T) {
	data := []byte(`{"a":[1,-2.5e3,"s\n",true,null,{"b":"\u00e9"}],"c":"plain"}`)
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		s := Scanner{Data: data}
		_ = s.Skip(8)
		buf = AppendString(buf[:0], "a<b>\u2028\xff")
		buf, _ = AppendCompact(buf[:0], data, 8)
	}); n != 0 {
		t.Fatalf("Skip, AppendString and AppendCompact allocate %v times", n)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range stringInputs {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkAppendString(t, s)
		// What AppendString writes (valid UTF-8, no surrogate escapes),
		// StringBytes reads back as encoding/json does.
		q := AppendString(nil, s)
		var want string
		if err := json.Unmarshal(q, &want); err != nil {
			t.Fatal(err)
		}
		sc := Scanner{Data: q}
		raw, escaped, ok := sc.StringBytes()
		if !ok || sc.Pos != len(q) {
			t.Fatalf("StringBytes(%s) = %q, %v", q, raw, ok)
		}
		got := string(raw)
		if escaped {
			got = UnescapeString(raw)
		}
		if got != want {
			t.Fatalf("StringBytes(%s) decodes %q, json.Unmarshal %q", q, got, want)
		}
	})
}

// FuzzScanner holds the Scanner's readers and AppendCompact to
// encoding/json on arbitrary input.
func FuzzScanner(f *testing.F) {
	for _, set := range [][]string{scannerInputs, compactInputs, stringInputsQuoted()} {
		for _, in := range set {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkScanner(t, in)
	})
}
