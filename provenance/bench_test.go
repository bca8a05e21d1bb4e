package provenance

import (
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/writ-dev/writ/authority"
)

var (
	benchOnce sync.Once
	benchReg  *Registry
)

// benchRegistry fills a default (10 MB) registry with 100 sources of
// pseudo-random prose-like text plus the benchmark shapes.
func benchRegistry(b testing.TB) *Registry {
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
			mustRegister(b, r, fmt.Sprintf("bulk-%03d", i), authority.ChannelToolResult, Evidence, sb.String())
		}
		benchReg = r
	})
	return benchReg
}

// BenchmarkTrace traces single values against the 10 MB registry. Each
// case states whether it matches; ns/trace is per call.
func BenchmarkTrace(b *testing.B) {
	r := benchRegistry(b)
	total, _ := r.Bytes()
	body := strings.Repeat("Hello team, the quarterly report summary is attached for the meeting. ", 25) +
		base64.StdEncoding.EncodeToString([]byte(secret))
	cases := []struct {
		name, field, value string
		match              bool
	}{
		{"iban", "recipient", iban, true},
		{"short_whole_8B", "recipient", "acct-991", false},
		{"short_whole_10B_hit", "date", "2026-03-02", true},
		{"token_2B", "command", "ls", true},
		{"token_5B_hit", "amount", "50.00", true},
		{"token_4B_miss", "command", "qzxv", false},
		{"url", "url", "https://secure-payments-portal.example/verify?x=1", true},
		{"email_body_1.8KB_base64", "body", body, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if tr := r.Trace(tc.field, tc.value); (len(tr.Matches) > 0) != tc.match {
				b.Fatalf("%q: %+v", tc.value, tr.Matches)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Trace(tc.field, tc.value)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/trace")
			b.ReportMetric(float64(total)/(1<<20), "MB_registered")
		})
	}
}

// hookFields is a typical 4-field tool input (a bank transfer): an IBAN
// copied from a tool result (fragment path), an amount copied as a token,
// a date copied whole and a subject the model wrote (whole path, no match).
var hookFields = [][2]string{
	{"/recipient", iban},
	{"/amount", "50.00"},
	{"/date", "2026-03-02"},
	{"/subject", "rent march"},
}

// hookResult is a typical tool result a hook registers (about 5 KB).
var hookResult = strings.Repeat("Transaction 4711 2026-03-02 +50.00 Spotify; balance 1234.56 EUR\n", 80)

// benchFile writes the 10 MB bench registry to a fresh file.
func benchFile(b *testing.B) string {
	path := b.TempDir() + "/reg.bin"
	if err := SaveFile(path, benchRegistry(b)); err != nil {
		b.Fatal(err)
	}
	return path
}

// reportFileSize reports the size of the registry file (after b.Loop,
// which drops metrics reported before it).
func reportFileSize(b *testing.B, path string) {
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/(1<<20), "MB_file")
	}
}

// BenchmarkLoadFile is the first step of every hook invocation.
func BenchmarkLoadFile(b *testing.B) {
	path := benchFile(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadFile(path, 0); err != nil {
			b.Fatal(err)
		}
	}
	reportFileSize(b, path)
}

// BenchmarkSaveFile includes the fsync.
func BenchmarkSaveFile(b *testing.B) {
	path := benchFile(b)
	r, err := LoadFile(path, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := SaveFile(path, r); err != nil {
			b.Fatal(err)
		}
	}
	reportFileSize(b, path)
}

// BenchmarkHookCycle is one hook invocation against a full (10 MB)
// registry: LoadFile, Trace of every field of a 4-field tool input, and
// SaveFile (which the hook does only when it registered something).
func BenchmarkHookCycle(b *testing.B) {
	path := benchFile(b)
	b.ReportAllocs()
	for b.Loop() {
		r, err := LoadFile(path, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range hookFields {
			_ = r.Trace(f[0], f[1])
		}
		if err := SaveFile(path, r); err != nil {
			b.Fatal(err)
		}
	}
	reportFileSize(b, path)
}

// BenchmarkHookCycleRegister is a hook that registers a tool result into
// the full registry (evicting as much) before tracing and saving; the
// file keeps churning from one iteration to the next, as a session's does.
func BenchmarkHookCycleRegister(b *testing.B) {
	path := benchFile(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, err := LoadFile(path, 0)
		if err != nil {
			b.Fatal(err)
		}
		i++
		d, c := src(fmt.Sprintf("result-%d", i%50), authority.ChannelToolResult, Evidence, hookResult)
		if err := r.Register(d, c); err != nil {
			b.Fatal(err)
		}
		for _, f := range hookFields {
			_ = r.Trace(f[0], f[1])
		}
		if err := SaveFile(path, r); err != nil {
			b.Fatal(err)
		}
	}
	reportFileSize(b, path)
}

// BenchmarkRegister registers 5 KB tool results into a full (10 MB)
// registry, evicting as much each time, in steady state: it includes the
// amortized merges and compactions of the indexes.
func BenchmarkRegister(b *testing.B) {
	r, err := LoadFile(benchFile(b), 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		d, c := src(fmt.Sprintf("result-%d", i%50), authority.ChannelToolResult, Evidence, hookResult)
		if err := r.Register(d, c); err != nil {
			b.Fatal(err)
		}
	}
}

var (
	benchFieldsOnce sync.Once
	benchFieldsReg  *Registry
)

// benchFieldsRegistry is a default registry holding 30 structured chat
// results of 400 messages each (about 60 KB of JSON apiece, all kept by
// field) on top of 90 sources of prose, so that a trace consults the
// field index as well as the windows.
func benchFieldsRegistry(b testing.TB) *Registry {
	benchFieldsOnce.Do(func() {
		r := shapesRegistry(b)
		rng := rand.New(rand.NewSource(2))
		words := strings.Fields("the of and to in is you that it he was for on are as with his they at be this " +
			"payment invoice account transfer balance refund memo recipient schedule meeting report summary")
		for i := 0; i < 90; i++ {
			var sb strings.Builder
			for sb.Len() < 80<<10 {
				sb.WriteString(words[rng.Intn(len(words))])
				sb.WriteByte(' ')
			}
			mustRegister(b, r, fmt.Sprintf("bulk-%03d", i), authority.ChannelToolResult, Evidence, sb.String())
		}
		for i := 0; i < 30; i++ {
			var sb strings.Builder
			sb.WriteString(`{"messages":[`)
			for j := 0; j < 400; j++ {
				if j > 0 {
					sb.WriteByte(',')
				}
				fmt.Fprintf(&sb, `{"sender":"user-%d-%d@corp.example","body":"`, i, j%37)
				for k := 0; k < 12; k++ {
					sb.WriteString(words[rng.Intn(len(words))])
					sb.WriteByte(' ')
				}
				fmt.Fprintf(&sb, `ticket %d"}`, rng.Int63())
			}
			sb.WriteString(`]}`)
			d, c := src(fmt.Sprintf("chat-%02d", i), authority.ChannelToolResult, Evidence, sb.String())
			leaves, _ := ResultLeaves(c)
			if err := r.RegisterResult(d, c, leaves); err != nil {
				b.Fatal(err)
			}
		}
		benchFieldsReg = r
	})
	return benchFieldsReg
}

// BenchmarkTraceFields traces values against a registry with structured
// results: an attested sender (equal to a field of several results), a
// phrase inside a body (the containing field is looked for), and the
// shapes of BenchmarkTrace that match nothing kept by field.
func BenchmarkTraceFields(b *testing.B) {
	r := benchFieldsRegistry(b)
	cases := []struct {
		name, value string
		fields      bool
	}{
		{"sender_whole", "user-29-5@corp.example", true},
		{"body_phrase", "", true},
		{"iban", iban, false},
		{"token_2B", "ls", false},
	}
	for _, tc := range cases {
		if tc.value == "" {
			// The ticket number at the end of a body of the newest result:
			// a distinctive run inside a longer field.
			for _, l := range r.sources["chat-29"].leaves {
				if strings.HasSuffix(l.ptr, "/body") {
					tc.value = string(l.norm[len(l.norm)-26:])
					break
				}
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			tr := r.Trace("f", tc.value)
			got := false
			for _, m := range tr.Matches {
				got = got || len(m.Fields) > 0
			}
			if got != tc.fields {
				b.Fatalf("%q: fields %v: %+v", tc.value, got, tr.Matches)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Trace("f", tc.value)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/trace")
		})
	}
}
