package load

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsEveryOperationOnce(t *testing.T) {
	var calls atomic.Int64
	seen := make([]atomic.Int32, 1000)
	r := Run(context.Background(), 1000, 16, time.Minute, time.Second, func(_ context.Context, i int) (bool, error) {
		calls.Add(1)
		seen[i].Add(1)
		switch {
		case i%10 == 0:
			return false, errors.New("boom")
		case i%2 == 0:
			return false, nil
		}
		return true, nil
	})
	if calls.Load() != 1000 || r.Ops != 1000 || r.Wanted != 1000 || r.TimedOut {
		t.Fatalf("calls %d, result %+v", calls.Load(), r)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("op %d ran %d times", i, seen[i].Load())
		}
	}
	if r.OK != 500 || r.Errors != 100 || r.Refused != 400 || r.FirstErr != "boom" {
		t.Fatalf("ok %d refused %d errors %d first %q", r.OK, r.Refused, r.Errors, r.FirstErr)
	}
	if r.P50Ms > r.P99Ms || r.P99Ms > r.MaxMs || r.PerSec <= 0 {
		t.Fatalf("percentiles out of order: %+v", r)
	}
}

func TestRunStopsAtTheTimeBound(t *testing.T) {
	r := Run(context.Background(), 1_000_000, 4, 50*time.Millisecond, time.Second, func(context.Context, int) (bool, error) {
		time.Sleep(time.Millisecond)
		return true, nil
	})
	if !r.TimedOut || r.Ops >= r.Wanted || r.Ops == 0 || r.OK != r.Ops {
		t.Fatalf("want a run cut short by the time bound, got %+v", r)
	}
}
