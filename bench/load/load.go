// Package load is the one load driver every system in the benchmark goes
// through: a fixed number of operations, a fixed number of concurrent
// callers, a time bound, and a latency for every operation.
package load

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op performs operation i. ok reports a success in the sense of the
// benchmark (a minted ticket, a spend that won); err is a failure of the
// system (timeout, unavailable), counted apart from refusals.
type Op func(ctx context.Context, i int) (ok bool, err error)

// Result is what one run measured.
type Result struct {
	Ops      int     `json:"ops"`       // operations issued (== wanted unless the time bound hit)
	Wanted   int     `json:"wanted"`    // operations asked for
	OK       int     `json:"ok"`        // successes
	Refused  int     `json:"refused"`   // completed, not a success
	Errors   int     `json:"errors"`    // failed (err != nil)
	Conc     int     `json:"conc"`      // concurrent callers
	Seconds  float64 `json:"seconds"`   // wall time of the run
	PerSec   float64 `json:"per_sec"`   // Ops / Seconds
	P50Ms    float64 `json:"p50_ms"`    // latency percentiles over every op
	P99Ms    float64 `json:"p99_ms"`    //
	MaxMs    float64 `json:"max_ms"`    //
	TimedOut bool    `json:"timed_out"` // the time bound stopped the run early
	FirstErr string  `json:"first_err,omitempty"`
}

func (r Result) String() string {
	s := fmt.Sprintf("%d ops (ok %d, refused %d, errors %d) at c=%d in %.2fs: %.0f/s p50 %.2fms p99 %.2fms max %.1fms",
		r.Ops, r.OK, r.Refused, r.Errors, r.Conc, r.Seconds, r.PerSec, r.P50Ms, r.P99Ms, r.MaxMs)
	if r.TimedOut {
		s += fmt.Sprintf(" (TIME BOUND HIT: %d of %d issued)", r.Ops, r.Wanted)
	}
	if r.FirstErr != "" {
		s += " first error: " + r.FirstErr
	}
	return s
}

// Run performs ops operations with conc concurrent callers, each taking the
// next index in order, and stops issuing new ones when limit passes. Every
// operation gets its own context bounded by opTimeout.
func Run(ctx context.Context, ops, conc int, limit, opTimeout time.Duration, op Op) Result {
	if conc < 1 {
		conc = 1
	}
	lat := make([]int64, ops)
	done := make([]bool, ops)
	var (
		next            atomic.Int64
		okN, refN, errN atomic.Int64
		firstErr        atomic.Value
		wg              sync.WaitGroup
		timedOut        atomic.Bool
		deadline        = time.Now().Add(limit)
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= ops || ctx.Err() != nil {
					return
				}
				if time.Now().After(deadline) {
					timedOut.Store(true)
					return
				}
				octx, cancel := context.WithTimeout(ctx, opTimeout)
				t0 := time.Now()
				ok, err := op(octx, i)
				lat[i] = int64(time.Since(t0))
				cancel()
				done[i] = true
				switch {
				case err != nil:
					errN.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case ok:
					okN.Add(1)
				default:
					refN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var ls []int64
	for i, d := range done {
		if d {
			ls = append(ls, lat[i])
		}
	}
	slices.Sort(ls)
	r := Result{
		Ops: len(ls), Wanted: ops, OK: int(okN.Load()), Refused: int(refN.Load()), Errors: int(errN.Load()),
		Conc: conc, Seconds: el.Seconds(), TimedOut: timedOut.Load(),
	}
	if r.Seconds > 0 {
		r.PerSec = float64(r.Ops) / r.Seconds
	}
	if n := len(ls); n > 0 {
		r.P50Ms = ms(ls[pct(n, 0.50)])
		r.P99Ms = ms(ls[pct(n, 0.99)])
		r.MaxMs = ms(ls[n-1])
	}
	if v, ok := firstErr.Load().(string); ok {
		r.FirstErr = v
	}
	return r
}

func pct(n int, p float64) int {
	i := int(float64(n)*p+0.5) - 1
	return max(0, min(i, n-1))
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }
