package client

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/benchcpu"
)

// benchAnswers are the issuer's answers to the benchmarked grant and
// spend, as the issuer encodes them.
func benchAnswers() (grant, spend []byte) {
	var d events.Hash
	for i := range d {
		d[i] = byte(i)
	}
	g := grants.Envelope{Decision: grants.Permit, GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Epoch: 1,
		IssuedAt: 1754000000000, ExpiresAt: 1754000060000, Seq: 4242, Kind: events.KindPermit, Digest: d,
		Counters: []events.Counter{{Key: "worker:w1", Value: 0}}, Rules: []string{"lane:coordinator"}}
	s := grants.Envelope{Decision: grants.Permit, GrantID: g.GrantID, Epoch: 1, Seq: 4243, Kind: events.KindAttempt, Digest: d}
	return g.AppendJSON(nil), s.AppendJSON(nil)
}

// BenchmarkClientCall is one Grant and one Spend through Client against
// an in-process responder that answers at once with a permit: the
// client's own cost per call (encoding, subject, attempt deadline, answer
// decoding) plus nats.go's request machinery, on loopback. Each call gets
// a fresh caller context, as worker-agent and the load generators give.
func BenchmarkClientCall(b *testing.B) {
	s := startNATS(b)
	issuer := dial(b, s)
	grantAns, spendAns := benchAnswers()
	for subj, ans := range map[string][]byte{api.WorkerSubject("w1", api.OpGrant): grantAns, api.WorkerSubject("w1", api.OpSpend): spendAns} {
		sub, err := issuer.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond(ans) })
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := issuer.Flush(); err != nil {
		b.Fatal(err)
	}
	c := New(dial(b, s), "w1")
	args := json.RawMessage(`{"command":"go test -run TestX ./...","description":"run the tests","timeout":120000}`)
	calls := map[string]func(ctx context.Context) (grants.Envelope, error){
		"grant": func(ctx context.Context) (grants.Envelope, error) {
			return c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Session: "s-1", Tool: "Bash", Args: args, Sources: []string{"web"}})
		},
		"spend": func(ctx context.Context) (grants.Envelope, error) {
			return c.Spend(ctx, api.SpendRequest{GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Args: args})
		},
	}
	for _, name := range []string{"grant", "spend"} {
		call := calls[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := benchcpu.Start()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				env, err := call(ctx)
				cancel()
				if err != nil || env.Decision != grants.Permit {
					b.Fatalf("%+v %v", env, err)
				}
			}
			cpu.Report(b)
		})
	}
}
