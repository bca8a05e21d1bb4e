package issuer

import (
	"strings"
	"testing"
)

// Request decoding as the spend path pays it, per body: a grant request
// (lane, tool, sources, idempotency key) and a spend carrying the call's
// args. writ's clients (the hook harness, worker-agent) send args in
// canonical form; other clients may send them as the tool produced them.
const (
	benchGrantBody = `{"v":1,"lane":"coordinator","session":"s-1","tool":"Bash","args":ARGS,"idempotency_key":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60","sources":["web"]}`
	benchSpendBody = `{"v":1,"grant_id":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61","args":ARGS,"idempotency_key":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f62"}`
	// benchEffectBody reports the outcome of the spend above.
	benchEffectBody = `{"v":1,"grant_id":"0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61","outcome":"confirmed","verifier":"exit-code"}`
)

var benchArgs = map[string]string{
	"canonical": `{"command":"go test -run TestX ./...","description":"run the tests","timeout":120000}`,
	"raw":       `{"description": "run the tests", "command": "go test -run TestX ./...", "timeout": 1.2e5}`,
}

func BenchmarkGrantCommand(b *testing.B) {
	for _, kind := range []string{"canonical", "raw"} {
		body := []byte(strings.Replace(benchGrantBody, "ARGS", benchArgs[kind], 1))
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, e := grantCommand("w1", body); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

func BenchmarkSpendCommand(b *testing.B) {
	for _, kind := range []string{"canonical", "raw"} {
		body := []byte(strings.Replace(benchSpendBody, "ARGS", benchArgs[kind], 1))
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, e := spendCommand("w1", body); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

func BenchmarkEffectCommand(b *testing.B) {
	body := []byte(benchEffectBody)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := effectCommand("w1", body); e != nil {
			b.Fatal(e)
		}
	}
}
