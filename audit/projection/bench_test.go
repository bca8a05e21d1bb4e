package projection

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/writ-dev/writ/internal/testing/receipts"
)

var benchRaw = sync.OnceValue(func() [][]byte {
	m := receipts.NewSim(&testing.T{})
	receipts.Workload(m, 9, 20000)
	return m.Raw()
})

// BenchmarkProject reports receipts/s projected into a bbolt file (fold,
// checks, indexes, commits every DefaultConfig().CommitEvery receipts).
func BenchmarkProject(b *testing.B) {
	raw := benchRaw()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		b.StopTimer()
		d, err := Open(DefaultConfig(filepath.Join(b.TempDir(), "bench.db")))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, r := range raw {
			if n == b.N {
				break
			}
			if err := d.Apply(r, 0); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}
