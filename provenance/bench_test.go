package provenance

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
)

var (
	benchOnce sync.Once
	benchReg  *Registry
)

// benchRegistry fills a default (10 MB) registry with 100 sources of
// pseudo-random prose-like text plus the benchmark shapes.
func benchRegistry(b *testing.B) *Registry {
	benchOnce.Do(func() {
		r := shapesRegistry(b)
		rng := rand.New(rand.NewSource(1))
		words := strings.Fields("the of and to in is you that it he was for on are as with his they at be this " +
			"have from or one had by word but not what all were we when your can said there use an each which she " +
			"payment invoice account transfer balance refund memo recipient schedule meeting report summary")
		for i := 0; i < 100; i++ {
			var sb strings.Builder
			for sb.Len() < 110<<10 {
				sb.WriteString(words[rng.Intn(len(words))])
				if rng.Intn(12) == 0 {
					fmt.Fprintf(&sb, " %d", rng.Int63())
				}
				sb.WriteByte(' ')
			}
			mustRegister(b, r, fmt.Sprintf("bulk-%03d", i), ChannelToolResult, Evidence, sb.String())
		}
		benchReg = r
	})
	return benchReg
}

func BenchmarkTrace(b *testing.B) {
	r := benchRegistry(b)
	total, _ := r.Bytes()
	body := strings.Repeat("Hello team, the quarterly report summary is attached for the meeting. ", 25) +
		base64.StdEncoding.EncodeToString([]byte(secret))
	cases := []struct{ name, field, value string }{
		{"iban", "recipient", iban},
		{"short_whole_8B", "recipient", "acct-991"},
		{"token_2B", "command", "ls"},
		{"url", "url", "https://secure-payments-portal.example/verify?x=1"},
		{"email_body_1.8KB_base64", "body", body},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Trace(tc.field, tc.value)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/trace")
			b.ReportMetric(float64(total)/(1<<20), "MB_registered")
		})
	}
}
