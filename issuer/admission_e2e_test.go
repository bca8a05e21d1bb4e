package issuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// One worker floods well-formed requests that are refused (spends of
// grants that do not exist) while another asks for grants. The flood
// costs a bounded number of receipts: at most the burst, what the rate
// earned while it ran and what was in flight, each decided refusal one
// receipt, and the rest answered rate_limited without being decided and
// recorded as counts in refusal summaries, whose counts add up to the
// requests throttled. Nothing the flooding worker sent was permitted, and
// every grant the other worker asked for was answered with a permit.
func TestAdmissionBoundsARefusalFlood(t *testing.T) {
	const (
		rate, burst = 20, 100
		window      = 250 * time.Millisecond
		senders     = 16
		perSender   = 125 // 2,000 requests
	)
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, ic *issuer.Config) {
		ic.RefusalRate, ic.RefusalBurst, ic.RefusalWindow = rate, burst, window
	})
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testenv.WaitFor(t, testenv.SetupTimeout, "admission control on (receipt format 3)", env.Service.AdmissionOn)

	var seq0 uint64
	env.Node.View(func(st *fsm.State, _ uint64) { seq0 = st.Chain().Seq })

	flood, other := client.New(nc, "w-flood"), client.New(nc, "w-other")
	var decided, throttled atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, senders+1)
	start := time.Now()
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perSender {
				env, err := flood.Spend(ctx, api.SpendRequest{GrantID: fmt.Sprintf("nope-%d-%d", i, j),
					Args: json.RawMessage(`{}`), IdempotencyKey: fmt.Sprintf("k-%d-%d", i, j)})
				switch {
				case err != nil:
					errs <- err
					return
				case env.Decision == grants.Deny && env.Reason == grants.ReasonUnknownGrant && env.Seq != 0:
					decided.Add(1)
				case env.Decision == grants.Deny && env.Reason == grants.ReasonRateLimited &&
					env.Recovery == grants.RecoverRetryLater && env.Seq == 0 && strings.Contains(env.Detail, grants.KeptUndecided):
					throttled.Add(1)
				default:
					errs <- fmt.Errorf("flood answered %+v", env)
					return
				}
			}
		}()
	}
	var permits atomic.Uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := range 20 {
			env, err := other.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash",
				Args: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, j))})
			if err != nil || env.Decision != grants.Permit {
				errs <- fmt.Errorf("the other worker's grant %d: %+v %v", j, env, err)
				return
			}
			permits.Add(1)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if permits.Load() != 20 {
		t.Fatalf("%d of the other worker's 20 grants permitted", permits.Load())
	}
	if decided.Load()+throttled.Load() != senders*perSender || throttled.Load() == 0 {
		t.Fatalf("%d decided and %d throttled of %d", decided.Load(), throttled.Load(), senders*perSender)
	}

	// Every throttled request is counted by a summary, once.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var (
		next                        = seq0 + 1
		counted, summaries, refused uint64
	)
	testenv.WaitFor(t, 30*time.Second, "summaries counting every throttled request", func() bool {
		for {
			m, err := stream.GetMsg(ctx, next)
			if err != nil {
				break
			}
			e, err := events.Decode(m.Data)
			if err != nil {
				t.Fatalf("seq %d: %v", next, err)
			}
			next++
			if e.Worker != "w-flood" {
				continue
			}
			switch e.Kind {
			case events.KindRefusalSummary:
				if e.Tool != api.OpSpend || e.Amount == 0 || e.IssuedAt > e.ExpiresAt || e.Reason != string(grants.ReasonRateLimited) {
					t.Fatalf("summary: %+v", e)
				}
				summaries++
				counted += e.Amount
			case events.KindSpendRefused:
				refused++
			default:
				t.Fatalf("the flood caused a %s receipt: %+v", e.Kind, e)
			}
		}
		return counted >= throttled.Load()
	})
	elapsed := time.Since(start)
	if counted != throttled.Load() {
		t.Fatalf("summaries count %d requests; %d were throttled", counted, throttled.Load())
	}
	if refused != decided.Load() {
		t.Fatalf("%d spend_refused receipts for %d decided refusals", refused, decided.Load())
	}
	// The bound: the burst, what the rate earned while the flood ran, the
	// requests in flight when the bucket ran out, and one summary per
	// window (plus a partial one at each end).
	maxDecided := uint64(burst + rate*elapsed.Seconds() + senders + 1)
	maxSummaries := uint64(elapsed/window) + 2
	t.Logf("2000 refused requests in %v: %d decided, %d throttled in %d summaries", elapsed, decided.Load(), throttled.Load(), summaries)
	if decided.Load() > maxDecided || summaries > maxSummaries {
		t.Fatalf("%d decided refusals (bound %d) and %d summaries (bound %d) in %v", decided.Load(), maxDecided, summaries, maxSummaries, elapsed)
	}
	// The auditor verifies the stream, summaries included, and folds it
	// to the issuer's digest.
	replayToDigest(ctx, t, nc, env.Service.Status())
}
