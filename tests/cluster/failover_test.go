package clustertests

import (
	"context"
	"fmt"
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

// op is one client call in the failover test.
type op struct {
	kind       string // "grant" or "spend"
	grant      int    // the worker's grant number
	key        string // idempotency key
	env        grants.Envelope
	err        error
	call, done time.Time
}

// TestLeaderKilledMidSpend checks that SIGKILLing the leader while grants
// and spends are in flight neither loses nor doubles anything. Workers mint
// grants and race two spenders (different keys) on each, every request
// retried by client.Client with its idempotency key until answered (30s).
// Invariants, once a new leader serves:
//   - every request was eventually answered;
//   - no grant has two attempts (answers and stream), each has exactly one;
//   - every acknowledged permit and attempt is in the stream at the seq it
//     was answered with;
//   - a retry with the same idempotency key after failover returns the
//     original answer (same seq, same grant id);
//   - the stream is whole: seqs 1..last, event seq == stream seq, hash
//     chain intact, no duplicates, and the auditor finds no violation and
//     replays to the leader's state digest;
//   - the killed node, restarted, converges to the same seq and digest.
func TestLeaderKilledMidSpend(t *testing.T) {
	failover(t, "SIGKILL", func(c *cluster.Cluster, i int) { c.Kill(i) })
}

// TestLeaderStoppedMidSpend is TestLeaderKilledMidSpend with a graceful
// stop (SIGTERM) of the leader: the same invariants hold, and the node must
// exit cleanly.
func TestLeaderStoppedMidSpend(t *testing.T) {
	failover(t, "SIGTERM", func(c *cluster.Cluster, i int) { c.Stop(i) })
}

func failover(t *testing.T, how string, down func(c *cluster.Cluster, i int)) {
	const (
		nWorkers  = 6
		perWorker = 12
		total     = nWorkers * perWorker
	)
	c := cluster.Start(t, 3)
	victim := c.Leader()

	var (
		mu      sync.Mutex
		ops     []*op
		started atomic.Int64 // grants whose spends have been answered
		wg      sync.WaitGroup
	)
	record := func(o *op) {
		mu.Lock()
		ops = append(ops, o)
		mu.Unlock()
	}
	call := func(o *op, f func(context.Context) (grants.Envelope, error)) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		o.call = time.Now()
		o.env, o.err = f(ctx)
		o.done = time.Now()
		record(o)
	}
	for w := range nWorkers {
		// Each worker's grants go through one node and its two spenders
		// through the other two, so some clients are connected to the
		// victim's NATS server and must fail over.
		minter := c.Client(w%3, worker)
		spenders := []*client.Client{c.Client((w+1)%3, worker), c.Client((w+2)%3, worker)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perWorker {
				g := w*perWorker + k
				m := &op{kind: "grant", grant: g, key: fmt.Sprintf("grant-%d", g)}
				call(m, func(ctx context.Context) (grants.Envelope, error) {
					return minter.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: m.key})
				})
				if m.err != nil || !cluster.IsPermit(m.env) {
					continue // reported below
				}
				var sw sync.WaitGroup
				for s, cl := range spenders {
					sw.Add(1)
					go func() {
						defer sw.Done()
						o := &op{kind: "spend", grant: g, key: fmt.Sprintf("spend-%d-%d", g, s)}
						call(o, func(ctx context.Context) (grants.Envelope, error) {
							return cl.Spend(ctx, api.SpendRequest{GrantID: m.env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: o.key})
						})
					}()
				}
				sw.Wait()
				started.Add(1)
			}
		}()
	}

	// Kill the leader once a quarter of the work is done.
	deadline := time.Now().Add(60 * time.Second)
	for started.Load() < total/4 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d grants done after 60s before the kill", started.Load(), total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	killedAt := time.Now()
	down(c, victim)
	t.Logf("%s to leader %s after %d grants (took %s)", how, c.Nodes[victim].ID, started.Load(), time.Since(killedAt))
	wg.Wait()
	newLeader := c.Leader()
	if newLeader == victim {
		t.Fatalf("invariant a new leader: %s still leads", c.Nodes[victim].ID)
	}

	// Answers.
	mintEnv := map[int]grants.Envelope{}
	spends := map[int][]*op{}
	spanning, slowest, blocked := 0, time.Duration(0), time.Duration(0)
	for _, o := range ops {
		if o.call.Before(killedAt) && o.done.After(killedAt) {
			spanning++
			blocked = max(blocked, o.done.Sub(killedAt))
		}
		slowest = max(slowest, o.done.Sub(o.call))
		if o.err != nil {
			t.Errorf("invariant every request is answered within 30s: %s %s: %v", o.kind, o.key, o.err)
			continue
		}
		switch o.kind {
		case "grant":
			if !cluster.IsPermit(o.env) {
				t.Errorf("%s: want permit, got %+v", o.key, o.env)
				continue
			}
			mintEnv[o.grant] = o.env
		case "spend":
			spends[o.grant] = append(spends[o.grant], o)
		}
	}
	t.Logf("%d requests, %d in flight across the %s, answered at most %s after it; slowest request %s", len(ops), spanning, how, blocked, slowest)
	if spanning == 0 {
		t.Errorf("no request was in flight when the leader died: the test exercised nothing")
	}
	if len(mintEnv) != total {
		t.Fatalf("%d of %d grants minted", len(mintEnv), total)
	}
	for g := range total {
		won, lost := 0, 0
		for _, o := range spends[g] {
			switch {
			case cluster.IsAttempt(o.env):
				won++
			case cluster.IsRefusal(o.env, grants.ReasonAlreadySpent):
				lost++
			default:
				t.Errorf("%s: want attempt or already_spent, got %+v", o.key, o.env)
			}
		}
		if won != 1 || lost != 1 {
			t.Errorf("invariant exactly one of two spenders wins: grant %d: %d attempts, %d already_spent", g, won, lost)
		}
	}
	if t.Failed() {
		return
	}

	// Receipts.
	st := c.WaitPublished()
	evs := c.CheckedStream(t, st)
	attempts := attemptsByGrant(evs)
	for g, env := range mintEnv {
		e := evs[env.Seq-1]
		if e.Kind != events.KindPermit || e.GrantID != env.GrantID {
			t.Errorf("invariant acknowledged permit in the stream: grant %d answered seq %d, which is %s %s", g, env.Seq, e.Kind, e.GrantID)
		}
		if n := len(attempts[env.GrantID]); n != 1 {
			t.Errorf("invariant at most one attempt per grant: grant %d has %d attempt receipts", g, n)
		}
		for _, o := range spends[g] {
			if !cluster.IsAttempt(o.env) {
				continue
			}
			e := evs[o.env.Seq-1]
			if e.Kind != events.KindAttempt || e.GrantID != env.GrantID || e.IdemKey != o.key {
				t.Errorf("invariant acknowledged attempt in the stream: %s answered seq %d, which is %s %s %s", o.key, o.env.Seq, e.Kind, e.GrantID, e.IdemKey)
			}
		}
	}

	// Retries after failover get the original answers.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client(newLeader, worker)
	for g, env := range mintEnv {
		again, err := cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: fmt.Sprintf("grant-%d", g)})
		if err != nil || again.GrantID != env.GrantID || again.Seq != env.Seq {
			t.Errorf("invariant idempotent grant retry: grant %d: first %s seq %d, retry %s seq %d (%v)", g, env.GrantID, env.Seq, again.GrantID, again.Seq, err)
		}
		for _, o := range spends[g] {
			if !cluster.IsAttempt(o.env) {
				continue
			}
			again, err := cl.Spend(ctx, api.SpendRequest{GrantID: env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: o.key})
			if err != nil || !cluster.IsAttempt(again) || again.Seq != o.env.Seq {
				t.Errorf("invariant idempotent spend retry: %s: first seq %d, retry %+v (%v)", o.key, o.env.Seq, again, err)
			}
		}
	}
	if after := c.WaitConverged(); after.Seq != st.Seq || after.StateDigest != st.StateDigest {
		t.Errorf("retries changed state: seq %d -> %d", st.Seq, after.Seq)
	}

	// The killed node comes back and catches up.
	c.Restart(victim)
	conv := c.WaitConverged()
	if vs := c.Status(victim); vs.Seq != conv.Seq || vs.StateDigest != conv.StateDigest {
		t.Errorf("invariant restarted node converges: %s at seq %d, cluster at %d", vs.Node, vs.Seq, conv.Seq)
	}
	// Its return published nothing twice.
	if final := c.CheckedStream(t, c.WaitPublished()); uint64(len(final)) != conv.Seq {
		t.Errorf("stream holds %d receipts after the restart, cluster seq %d", len(final), conv.Seq)
	}
}
