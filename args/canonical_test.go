package args

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// canonicalSeeds are documents in and out of canonical form, for the
// differential fuzz target and the fixed cases below.
var canonicalSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1`, `-1`, `10`, `0.5`, `-0.5`, `1.5`, `1.50`, `01`, `1e2`, `1E2`, `0.0`, `-0.0`, `1.`, `.5`, `-`,
	`12345678901234567890`, `true`, `false`, `null`, `nul`, `tru`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1 }`, `{ "a":1}`, `[1 ,2]`,
	`{"a":1}x`, `{"a":1} `, ` {"a":1}`, `{"a":1}}`, `[1,2]]`, `{"a":}`, `{"a"}`, `{,}`, `[,]`, `[1,]`, `{"a":1,}`,
	`"a<b"`, `"a>b"`, `"a&b"`, `"a\"b"`, `"a\\b"`, `"a\nb"`, "\"a\nb\"", "\"a\x7fb\"", "\"a\u2028b\"", "\"a\u2029b\"",
	`"\u00e9"`, "\"\u00e9\"", "\"\xff\"", "\"\xc3\"", "\"\ufffd\"", `"\ud800"`, `{"é":1,"e":2}`, "{\"e\":2,\"\u00e9\":1}",
	`{"command":"go test ./...","description":"run the tests","timeout":120000}`,
	`[[[[[[[[[[]]]]]]]]]]`, strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	strings.Repeat("{\"a\":", MaxDepth) + "1" + strings.Repeat("}", MaxDepth),
	strings.Repeat("{\"a\":", MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
	// Escapes: the ones encoding/json writes, and others for the same
	// characters.
	`"a\u003cb"`, `"a\u003Cb"`, `"2\u003e\u00261 \u0026\u0026 echo \u003cx\u003e"`, `"\u0001\u001f\u0000"`, `"\u001F"`,
	`"\b\f\n\r\t"`, `"\u0008"`, `"\u000c"`, `"\u000a"`, `"\u000d"`, `"\u0009"`, `"\u0022"`, `"\u005c"`, `"\/"`, `"/"`,
	`"\u2028\u2029"`, `"\u202A"`, `"\u202a"`, `"\u007f"`, "\"\x7f\"", `"\u0041"`, `"\ufffd"`, `"\"\\"`, `"\a"`, `"\u00"`, `"\`,
	`"\ud83d\ude00"`, "\"\U0001F600\"", `{"\"":1,"!":2}`, `{"!":2,"\"":1}`, `{"\u0026":1,"%":2}`, `{"%":2,"\u0026":1}`,
	`{"\u0001":1,"\u0001":2}`, `{"\n":1,"\u0001":2}`, `{"\u0001":2,"\n":1}`, `{"a\u2028":1,"a\u2029":2}`, `{"a\u2029":1,"a\u2028":2}`,
	`{"a\u2028":1,"a\u00e9":2}`, "{\"a\\u2028\":1,\"a\uffff\":2}", "{\"a\uffff\":2,\"a\\u2028\":1}", `{"\\":1,"a":2}`, `{"a":1,"\\":2}`,
	`{"a":1,"a\u0000":2}`, `{"a\u0000":2,"a":1}`, `{"\u003c":{"\u003e":"\u0026"}}`,
}

// Whatever isCanonical certifies, the long way returns unchanged; and
// whatever the long way returns, isCanonical certifies, escapes and all.
func FuzzCanonicalFastPath(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkFastPath(t, raw)
	})
}

func checkFastPath(t *testing.T, raw []byte) {
	t.Helper()
	slow, err := canonicalize(raw)
	fast, ferr := CanonicalJSON(raw)
	if (err == nil) != (ferr == nil) || !bytes.Equal(slow, fast) {
		t.Fatalf("%q: CanonicalJSON gave %q, %v; the long way %q, %v", raw, fast, ferr, slow, err)
	}
	if isCanonical(raw) && (err != nil || !bytes.Equal(slow, raw)) {
		t.Fatalf("%q certified canonical, but it canonicalizes to %q (%v)", raw, slow, err)
	}
	if err == nil && !isCanonical(slow) {
		t.Fatalf("canonical form %q of %q is not certified", slow, raw)
	}
}

func TestCanonicalFastPath(t *testing.T) {
	for _, s := range canonicalSeeds {
		checkFastPath(t, []byte(s))
	}
	for s, want := range map[string]bool{
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`: true, `{"b":1,"a":2}`: false, `1.50`: false, `-0`: false,
		`-0.5`: true, `"a<b"`: false, "\"\u00e9\"": true, `{"a":1} `: false,
		`"a\u003cb"`: true, `"a\u003Cb"`: false, `"\u0008"`: false, `"\b"`: true, `"\/"`: false, `"\u00e9"`: false,
		`{"!":2,"\"":1}`: true, `{"\"":1,"!":2}`: false, `{"\\":1,"a":2}`: true, `{"a":1,"\\":2}`: false,
		`{"\u0001":1,"\u0001":2}`: false, `{"a\u2028":1,"a\u2029":2}`: true, `{"a\u2029":1,"a\u2028":2}`: false,
		"\"\x7f\"": true, "\"\ufffd\"": true, `"\ufffd"`: false,
	} {
		if got := isCanonical([]byte(s)); got != want {
			t.Errorf("isCanonical(%q) = %v, want %v", s, got, want)
		}
	}
	// The copy is the caller's.
	raw := []byte(`{"a":1}`)
	out, _ := CanonicalJSON(raw)
	out[0] = 'x'
	if raw[0] != '{' {
		t.Fatal("CanonicalJSON returned its input")
	}
}

// TestCanonicalEscapes: every character encoding/json escapes is
// certified in the form quote writes it and in no other, and a key is
// ordered by its decoded bytes.
func TestCanonicalEscapes(t *testing.T) {
	var runes []rune
	for r := rune(0); r < 0x80; r++ {
		runes = append(runes, r)
	}
	runes = append(runes, 0xe9, 0x2027, 0x2028, 0x2029, 0x202a, 0xfffd, 0x1f600)
	for _, r := range runes {
		s := "x" + string(r) + "y"
		q := quote(s)
		if !isCanonical([]byte(q)) {
			t.Errorf("quote(%q) = %s is not certified", s, q)
		}
		alts := []string{fmt.Sprintf(`"x\u%04xy"`, r), fmt.Sprintf(`"x\u%04Xy"`, r)}
		if r == '"' || r == '\\' || r == '/' {
			alts = append(alts, fmt.Sprintf(`"x\%cy"`, r))
		}
		for _, alt := range alts {
			if alt != q && isCanonical([]byte(alt)) {
				t.Errorf("%s is certified, but quote writes %s", alt, q)
			}
		}
		// As a key, next to every other: certified only in byte order.
		for _, r2 := range runes {
			doc := "{" + q + ":1," + quote("x"+string(r2)+"y") + ":2}"
			if want := r < r2; isCanonical([]byte(doc)) != want {
				t.Errorf("isCanonical(%s) = %v, want %v", doc, !want, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		isCanonical([]byte(`{"a\u0026":"2\u003e\u00261","a\u2028":[1,"\"\\\n"]}`))
	}); n != 0 {
		t.Errorf("isCanonical allocates %v times on escaped input", n)
	}
}
