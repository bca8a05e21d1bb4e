// Package benchcpu reports the process CPU time a benchmark spent per
// operation (cpu-ns/op). On a shared machine wall time per op swings with
// other load; CPU time, garbage collection included, varies far less.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Process is the user+system CPU time of this process so far; 0 if the
// system does not report it.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Meter measures the CPU time from Start to Report.
type Meter struct{ start time.Duration }

// Start begins a measurement.
func Start() Meter { return Meter{Process()} }

// Report adds cpu-ns/op, the CPU time since Start over b.N, to b's results.
func (m Meter) Report(b *testing.B) {
	b.ReportMetric(float64(Process()-m.start)/float64(b.N), "cpu-ns/op")
}
