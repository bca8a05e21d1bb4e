package issuer_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/benchcpu"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// benchCallers is how many requests the service benchmarks keep in
// flight: 64 unless -bench-callers says otherwise.
var benchCallers = flag.Int("bench-callers", 64, "requests the service benchmarks keep in flight")

// quiet discards the service's log, which would interleave with the
// benchmark's output.
func quiet(_ *raftnode.Config, c *issuer.Config) {
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
}

// request sends body on subj and decodes the answer.
func request(nc *nats.Conn, subj string, body []byte) (grants.Envelope, error) {
	m, err := nc.Request(subj, body, 10*time.Second)
	if err != nil {
		return grants.Envelope{}, err
	}
	return grants.DecodeEnvelope(m.Data)
}

func grantBody(i int) []byte {
	return fmt.Appendf(nil, `{"v":1,"lane":"coordinator","tool":"Bash","args":{"command":"echo %d"},"idempotency_key":"g-%d"}`, i, i)
}

// parallel runs f(i) for i in [0, b.N) on *benchCallers goroutines,
// timed, and reports the CPU time per request and the p50 and p99 of the
// requests' latencies.
func parallel(b *testing.B, f func(i int) error) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	lat := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchcpu.Start()
	for range max(1, *benchCallers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < b.N; i = int(next.Add(1) - 1) {
				t0 := time.Now()
				if err := f(i); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu.Report(b)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
}

// BenchmarkServiceGrant is the issuer's whole request path for grants on
// a single node with embedded NATS: subject parsing, the goroutine per
// request, decoding, the commit (raft, fsync'd boltdb), the answer.
// Requests are pre-encoded and sent with nats.go's Request, so the client
// adds little; allocs/op counts the whole process (NATS server included).
func BenchmarkServiceGrant(b *testing.B) {
	env := testenv.StartSingle(b, b.TempDir(), quiet)
	nc := dial(b, env.URL)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = grantBody(i)
	}
	subj := api.WorkerSubject("w1", api.OpGrant)
	parallel(b, func(i int) error {
		e, err := request(nc, subj, bodies[i])
		if err == nil && e.Decision != grants.Permit {
			err = fmt.Errorf("grant %d: %+v", i, e)
		}
		return err
	})
}

// BenchmarkServiceSpend is BenchmarkServiceGrant for spends carrying
// their arguments, of grants minted before the timer starts.
func BenchmarkServiceSpend(b *testing.B) {
	env := testenv.StartSingle(b, b.TempDir(), quiet)
	nc := dial(b, env.URL)
	bodies := make([][]byte, b.N)
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		fail atomic.Value
	)
	gsubj := api.WorkerSubject("w1", api.OpGrant)
	for range max(1, *benchCallers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < b.N; i = int(next.Add(1) - 1) {
				e, err := request(nc, gsubj, grantBody(i))
				if err != nil || e.Decision != grants.Permit {
					fail.CompareAndSwap(nil, fmt.Sprintf("grant %d: %+v %v", i, e, err))
					return
				}
				body, _ := json.Marshal(api.SpendRequest{V: api.Version, GrantID: e.GrantID,
					Args: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i)), IdempotencyKey: fmt.Sprintf("s-%d", i)})
				bodies[i] = body
			}
		}()
	}
	wg.Wait()
	if f := fail.Load(); f != nil {
		b.Fatal(f)
	}
	subj := api.WorkerSubject("w1", api.OpSpend)
	parallel(b, func(i int) error {
		e, err := request(nc, subj, bodies[i])
		if err == nil && e.Decision != grants.Permit {
			err = fmt.Errorf("spend %d: %+v", i, e)
		}
		return err
	})
}
