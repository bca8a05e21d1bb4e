package provenance

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/authority"
)

// typedRegistry holds what a user typed and what a tool returned, with
// numbers and identifiers spelled as people write them.
func typedRegistry(t testing.TB) *Registry {
	r := NewRegistry(Options{})
	mustRegister(t, r, "prompt", authority.ChannelUserPrompt, Instruction,
		"Please pay the invoice: 98.70 EUR to DE89 3704 0044 0532 0130 00, card 4111-1111-1111-1111, "+
			"call me on +49 30 1234567 or mail Jane.Doe@Example.COM. Rent is 1.250,00 € and the deposit $2,500.")
	mustRegister(t, r, "statement", authority.ChannelToolResult, Evidence,
		"Balance 4711.5 USD. Fee -12.00 EUR on 2026-03-02. Reference AB12-CD34-EF56-7890.")
	return r
}

// typedMatch reports the transform of src's match in tr, or "".
func typedMatch(tr Trace, src string) Transform {
	for _, m := range tr.Matches {
		if m.Source == src && m.Part == "" {
			return m.Transform
		}
	}
	return ""
}

func TestTraceTypedValues(t *testing.T) {
	r := typedRegistry(t)
	tests := []struct {
		name, value string
		src         string    // "" when nothing may match as a whole value
		want        Transform // the transform naming the normalization
	}{
		// Amounts and decimals by value; the source's currency is part of
		// the transform.
		{"amount without trailing zero", "98.7", "prompt", "number:EUR"},
		{"amount as written", "98.70", "prompt", TransformRaw},
		{"amount with more zeros", "98.700", "prompt", "number:EUR"},
		{"amount with its currency", "98.70 EUR", "prompt", TransformRaw},
		{"amount with the currency first", "EUR 98.7", "prompt", "number:EUR"},
		{"amount with the currency sign", "€98.7", "prompt", "number:EUR"},
		{"decimal comma and grouping dot", "1250", "prompt", "number:EUR"},
		{"grouping comma and dollar sign", "2500.00", "prompt", "number:USD"},
		{"integer from decimal", "4711.50", "statement", "number:USD"},
		{"sign is not compared", "12.0", "statement", "number:EUR"},
		// Identifiers with their separators changed.
		{"IBAN without its spaces", "DE89370400440532013000", "prompt", TransformIdent},
		{"IBAN with dashes", "DE89-3704-0044-0532-0130-00", "prompt", TransformIdent},
		{"card with spaces", "4111 1111 1111 1111", "prompt", TransformIdent},
		{"card without separators", "4111111111111111", "prompt", TransformIdent},
		{"phone without spaces", "+49301234567", "", ""}, // grouping 2-2-7 is not one tried
		{"phone in another grouping", "+49 301 234 567", "", ""},
		{"phone with dashes", "+49-30-1234567", "prompt", TransformIdent},
		{"reference with spaces", "AB12 CD34 EF56 7890", "statement", TransformIdent},
		// Case carries no meaning in an address or a host.
		{"mail address in another case", "jane.doe@example.com", "prompt", TransformRaw},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := r.Trace("/f", tc.value)
			got := typedMatch(tr, tc.src)
			if tc.src == "" {
				for _, m := range tr.Matches {
					if m.Part == "" && (m.Transform == TransformRaw || ValueTransform(string(m.Transform))) {
						t.Fatalf("%q matched %+v", tc.value, m)
					}
				}
				return
			}
			if got != tc.want {
				t.Fatalf("%q: transform %q, want %q (matches %+v)", tc.value, got, tc.want, tr.Matches)
			}
			if !ValidTransform(string(got)) {
				t.Fatalf("transform %q is not valid", got)
			}
		})
	}
}

func TestTraceTypedNearMisses(t *testing.T) {
	r := typedRegistry(t)
	tests := []struct{ name, value string }{
		{"a different amount", "98.71"},
		{"ten times the amount", "987"},
		{"digits shifted", "9.870"},
		{"the amount in another currency", "98.70 USD"},
		{"the amount with a sign of another currency", "$98.70"},
		{"a part of a larger number", "250"},
		{"a number inside an identifier", "8937"},
		{"a different IBAN", "DE89370400440532013001"},
		{"an IBAN missing a digit", "DE8937040044053201300"},
		{"an IBAN with a digit more", "DE893704004405320130000"},
		{"a different card", "4111-1111-1111-1112"},
		// (Spelled as in the source, a part of 16 bytes or more is a raw
		// fragment match, as for any text; respelled, it is no typed one.)
		{"the tail of an IBAN, compact", "370400440532013000"},
		{"the head of an IBAN, compact", "DE89370400440532"},
		{"the tail of an IBAN, dashed", "3704-0044-0532-0130-00"},
		{"a phone number missing a digit", "+4930123456"},
		{"a phone number with a digit changed", "+49301234568"},
		{"the tail of a reference", "CD34 EF56 7890"},
		{"a number the sources do not hold", "1234567.89"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := r.Trace("/f", tc.value)
			for _, m := range tr.Matches {
				if ValueTransform(string(m.Transform)) || m.Transform == TransformRaw && m.Part == "" && m.Mode != ModeFragment {
					t.Fatalf("%q matched %+v", tc.value, m)
				}
			}
			if tr.Authority != Evidence {
				t.Fatalf("%q: authority %v", tc.value, tr.Authority)
			}
		})
	}
}

func TestParseLiteral(t *testing.T) {
	tests := []struct {
		in     string
		prefer bool
		want   []string
	}{
		{"98.70", false, []string{"98.7"}},
		{"1.250,00", false, []string{"1250"}},
		{"1,250.5", false, []string{"1250.5"}},
		{"1'250'000", false, []string{"1250000"}},
		{"1.250", false, []string{"1.25", "1250"}},
		{"1.250", true, []string{"1.25"}},
		{"1,250", true, []string{"1250"}},
		{"0.50", false, []string{"0.5"}},
		{"007", false, []string{"7"}},
		{"1,2,3", false, nil},
		{"12..5", false, nil},
		{"1.2.3,4.5", false, nil},
		{"12,34.56", false, nil}, // groups of two are not thousands
		{"1e5", false, nil},
	}
	for _, tc := range tests {
		var got []string
		for _, n := range parseLiteral(tc.in, tc.prefer) {
			got = append(got, n.canon())
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("parseLiteral(%q, %v) = %v, want %v", tc.in, tc.prefer, got, tc.want)
		}
	}
}

func TestTraceNestedDecodings(t *testing.T) {
	r := shapesRegistry(t)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	pct := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + hex.EncodeToString([]byte{s[i]}))
		}
		return b.String()
	}
	esc := func(s string) string {
		var b strings.Builder
		for _, c := range s {
			b.WriteString(`\u00` + hex.EncodeToString([]byte{byte(c)}))
		}
		return b.String()
	}
	tests := []struct {
		name, value string
		want        Transform
	}{
		{"base64 of base64", "x=" + b64(b64(secret)), "base64+base64"},
		{"hex of base64", "dump " + hx(b64(secret)), "hex+base64"},
		{"percent of base64", "https://x.example/?d=" + pct(b64(secret)), "percent+base64"},
		{"base64 three deep", b64(b64(b64(secret))), "base64+base64+base64"},
		{"JSON document in a string field", `{"note":"` + esc(iban) + `"}`, TransformJSON},
		{"base64 inside an escaped JSON string", `["` + esc(b64(secret)) + `"]`, "json+base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := r.Trace("/body", tc.value)
			found := false
			for _, m := range tr.Matches {
				found = found || m.Transform == tc.want
			}
			if !found || tr.DecodeLimit {
				t.Fatalf("want a %s match, got %+v (decode limit %v)", tc.want, tr.Matches, tr.DecodeLimit)
			}
			if !ValidTransform(string(tc.want)) {
				t.Fatalf("%q is not a valid transform", tc.want)
			}
			if tr.Authority != Evidence {
				t.Fatalf("authority %v", tr.Authority)
			}
		})
	}
}

// TestTraceDecodeBudgetFailsClosed: an encoding nested deeper than the
// bound leaves the trace truncated, so the value counts as model-made even
// though a trusted source holds the outer text.
func TestTraceDecodeBudgetFailsClosed(t *testing.T) {
	r := NewRegistry(Options{})
	v := secret
	for i := 0; i < MaxDecodeDepth+1; i++ {
		v = base64.StdEncoding.EncodeToString([]byte(v))
	}
	mustRegister(t, r, "prompt", authority.ChannelUserPrompt, Instruction, "send this blob: "+v)
	tr := r.Trace("/body", v)
	if !tr.DecodeLimit || !tr.Truncated || tr.Complete || tr.Authority != Evidence {
		t.Fatalf("over-deep encoding: %+v", tr)
	}
	// One level less is within the bound.
	inner, _ := base64.StdEncoding.DecodeString(v)
	mustRegister(t, r, "prompt2", authority.ChannelUserPrompt, Instruction, "send this blob: "+string(inner))
	if tr := r.Trace("/body", string(inner)); tr.DecodeLimit || tr.Truncated || tr.Authority != Instruction {
		t.Fatalf("encoding within the bound: %+v", tr)
	}
}

func TestValidTransform(t *testing.T) {
	for _, ok := range []string{"raw", "base64", "hex+base64", "percent+base64+base64+hex", "json", "dns_labels+hex",
		"number", "number:EUR", "ident"} {
		if !ValidTransform(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "rot13", "base64+base64+base64+base64+base64", "number:eur", "number:EURO",
		"number:", "base64+", "+hex", "raw+base64", "ident+hex"} {
		if ValidTransform(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTypedNumberProperty: a number written in a source in any of the
// spellings people use (grouping, decimal comma, trailing zeros, a
// currency before or after) is matched by its plain value, and never by
// a different value: the value plus or minus one unit of its last digit,
// or ten times it.
func TestTypedNumberProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	group := func(in string, sep string) string {
		var parts []string
		for len(in) > 3 {
			parts = append([]string{in[len(in)-3:]}, parts...)
			in = in[:len(in)-3]
		}
		return strings.Join(append([]string{in}, parts...), sep)
	}
	for i := 0; i < 300; i++ {
		ip := fmt.Sprint(rng.Intn(1_000_000))
		frac := ""
		if rng.Intn(2) == 0 {
			frac = fmt.Sprintf("%02d", rng.Intn(100))
		}
		plain := ip
		if strings.TrimRight(frac, "0") != "" {
			plain += "." + strings.TrimRight(frac, "0")
		}
		// The source's spelling.
		dec, grp := ".", ","
		if rng.Intn(2) == 0 {
			dec, grp = ",", "."
		}
		lit := ip
		if rng.Intn(2) == 0 {
			lit = group(ip, grp)
		}
		if frac != "" || rng.Intn(3) == 0 {
			f := frac
			if f == "" {
				f = "00"
			}
			lit += dec + f + strings.Repeat("0", rng.Intn(2))
		}
		// A multibyte sign glued to the number (€98.70) hides it from
		// the filters' word keys, for raw and typed matching alike; with
		// a space it is found.
		unit := []string{"", " EUR", " €", "USD ", "$"}[rng.Intn(5)]
		text := "the amount is " + lit + unit + " as agreed"
		switch unit {
		case "USD ", "$":
			text = "the amount is " + unit + lit + " as agreed"
		}
		r := NewRegistry(Options{})
		mustRegister(t, r, "src", authority.ChannelUserPrompt, Instruction, text)
		tr := r.Trace("/amount", plain)
		if tr.Authority != Instruction {
			t.Fatalf("%q in %q: not matched: %+v", plain, text, tr)
		}
		// Near misses: the last digit moved by one, ten times the value.
		last := plain[len(plain)-1] - '0'
		for _, miss := range []string{
			plain[:len(plain)-1] + string('0'+(last+1)%10),
			plain[:len(plain)-1] + string('0'+(last+9)%10),
			plain + "0" + map[bool]string{true: "", false: ".5"}[strings.Contains(plain, ".")],
		} {
			if miss == plain {
				continue
			}
			for _, m := range r.Trace("/amount", miss).Matches {
				if m.Part == "" && m.Mode != ModeFragment {
					// "1.5" and "1.50" are the same number; a miss must
					// differ in value.
					if a, ok := parseValueNumber(miss); ok && a.canon() == plain {
						continue
					}
					t.Fatalf("%q matched %q in %q: %+v", miss, plain, text, m)
				}
			}
		}
	}
}

// TestTraceTimeBudgetFailsClosed: when the matcher's time budget runs out
// (a loaded machine) with a decoding left to do, the value counts as
// model-made whatever a trusted source holds: overload makes the trace
// stricter, never laxer, and never skips the judgement.
func TestTraceTimeBudgetFailsClosed(t *testing.T) {
	r := NewRegistry(Options{})
	v := base64.StdEncoding.EncodeToString([]byte(secret))
	mustRegister(t, r, "prompt", authority.ChannelUserPrompt, Instruction, "send this blob: "+v)
	if tr := r.Trace("/body", v); tr.DecodeLimit || tr.Truncated || tr.Authority != Instruction {
		t.Fatalf("within the budget: %+v", tr)
	}
	saved := decodeTimeBudget
	decodeTimeBudget = -time.Second // spent before the first decoding
	defer func() { decodeTimeBudget = saved }()
	tr := r.Trace("/body", v)
	if !tr.DecodeLimit || !tr.Truncated || tr.Complete || tr.Authority != Evidence {
		t.Fatalf("budget spent: %+v", tr)
	}
}
