package args

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestFlattenCanonicalMatchesGeneral: on certified canonical documents
// the decoder-free walk gives exactly the general path's Flat, and it
// declines (so the general path words the error) where that path refuses.
func TestFlattenCanonicalMatchesGeneral(t *testing.T) {
	long := strings.Repeat("y", MaxString+1)
	// Escaped strings over MaxString raw: one that decodes to more than
	// MaxString bytes (elided, hashed decoded) and one that decodes to
	// exactly MaxString (carried).
	longEscaped := strings.Repeat(`\u003c`, MaxString/3) + strings.Repeat("z", MaxString%3+MaxString/3*2+1)
	fitsEscaped := strings.Repeat(`\n`, MaxString)
	deep := strings.Repeat(`{"abcdefghijklmnopqrst":`, 60) + "1" + strings.Repeat("}", 60)
	manyLeaves := "[" + strings.TrimSuffix(strings.Repeat("1,", MaxLeaves+1), ",") + "]"
	for _, tc := range []struct {
		name    string
		doc     string
		fast    bool // the walk answers (else it declines)
		generrs bool // the general path refuses
	}{
		{"object", `{"a":[1,{"b":null}],"c":"d"}`, true, false},
		{"pointer escapes", `{"a/b":{"~":true},"~1":false}`, true, false},
		{"scalar string", `"hi"`, true, false},
		{"scalar number", `-12.5`, true, false},
		{"empty object", `{}`, true, false},
		{"empty array", `[]`, true, false},
		{"nested arrays", `[[],[[0]],[1,2,3,4,5,6,7,8,9,10,11]]`, true, false},
		{"unicode", `{"k":"héllo ✓"}`, true, false},
		{"elided", `{"body":"` + long + `"}`, true, false},
		{"shell command", `{"command":"go test ./... 2\u003e\u00261 \u0026\u0026 echo \u003cx\u003e","timeout":120000}`, true, false},
		{"control characters", `{"s":"a\b\f\n\r\tb\u0000\u0001\u001f"}`, true, false},
		{"DEL and U+FFFD", "{\"s\":\"\x7f\ufffd\"}", true, false},
		{"line separators", `["\u2028","x\u2029y","\u2028\u2029"]`, true, false},
		{"quotes and backslashes", `{"s":"say \"hi\" C:\\dir\\","t":"\\","u":"\""}`, true, false},
		{"escaped keys", `{"\"":1,"\u0026\u0026":{"a\\b":"c"},"\u003c/\u003e":"~","~\n":[true]}`, true, false},
		{"escaped key sorted before plain", `{"!":0,"\"":1,"#":2}`, true, false},
		{"line separator key", `{"a\u2028":1,"a\u2029":2,"a` + "\uffff" + `":3}`, true, false},
		{"escaped scalar", `"\u003cb\u003e"`, true, false},
		{"escaped elided", `{"body":"` + longEscaped + `","x":"\u0026"}`, true, false},
		{"escaped fits", `{"body":"` + fitsEscaped + `"}`, true, false},
		{"escaped elided scalar", `"` + longEscaped + `"`, true, false},
		{"path too long", deep, false, true},
		{"too many values", manyLeaves, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.doc)
			if !IsCanonical(raw) {
				t.Fatalf("test document is not canonical: %.80s", tc.doc)
			}
			fast, ok := flattenCanonical(raw)
			general, err := flattenGeneral(raw)
			if ok != tc.fast {
				t.Fatalf("walk answered = %v, want %v", ok, tc.fast)
			}
			if (err != nil) != tc.generrs {
				t.Fatalf("general path error = %v, want error %v", err, tc.generrs)
			}
			if ok && !reflect.DeepEqual(fast, general) {
				t.Fatalf("walk = %.300q\ngeneral = %.300q", fmt.Sprint(fast), fmt.Sprint(general))
			}
		})
	}
}

// FuzzFlattenCanonical: for any document the certifier accepts, and for
// the canonical form of any document that has one (which the certifier
// must accept, escapes and all), the walk either declines or agrees with
// the general path exactly, and declines only where the general path
// refuses.
func FuzzFlattenCanonical(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,{"b":null}],"c":"d"}`, `[]`, `"x"`, `{"~/":1}`, `[true,false,null,-0.5]`,
		`{"command":"make 2\u003e\u00261 \u0026\u0026 echo \u003cok\u003e"}`, `"\"\\\b\f\n\r\t\u0000\u001f\u2028\u2029"`,
		`{"\"":1,"\u0026~/":{"\n":"\u003c"}}`, "[\"\x7f\ufffd\"]", `{"z":"<&>", "\u0022":"\/", "a\u00e9":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// Flatten, whichever path it takes, answers as the general
		// path does: the same Flat, or an error exactly when it errs.
		got, gotErr := Flatten(raw)
		want, wantErr := flattenGeneral(raw)
		if (gotErr != nil) != (wantErr != nil) || gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Flatten = %+v, %v; general path = %+v, %v", got, gotErr, want, wantErr)
		}
		if !IsCanonical(raw) {
			if _, ok := flattenCanonical(raw); ok && len(raw) > MaxBytes {
				t.Fatalf("walked an oversized document")
			}
			canon, err := CanonicalJSON(raw)
			if err != nil {
				return
			}
			if !IsCanonical(canon) {
				t.Fatalf("canonical form %q of %q is not certified", canon, raw)
			}
			raw = canon
		}
		fast, ok := flattenCanonical(raw)
		general, err := flattenGeneral(raw)
		if !ok {
			if err == nil {
				t.Fatalf("walk declined a document the general path flattens")
			}
			return
		}
		if err != nil || !reflect.DeepEqual(fast, general) {
			t.Fatalf("walk = %+v, general = %+v, %v", fast, general, err)
		}
	})
}
