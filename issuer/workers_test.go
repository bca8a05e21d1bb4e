package issuer_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
)

// Requests served by the worker goroutines still share raft entries when
// they arrive together; the goroutines they leave idle, never more than
// MaxIdleWorkers, serve later requests; and every idle one ends when the
// service stops.
func TestWorkerGoroutinesBatchStayIdleAndEnd(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), quiet)
	nc := dial(t, env.URL)
	subj := api.WorkerSubject("w1", api.OpGrant)
	next := 0
	round := func(n int) (entries uint64) {
		t.Helper()
		before := env.Node.Raft().LastIndex()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				e, err := request(nc, subj, grantBody(i))
				if err == nil && e.Decision != grants.Permit {
					err = fmt.Errorf("grant %d: %+v", i, e)
				}
				if err != nil {
					errs <- err
				}
			}(next + i)
		}
		next += n
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return env.Node.Raft().LastIndex() - before
	}
	const n = 64
	for r := range 3 {
		// Publication marks add a few entries of their own; n grants
		// in n entries would mean each had one to itself.
		entries := round(n)
		t.Logf("round %d: %d concurrent grants in %d raft entries", r, n, entries)
		if entries > n/2 {
			t.Fatalf("round %d: %d concurrent grants took %d raft entries", r, n, entries)
		}
		testenv.WaitFor(t, 5*time.Second, "idle worker goroutines", func() bool {
			return env.Service.IdleWorkers() > 0
		})
	}
	round(issuer.MaxIdleWorkers + 64)
	testenv.WaitFor(t, 5*time.Second, "idle worker goroutines", func() bool {
		return env.Service.IdleWorkers() > 0
	})
	if idle := env.Service.IdleWorkers(); idle > issuer.MaxIdleWorkers {
		t.Fatalf("%d idle worker goroutines, more than %d", idle, issuer.MaxIdleWorkers)
	}
	env.Stop()
	testenv.WaitFor(t, 5*time.Second, "idle worker goroutines to end", func() bool {
		return env.Service.IdleWorkers() == 0
	})
}
