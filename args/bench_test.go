package args_test

import (
	"testing"

	"github.com/writ-dev/writ/args"
)

// BenchmarkFlattenArgs is the leader's share: canonicalize and flatten a
// call's arguments.
func BenchmarkFlattenArgs(b *testing.B) {
	raw := []byte(`{"command":"go test -race ./... 2>&1 | tail -n 40","description":"run the tests","timeout":120000}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := args.Flatten(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlattenCanonicalArgs is what the leader pays per request once
// the arguments are canonical and need no escapes (it flattens their
// canonical form): the decoder-free walk.
func BenchmarkFlattenCanonicalArgs(b *testing.B) {
	benchFlattenCanonical(b, `{"command":"go test -race ./... | tail -n 40","description":"run the tests","timeout":120000}`)
}

// BenchmarkFlattenCanonicalEscapedArgs is BenchmarkFlattenCanonicalArgs
// for the common shell command whose canonical form holds escapes
// (encoding/json writes "2>&1" as "2\u003e\u00261").
func BenchmarkFlattenCanonicalEscapedArgs(b *testing.B) {
	benchFlattenCanonical(b, `{"command":"go test -race ./... 2>&1 | tail -n 40","description":"run the tests","timeout":120000}`)
}

// benchFlattenCanonical flattens the canonical form of doc.
func benchFlattenCanonical(b *testing.B, doc string) {
	raw, err := args.CanonicalJSON([]byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := args.Flatten(raw); err != nil {
			b.Fatal(err)
		}
	}
}
