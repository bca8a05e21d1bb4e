package faults

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// TestRetryStormAcrossLeaderChange is scenario 9: thousands of duplicate
// requests with one idempotency key, through every node's server, while
// the leader is killed (during the grant storm) and stopped (during the
// spend storm). Invariants: every duplicate grant request is answered with
// the same grant id and seq; every duplicate spend with the same attempt
// seq; the log holds exactly one permit for the key and one attempt for
// the grant; the stream is whole and audits clean.
func TestRetryStormAcrossLeaderChange(t *testing.T) {
	needFull(t)
	n := 300
	if full() {
		n = 2000
	}
	c := cluster.Start(t, 3)
	worker := "storm"
	var clients []*client.Client
	for i := range c.Nodes {
		for range 4 {
			clients = append(clients, c.Client(i, worker))
		}
	}
	const grantKey, spendKey = "storm-grant", "storm-spend"

	storm := func(what string, down func(), f func(ctx context.Context, cl *client.Client) (grants.Envelope, error)) []grants.Envelope {
		out := make([]grants.Envelope, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		var issued atomic.Int64
		sem := make(chan struct{}, 256)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				issued.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				out[i], errs[i] = f(ctx, clients[i%len(clients)])
			}()
		}
		for issued.Load() < int64(n/3) {
			time.Sleep(time.Millisecond)
		}
		begin := time.Now()
		down()
		wg.Wait()
		unknown := 0
		for i, err := range errs {
			if err != nil {
				unknown++
				if unknown < 5 {
					t.Errorf("invariant every duplicate is answered: %s request %d: %v", what, i, err)
				}
			}
		}
		t.Logf("%s storm: %d duplicates, leader change at 1/3, done %s after it; %d unanswered", what, n, time.Since(begin).Round(time.Millisecond), unknown)
		return out
	}

	l1 := c.Leader()
	grantsOut := storm("grant", func() { c.Kill(l1) }, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
		return cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(1), IdempotencyKey: grantKey})
	})
	first := grantsOut[0]
	for i, env := range grantsOut {
		if !cluster.IsPermit(env) || env.GrantID != first.GrantID || env.Seq != first.Seq {
			t.Fatalf("invariant one grant per key: duplicate %d answered %+v, duplicate 0 %+v", i, env, first)
		}
	}
	c.Restart(l1)
	l2 := c.Leader()
	spendsOut := storm("spend", func() { c.Stop(l2) }, func(ctx context.Context, cl *client.Client) (grants.Envelope, error) {
		return cl.Spend(ctx, api.SpendRequest{GrantID: first.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: spendKey})
	})
	for i, env := range spendsOut {
		if !cluster.IsAttempt(env) || env.Seq != spendsOut[0].Seq {
			t.Fatalf("invariant one spend per key: duplicate %d answered %+v, duplicate 0 %+v", i, env, spendsOut[0])
		}
	}
	c.Restart(l2)
	evs := c.CheckedStream(t, c.WaitPublished())
	permits, attempts := 0, 0
	for _, e := range evs {
		switch {
		case e.Kind == events.KindPermit && e.IdemKey == grantKey:
			permits++
			if e.Seq != first.Seq {
				t.Errorf("the permit for %s is at seq %d, the answers said %d", grantKey, e.Seq, first.Seq)
			}
		case e.Kind == events.KindAttempt && e.GrantID == first.GrantID:
			attempts++
		}
	}
	if permits != 1 || attempts != 1 {
		t.Errorf("invariant one grant and one spend: %d permits for the key, %d attempts of the grant", permits, attempts)
	}
	checkOnePerKey(t, evs)
	checkDigests(t, c)
}
