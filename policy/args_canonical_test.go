package policy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
)

// TestFlattenCanonicalMatchesGeneral: on certified canonical documents
// the decoder-free walk gives exactly the general path's Args, and it
// declines (so the general path words the error) where that path refuses.
func TestFlattenCanonicalMatchesGeneral(t *testing.T) {
	long := strings.Repeat("y", MaxArgString+1)
	deep := strings.Repeat(`{"abcdefghijklmnopqrst":`, 60) + "1" + strings.Repeat("}", 60)
	manyLeaves := "[" + strings.TrimSuffix(strings.Repeat("1,", MaxArgLeaves+1), ",") + "]"
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
		{"path too long", deep, false, true},
		{"too many values", manyLeaves, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.doc)
			if !grants.IsCanonical(raw) {
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
				t.Fatalf("walk = %+v\ngeneral = %+v", fast, general)
			}
		})
	}
}

// FuzzFlattenCanonical: for any document the certifier accepts, the walk
// either declines or agrees with the general path exactly, and declines
// only where the general path refuses.
func FuzzFlattenCanonical(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"d"}`, `[]`, `"x"`, `{"~/":1}`, `[true,false,null,-0.5]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !grants.IsCanonical(raw) {
			if _, ok := flattenCanonical(raw); ok && len(raw) > grants.MaxArgsBytes {
				t.Fatalf("walked an oversized document")
			}
			return
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
