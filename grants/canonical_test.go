package grants

import (
	"bytes"
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
	`[[[[[[[[[[]]]]]]]]]]`, strings.Repeat("[", MaxArgsDepth) + strings.Repeat("]", MaxArgsDepth),
	strings.Repeat("[", MaxArgsDepth+1) + strings.Repeat("]", MaxArgsDepth+1),
	strings.Repeat("{\"a\":", MaxArgsDepth) + "1" + strings.Repeat("}", MaxArgsDepth),
	strings.Repeat("{\"a\":", MaxArgsDepth+1) + "1" + strings.Repeat("}", MaxArgsDepth+1),
}

// Whatever isCanonical certifies, the long way returns unchanged; and
// whatever the long way returns, isCanonical certifies, as long as it has
// no string escapes or characters the scan leaves to the long way.
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
	if err == nil && !bytes.ContainsAny(slow, "\\\u2028\u2029\ufffd\x7f") && !isCanonical(slow) {
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
