package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestCanonicalJSON: each input canonicalizes to exactly the given bytes.
func TestCanonicalJSON(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"keys sorted", `{"b":1,"a":2,"c":{"z":0,"y":[3,2,1]}}`, `{"a":2,"b":1,"c":{"y":[3,2,1],"z":0}}`},
		{"keys sorted by UTF-8 bytes", `{"é":1,"z":2,"A":3,"":4}`, `{"":4,"A":3,"z":2,"é":1}`},
		{"whitespace dropped", " {\n\t\"a\" : [ 1 , true , null ] ,\r\n \"b\":\"x y\" }\n", `{"a":[1,true,null],"b":"x y"}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"scalar top level", `"hi"`, `"hi"`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"1.50", `1.50`, `1.5`},
		{"15e-1", `15e-1`, `1.5`},
		{"0.15E+1", `0.15E+1`, `1.5`},
		{"integer with exponent", `1e3`, `1000`},
		{"integer with fraction zeros", `1000.000`, `1000`},
		{"trailing zeros of integers kept", `1200`, `1200`},
		{"big integer exact", `12345678901234567890`, `12345678901234567890`},
		{"big integer +1 exact", `12345678901234567891`, `12345678901234567891`},
		{"beyond float64", `9007199254740993`, `9007199254740993`},
		{"tiny exact", `1.000000000000000000001`, `1.000000000000000000001`},
		{"minus zero", `-0`, `0`},
		{"minus zero fraction", `-0.000e5`, `0`},
		{"negative fraction", `-1.25e-5`, `-0.0000125`},
		{"negative integer", `-42`, `-42`},
		{"exponent limit", `1e400`, "1" + strings.Repeat("0", 400)},
		{"negative exponent limit", `1e-400`, "0." + strings.Repeat("0", 399) + "1"},
		{"unicode escape equals literal", `"\u00e9"`, `"é"`},
		{"escaped key equals literal key", `{"\u0061":1}`, `{"a":1}`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"solidus escape dropped", `"a\/b"`, `"a/b"`},
		{"control characters escaped", `"\u0001\n"`, `"\u0001\n"`},
		{"html characters escaped as encoding/json does", `"<&>"`, `"\u003c\u0026\u003e"`},
		{"nested depth at the limit", strings.Repeat("[", MaxDepth) + "1" + strings.Repeat("]", MaxDepth),
			strings.Repeat("[", MaxDepth) + "1" + strings.Repeat("]", MaxDepth)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("CanonicalJSON(%q)\n got  %s\n want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestCanonicalJSONDistinguishes: inputs with different meanings keep
// different canonical forms (and so different digests).
func TestCanonicalJSONDistinguishes(t *testing.T) {
	pairs := [][2]string{
		{`12345678901234567890`, `12345678901234567891`},
		{`1.5`, `1.50000000000000000001`},
		{`0.1`, `0.1000000000000000055511151231257827`}, // float64(0.1) exactly
		{`1`, `"1"`},
		{`null`, `false`},
		{`[1,2]`, `[2,1]`},
		{`{"a":1}`, `{"A":1}`},
		{`"\u00e9"`, `"e\u0301"`}, // precomposed vs combining accent: no Unicode normalisation
		{`{"a":[]}`, `{"a":{}}`},
	}
	for _, p := range pairs {
		a, errA := CanonicalJSON([]byte(p[0]))
		b, errB := CanonicalJSON([]byte(p[1]))
		if errA != nil || errB != nil {
			t.Fatalf("%q / %q: %v / %v", p[0], p[1], errA, errB)
		}
		if bytes.Equal(a, b) {
			t.Errorf("%q and %q share the canonical form %s", p[0], p[1], a)
		}
		if Digest0(t, "t", p[0]) == Digest0(t, "t", p[1]) {
			t.Errorf("%q and %q share a digest", p[0], p[1])
		}
	}
}

// TestCanonicalJSONRejects: input two parsers could disagree on, or that
// exceeds a limit, is refused with ErrCanonical.
func TestCanonicalJSONRejects(t *testing.T) {
	manyHugeNumbers := "[" + strings.TrimSuffix(strings.Repeat("1e400,", 1000), ",") + "]"
	cases := []struct {
		name, in, want string
	}{
		{"duplicate key", `{"a":1,"a":1}`, "duplicate object key"},
		{"duplicate key via escape", `{"a":1,"\u0061":2}`, "duplicate object key"},
		{"nested duplicate key", `[{"x":{"k":1,"k":2}}]`, "duplicate object key"},
		{"trailing value", `{} {}`, "trailing data"},
		{"trailing scalar", `1 2`, "trailing data"},
		{"trailing garbage", `{"a":1} x`, "trailing data"},
		{"trailing close brace", `{}}`, "trailing data"},
		{"trailing close bracket", `[1]]`, "trailing data"},
		{"trailing comma", `"a",`, "trailing data"},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "nesting deeper"},
		{"too deep objects", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "nesting deeper"},
		{"input too large", `"` + strings.Repeat("x", MaxBytes) + `"`, "exceeds limit"},
		{"canonical form too large", manyHugeNumbers, "canonical form exceeds limit"},
		{"exponent too large", `1e401`, "exponent outside"},
		{"exponent too small", `1e-401`, "exponent outside"},
		{"exponent overflows int", `1e99999999999999999999`, "exponent outside"},
		{"invalid UTF-8", "\"\xff\"", "invalid UTF-8"},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", "invalid UTF-8"},
		{"lone high surrogate", `"\ud800"`, "lone surrogate"},
		{"lone low surrogate", `"\udc00"`, "lone surrogate"},
		{"high surrogate then text", `"\ud800x"`, "lone surrogate"},
		{"high surrogate then non-surrogate escape", `"\ud800\u0041"`, "lone surrogate"},
		{"two high surrogates", `"\ud800\ud800"`, "lone surrogate"},
		{"lone surrogate in key", `{"\udfff":1}`, "lone surrogate"},
		{"empty", ``, "EOF"},
		{"only whitespace", "  \n", "EOF"},
		{"unquoted key", `{a:1}`, "invalid character"},
		{"trailing comma in array", `[1,]`, "invalid character"},
		{"leading zero", `01`, "trailing data"},
		{"NaN", `NaN`, "invalid character"},
		{"single quotes", `'a'`, "invalid character"},
		{"unterminated", `{"a":`, "EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if !errors.Is(err, ErrCanonical) {
				t.Fatalf("CanonicalJSON = %q, %v; want ErrCanonical", got, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// ratNumber is the exact value of a JSON number literal (the reference the
// text-based canonNumber is checked against).
func ratNumber(t interface{ Fatalf(string, ...any) }, lit string) *big.Rat {
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		t.Fatalf("big.Rat cannot parse %q", lit)
	}
	return r
}

// TestCanonNumberExact: for any JSON number literal within the exponent
// limit, canonNumber is a plain decimal with the same exact value, without
// redundant zeros or sign, and equal literals give equal forms.
func TestCanonNumberExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		intPart := rapid.StringMatching(`0|[1-9][0-9]{0,25}`).Draw(t, "int")
		frac := rapid.StringMatching(`(\.[0-9]{1,25})?`).Draw(t, "frac")
		exp := ""
		if rapid.Bool().Draw(t, "has_exp") {
			exp = fmt.Sprintf("%s%s%d", rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e"),
				rapid.SampledFrom([]string{"", "+", "-"}).Draw(t, "sign"), rapid.IntRange(0, maxExponent).Draw(t, "exp"))
		}
		lit := rapid.SampledFrom([]string{"", "-"}).Draw(t, "neg") + intPart + frac + exp
		got, err := canonNumber(lit)
		if err != nil {
			t.Fatalf("canonNumber(%q): %v", lit, err)
		}
		if ratNumber(t, got).Cmp(ratNumber(t, lit)) != 0 {
			t.Fatalf("canonNumber(%q) = %q changes the value", lit, got)
		}
		// Shortest form: what big.Rat itself prints for the value.
		r := ratNumber(t, lit)
		want := r.RatString()
		if !r.IsInt() {
			want = r.FloatString(len(got) - strings.Index(got, ".") - 1)
		}
		if got != want || strings.ContainsAny(got, "eE+") || (strings.Contains(got, ".") && strings.HasSuffix(got, "0")) || got == "-0" {
			t.Fatalf("canonNumber(%q) = %q, want %q", lit, got, want)
		}
	})
}

// TestCanonicalJSONIdempotent: the canonical form of the canonical form is
// itself, for a spread of documents.
func TestCanonicalJSONIdempotent(t *testing.T) {
	for _, in := range fuzzSeeds {
		c, err := CanonicalJSON([]byte(in))
		if err != nil {
			continue
		}
		cc, err := CanonicalJSON(c)
		if err != nil || !bytes.Equal(c, cc) {
			t.Errorf("%q: canonical %s re-canonicalizes to %s, %v", in, c, cc, err)
		}
	}
}

var fuzzSeeds = []string{
	`{"command":"go test ./...","cwd":"/work"}`,
	`{"b":[1,2,{"d":null,"c":true}],"a":"x"}`,
	`[1.50, 15e-1, -0, 1e400, 12345678901234567890]`,
	`"\u00e9\ud83d\ude00<>&\u2028"`,
	`{"a":1,"a":2}`,
	`{} x`,
	`"\ud800"`,
	"\"\xff\"",
	`[[[[[[[[[[]]]]]]]]]]`,
	`0.000000000000000000000000000000000001e-300`,
}

// FuzzCanonicalJSON: CanonicalJSON never panics; its output is valid JSON
// within the size limit, a fixed point, and means the same as the input
// (same structure, strings and exact numeric values).
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := CanonicalJSON(in)
		if err != nil {
			if !errors.Is(err, ErrCanonical) {
				t.Fatalf("error does not wrap ErrCanonical: %v", err)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("output is not valid JSON: %q", c)
		}
		if len(c) > MaxBytes {
			t.Fatalf("output of %d bytes exceeds the limit", len(c))
		}
		cc, err := CanonicalJSON(c)
		if err != nil || !bytes.Equal(c, cc) {
			t.Fatalf("not a fixed point:\n c  %q\n cc %q (%v)", c, cc, err)
		}
		if !sameJSON(t, decodeNumbers(t, in), decodeNumbers(t, c)) {
			t.Fatalf("canonical form %q does not mean what %q means", c, in)
		}
	})
}

func decodeNumbers(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// sameJSON compares decoded JSON values, numbers by exact value.
func sameJSON(t *testing.T, a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		return ok && ratNumber(t, string(a)).Cmp(ratNumber(t, string(b))) == 0
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(t, a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if !sameJSON(t, v, b[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// Digest0 is Digest that fails the test on error.
func Digest0(t *testing.T, tool, args string) [32]byte {
	t.Helper()
	d, err := Digest(tool, []byte(args))
	if err != nil {
		t.Fatalf("Digest(%q, %q): %v", tool, args, err)
	}
	return d
}

// TestRequestDigest: the digest depends on the tool and on the canonical
// arguments, not on formatting; the (tool, args) boundary cannot shift; and
// the construction is frozen (clients compute it too).
func TestRequestDigest(t *testing.T) {
	base := Digest0(t, "Bash", `{"command":"ls","cwd":"/w"}`)
	if got := Digest0(t, "Bash", " { \"cwd\" : \"/w\", \"command\": \"ls\" } "); got != base {
		t.Errorf("formatting changed the digest")
	}
	if got := RequestDigest("Bash", []byte(`{"command":"ls","cwd":"/w"}`)); got != base {
		t.Errorf("Digest differs from RequestDigest of the canonical form")
	}
	distinct := []struct{ tool, args string }{
		{"Bash", `{"command":"ls","cwd":"/w"}`},
		{"Bash", `{"command":"ls","cwd":"/x"}`},
		{"Shell", `{"command":"ls","cwd":"/w"}`},
		{"bash", `{"command":"ls","cwd":"/w"}`},
		// Boundary shifts: the same concatenation split differently.
		{"ab", `c`},
		{"a", `bc`},
		{"abc", ``},
		{"", `abc`},
		{"", ``},
		{"writ.request.v1", ``},
		{"Bash\x00", `{}`},
		{"Bash", "\x00{}"},
		{"Bash", `{}`},
	}
	seen := map[[32]byte]int{}
	for i, d := range distinct {
		h := RequestDigest(d.tool, []byte(d.args))
		if j, dup := seen[h]; dup {
			t.Errorf("(%q, %q) and (%q, %q) share a digest", d.tool, d.args, distinct[j].tool, distinct[j].args)
		}
		seen[h] = i
	}
	// Frozen vector: changing the construction breaks every client.
	const want = "e4c4bc5c8424eef1c18df7cadd0cf7b4a55a744afaeea0305eaca174a4c18557"
	if got := RequestDigest("Bash", []byte(`{"command":"ls"}`)).String(); got != want {
		t.Errorf("RequestDigest(Bash, {\"command\":\"ls\"}) = %s, want %s", got, want)
	}
}

// TestCanonicalJSONLongNumbers: long number literals canonicalize exactly.
// Their cost is measured by BenchmarkCanonicalJSONLongNumber (an earlier
// big.Rat loop took ~30s of issuer CPU for one 200 KB literal), not by a
// wall-clock assertion here.
func TestCanonicalJSONLongNumbers(t *testing.T) {
	n := 200_000
	cases := []struct{ in, want string }{
		{"0." + strings.Repeat("0", n) + "1", "0." + strings.Repeat("0", n) + "1"},
		{"-" + strings.Repeat("9", n) + ".5000e-3", "-" + strings.Repeat("9", n-3) + "." + "9995"},
		{"1" + strings.Repeat("0", n) + "e-400", "1" + strings.Repeat("0", n-400)},
	}
	for _, tc := range cases {
		got, err := CanonicalJSON([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("CanonicalJSON(%.20s…) = %.20s…, %v; want %.20s…", tc.in, got, err, tc.want)
		}
	}
}

// BenchmarkCanonicalJSONLongNumber canonicalizes one 200,000-digit number
// literal; it must stay linear in the literal's length.
func BenchmarkCanonicalJSONLongNumber(b *testing.B) {
	in := []byte("-" + strings.Repeat("9", 200_000) + ".5000e-3")
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		if _, err := CanonicalJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}

// A refusal for size states the real size and the limit.
func TestArgsSizeRefusalStatesSizes(t *testing.T) {
	// Each 1e400 is written out as a 401-digit integer.
	grown := "[" + strings.TrimSuffix(strings.Repeat("1e400,", 1000), ",") + "]"
	single, err := CanonicalJSON([]byte("[1e400]"))
	if err != nil {
		t.Fatal(err)
	}
	grownSize := 1000*(len(single)-2) + 999 + 2
	cases := []struct {
		name, in string
		want     []string
	}{
		{"input", `"` + strings.Repeat("x", MaxBytes) + `"`, []string{"262146 bytes", "limit 262144"}},
		{"canonical form", grown, []string{"limit 262144", fmt.Sprintf("it is %d bytes", grownSize), fmt.Sprintf("the input is %d", len(grown))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CanonicalJSON([]byte(tc.in))
			if !errors.Is(err, ErrCanonical) {
				t.Fatalf("want ErrCanonical, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not state %q", err, w)
				}
			}
		})
	}
}
