package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/bench/load"
	"github.com/writ-dev/writ/bench/systems"
)

// RouteRun is the heartbeat phase: Routes route leases are acquired, then
// the spend load at concurrency Conc runs three times: without renewals,
// with heartbeats renewing the routes at Rate renewals/s (open loop: each
// renewal is sent at its scheduled time, whatever the answers), and
// without again. The drop compares the loaded run with the mean of the two
// quiet ones (so that a cluster slowing down over the run is not counted
// against the renewals).
type RouteRun struct {
	Routes   int         `json:"routes"`
	Rate     int         `json:"renewals_per_sec_target"`
	Conc     int         `json:"concurrency"`
	Acquire  load.Result `json:"acquire"`
	Before   SpendRun    `json:"spend_before"`
	Loaded   SpendRun    `json:"spend_with_renewals"`
	After    SpendRun    `json:"spend_after"`
	Renewals Renewals    `json:"renewals"`
	// DropPct is how much lower the loaded spend throughput is than the
	// quiet runs' mean, in percent (negative: higher).
	DropPct float64 `json:"spend_throughput_drop_pct"`
}

// Renewals is what the heartbeat load measured.
type Renewals struct {
	Sent    int     `json:"sent"`
	OK      int     `json:"ok"`
	Refused int     `json:"refused"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"` // answered renewals per second
	// Late counts renewals sent more than 10ms after their scheduled time
	// (the in-flight cap was reached, or this process could not keep up).
	Late     int     `json:"late"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	FirstErr string  `json:"first_err,omitempty"`
}

// maxRenewalsInFlight bounds the heartbeat load's concurrency.
const maxRenewalsInFlight = 256

// heartbeats renews routes 0..routes-1 round-robin at rate per second from
// now until stop is closed, at most max renewals, and returns what it
// measured once every renewal sent has been answered (or timed out).
func heartbeats(ctx context.Context, w *systems.Writ, routes, rate, max int, stop <-chan struct{}) Renewals {
	var (
		mu       sync.Mutex
		lat      []int64
		ok, ref  atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
		sem      = make(chan struct{}, maxRenewalsInFlight)
		r        Renewals
	)
	period := time.Second / time.Duration(rate)
	start := time.Now()
loop:
	for k := 0; k < max; k++ {
		at := start.Add(time.Duration(k) * period)
		if d := time.Until(at); d > 0 {
			select {
			case <-stop:
				break loop
			case <-ctx.Done():
				break loop
			case <-time.After(d):
			}
		} else {
			select {
			case <-stop:
				break loop
			default:
			}
		}
		sem <- struct{}{}
		if time.Since(at) > 10*time.Millisecond {
			r.Late++
		}
		r.Sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			octx, cancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			good, err := w.RenewRoute(octx, k%routes)
			d := time.Since(t0)
			cancel()
			switch {
			case err != nil:
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			case good:
				ok.Add(1)
			default:
				ref.Add(1)
			}
			mu.Lock()
			lat = append(lat, int64(d))
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.OK, r.Refused, r.Errors = int(ok.Load()), int(ref.Load()), int(errs.Load())
	if r.Seconds > 0 {
		r.PerSec = float64(r.OK+r.Refused) / r.Seconds
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.P50Ms = float64(lat[min(n-1, n*50/100)]) / 1e6
		r.P99Ms = float64(lat[min(n-1, n*99/100)]) / 1e6
		r.MaxMs = float64(lat[n-1]) / 1e6
	}
	if v, ok := firstErr.Load().(string); ok {
		r.FirstErr = v
	}
	return r
}

// routes runs the heartbeat phase on writ.
func (r *Runner) routes(ctx context.Context, w *systems.Writ) {
	c, n := r.P.RouteConc, r.P.RouteN
	rr := RouteRun{Routes: n, Rate: r.P.RenewRate, Conc: c}
	logf("writ routes: acquiring %d heartbeat routes", n)
	rr.Acquire = load.Run(ctx, n, 64, r.P.Limit, 30*time.Second, w.AcquireRoute)
	logf("writ routes: acquire %s", rr.Acquire)
	if rr.Acquire.OK < n {
		logf("writ routes: only %d of %d routes acquired; renewals of the others are refused", rr.Acquire.OK, n)
	}
	rr.Before = r.spendRun(ctx, w, c)
	logf("writ routes: spend c=%d without renewals: %s", c, rr.Before.Spend)

	stop := make(chan struct{})
	done := make(chan Renewals, 1)
	// Bounded: at most the rate for three time bounds of a spend run.
	maxRenewals := r.P.RenewRate * int(3*r.P.Limit/time.Second)
	go func() { done <- heartbeats(ctx, w, n, r.P.RenewRate, maxRenewals, stop) }()
	rr.Loaded = r.spendRun(ctx, w, c)
	close(stop)
	rr.Renewals = <-done
	logf("writ routes: spend c=%d with %d renewals/s: %s", c, r.P.RenewRate, rr.Loaded.Spend)
	logf("writ routes: renewals sent %d (late %d): ok %d refused %d errors %d, %.0f/s, p50 %.2fms p99 %.2fms",
		rr.Renewals.Sent, rr.Renewals.Late, rr.Renewals.OK, rr.Renewals.Refused, rr.Renewals.Errors, rr.Renewals.PerSec, rr.Renewals.P50Ms, rr.Renewals.P99Ms)

	rr.After = r.spendRun(ctx, w, c)
	logf("writ routes: spend c=%d without renewals, again: %s", c, rr.After.Spend)
	if quiet := (rr.Before.Spend.PerSec + rr.After.Spend.PerSec) / 2; quiet > 0 {
		rr.DropPct = (1 - rr.Loaded.Spend.PerSec/quiet) * 100
	}
	r.rep.Routes = &rr
}
