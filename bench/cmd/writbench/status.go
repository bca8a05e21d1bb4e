package main

import (
	"context"
	"slices"
	"time"

	"github.com/writ-dev/writ/bench/systems"
)

// StatusRun is the status-poller phase: the spend load at Conc runs three
// times, without a poller, with one asking the leader for its status Rate
// times a second, and without again. A status reads the whole state (its
// digest covers every grant), so this is where a status that held the
// state machine's lock would show: in the leader's apply time per entry,
// which includes waiting for that lock.
type StatusRun struct {
	Rate   int      `json:"polls_per_sec_target"`
	Conc   int      `json:"concurrency"`
	Before SpendRun `json:"spend_before"`
	Polled SpendRun `json:"spend_polled"`
	After  SpendRun `json:"spend_after"`
	Polls  Polls    `json:"polls"`
	// Grants is how many grants the leader held when the phase began.
	Grants int `json:"grants_live"`
}

// Polls is what the status poller measured.
type Polls struct {
	Sent     int     `json:"sent"`
	Errors   int     `json:"errors"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
	FirstErr string  `json:"first_err,omitempty"`
}

// pollStatus asks the leader for its status rate times a second, one
// request at a time (a slow answer delays the next), until stop is closed
// or max polls were sent.
func pollStatus(ctx context.Context, w *systems.Writ, rate, max int, stop <-chan struct{}) Polls {
	var p Polls
	var lat []time.Duration
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for p.Sent < max {
		select {
		case <-stop:
			max = 0
			continue
		case <-ctx.Done():
			max = 0
			continue
		case <-tick.C:
		}
		p.Sent++
		t0 := time.Now()
		_, err := w.LeaderStatus()
		if err != nil {
			p.Errors++
			if p.FirstErr == "" {
				p.FirstErr = err.Error()
			}
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		p.P50Ms = float64(lat[min(n-1, n*50/100)]) / 1e6
		p.P99Ms = float64(lat[min(n-1, n*99/100)]) / 1e6
		p.MaxMs = float64(lat[n-1]) / 1e6
	}
	return p
}

// statusPoll runs the status-poller phase on writ.
func (r *Runner) statusPoll(ctx context.Context, w *systems.Writ) {
	c := r.P.StatusConc
	sr := StatusRun{Rate: r.P.StatusRate, Conc: c}
	if st, err := w.LeaderStatus(); err == nil {
		sr.Grants = st.Grants
	}
	sr.Before = r.spendRun(ctx, w, c)
	logf("writ status: spend c=%d without a poller: %s", c, sr.Before.Spend)
	stop := make(chan struct{})
	done := make(chan Polls, 1)
	maxPolls := r.P.StatusRate * int(r.P.Limit/time.Second)
	go func() { done <- pollStatus(ctx, w, r.P.StatusRate, maxPolls, stop) }()
	sr.Polled = r.spendRun(ctx, w, c)
	close(stop)
	sr.Polls = <-done
	logf("writ status: spend c=%d with %d status polls/s: %s; polls %d (errors %d) p50 %.2fms p99 %.2fms",
		c, r.P.StatusRate, sr.Polled.Spend, sr.Polls.Sent, sr.Polls.Errors, sr.Polls.P50Ms, sr.Polls.P99Ms)
	sr.After = r.spendRun(ctx, w, c)
	logf("writ status: spend c=%d without a poller, again: %s", c, sr.After.Spend)
	r.rep.Status = &sr
}

// leaderStage is one stage's mean on the run's leader, in milliseconds
// (0 without stage timings).
func leaderStage(run *SpendRun, key string) float64 {
	if run.StagesLeader < 0 || run.StagesLeader >= len(run.Stages) {
		return 0
	}
	return run.Stages[run.StagesLeader][key].Mean() * 1e3
}
