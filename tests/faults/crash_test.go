package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// TestCrashRightAfterAnswer is scenario 4: SIGKILL in a loop, each time
// the moment an answer has been sent — the leader alone in some rounds,
// every node at once (a power cut) in others — while workers keep minting
// grants and racing two spenders on each, every request retried with its
// idempotency key until answered. Invariants:
//   - every acknowledged grant and spend survives: after the last restart
//     a retry with the same key returns the same receipt (seq, grant id);
//   - nothing is applied twice: one permit per grant key, one attempt per
//     spend key, at most one attempt per grant;
//   - every answer names the receipt that records it; the stream is whole
//     and the auditor's replay equals every node's state digest;
//   - the spend history is linearizable (porcupine, single-spend model).
func TestCrashRightAfterAnswer(t *testing.T) {
	needFull(t)
	rounds := 2
	if full() {
		rounds = 10
	}
	c := cluster.Start(t, 3)
	h := newHistory()
	answered := make(chan struct{}, 4096)
	var stop atomic.Bool
	var next atomic.Int64
	grantWorker := map[int]string{}
	var gwMu sync.Mutex

	opCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 60*time.Second)
	}
	note := func(r record) record {
		if !r.Unknown() {
			select {
			case answered <- struct{}{}:
			default:
			}
		}
		return r
	}
	var wg sync.WaitGroup
	for w := range 4 {
		worker := fmt.Sprintf("w%d", w+1)
		minter := c.Client(w%3, worker)
		spenders := []*client.Client{c.Client((w+1)%3, worker), c.Client((w+2)%3, worker)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				g := int(next.Add(1))
				gwMu.Lock()
				grantWorker[g] = worker
				gwMu.Unlock()
				key := fmt.Sprintf("c-grant-%d", g)
				m := note(h.do(record{Kind: opGrant, Grant: g, Worker: worker, Key: key, Via: -1}, func() (grants.Envelope, error) {
					ctx, cancel := opCtx()
					defer cancel()
					return minter.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: key})
				}))
				if m.Unknown() || !cluster.IsPermit(m.Env) {
					continue
				}
				var sw sync.WaitGroup
				for s, cl := range spenders {
					sw.Add(1)
					go func() {
						defer sw.Done()
						key := fmt.Sprintf("c-spend-%d-%d", g, s)
						note(h.do(record{Kind: opSpend, Grant: g, Worker: worker, Key: key, Via: -1}, func() (grants.Envelope, error) {
							ctx, cancel := opCtx()
							defer cancel()
							return cl.Spend(ctx, api.SpendRequest{GrantID: m.Env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: key})
						}))
					}()
				}
				sw.Wait()
			}
		}()
	}
	waitAnswers := func(n int) {
		deadline := time.After(60 * time.Second)
		for range n {
			select {
			case <-answered:
			case <-deadline:
				t.Fatalf("fewer than %d answers in 60s", n)
			}
		}
	}
	for r := range rounds {
		// Drain old notifications, then kill on a fresh answer.
		for len(answered) > 0 {
			<-answered
		}
		leader := c.Leader()
		waitAnswers(8)
		if r%2 == 1 {
			c.KillAll()
			t.Logf("round %d: SIGKILL every node right after an answer", r)
			c.RestartAll()
		} else {
			c.Kill(leader)
			t.Logf("round %d: SIGKILL leader %s right after an answer", r, c.Nodes[leader].ID)
			c.Restart(leader)
		}
	}
	waitAnswers(8)
	stop.Store(true)
	wg.Wait()
	c.WaitConverged()
	rs := h.all()
	t.Logf("%d rounds; grants %v; spends %v", rounds, count(rs, opGrant), count(rs, opSpend))

	// Every acknowledged answer survives: retry each with its key.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	clients := map[string]*client.Client{}
	client := func(w string) *client.Client {
		if clients[w] == nil {
			clients[w] = c.Client(c.Leader(), w)
		}
		return clients[w]
	}
	grantEnv := map[int]grants.Envelope{}
	for _, r := range rs {
		if r.Kind == opGrant && !r.Unknown() {
			grantEnv[r.Grant] = r.Env
		}
	}
	for _, r := range rs {
		if r.Unknown() {
			continue
		}
		switch r.Kind {
		case opGrant:
			again, err := client(r.Worker).Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(r.Grant), IdempotencyKey: r.Key})
			if err != nil || again.GrantID != r.Env.GrantID || again.Seq != r.Env.Seq {
				t.Errorf("invariant acknowledged grant survives: %s was %s seq %d, retry %s seq %d (%v)", r.Key, r.Env.GrantID, r.Env.Seq, again.GrantID, again.Seq, err)
			}
		case opSpend:
			if !cluster.IsAttempt(r.Env) {
				continue
			}
			again, err := client(r.Worker).Spend(ctx, api.SpendRequest{GrantID: grantEnv[r.Grant].GrantID, Args: cluster.ArgsFor(r.Grant), IdempotencyKey: r.Key})
			if err != nil || !cluster.IsAttempt(again) || again.Seq != r.Env.Seq {
				t.Errorf("invariant acknowledged spend survives: %s was attempt seq %d, retry %+v (%v)", r.Key, r.Env.Seq, again, err)
			}
		}
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	checkCommitted(t, rs, evs)
	checkOnePerKey(t, evs)
	gwMu.Lock()
	checkAuthority(t, rs, grantWorker)
	gwMu.Unlock()
	checkDigests(t, c)
}
