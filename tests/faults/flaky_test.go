package faults

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/internal/testing/faultproxy"
	"github.com/writ-dev/writ/policy"
)

// TestFlakyLinks is scenario 2: every raft and NATS route link between the
// nodes turns, every 400ms and independently (fixed seed), healthy, slow
// (5-50ms plus jitter), flaky (each chunk may reset the connection) or
// dead (blackhole), while workers mint grants and race spenders through
// every node's server and an operator revokes a worker and bumps the
// epoch. Then every link heals. Invariants:
//   - safety throughout: the history of spends, revocations and epoch
//     bumps is linearizable (porcupine); every answer is committed; at
//     most one spend per grant; nothing applied twice; no attempt after a
//     revocation or epoch change in the log; the stream is whole and the
//     auditor's replay equals the state digest;
//   - progress after healing: every node converges to the same state, and
//     a fresh grant and spend through each node's server are answered
//     within 30s.
func TestFlakyLinks(t *testing.T) {
	needFull(t)
	const (
		seed     = 2
		duration = 15 * time.Second
		flip     = 400 * time.Millisecond
	)
	c := cluster.StartWith(t, 3, cluster.Options{Proxy: true, Seed: seed})
	rng := rand.New(rand.NewSource(seed))
	h := newHistory()
	grantWorker := map[int]string{}
	var gwMu sync.Mutex
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup

	opTimeout := 4 * time.Second
	workers := []string{"w1", "w2", "w3"}
	for wi, worker := range workers {
		var cls []*client.Client
		for i := range c.Nodes {
			cl := c.PinnedClient(i, worker)
			cl.Attempt = time.Second
			cls = append(cls, cl)
		}
		for lane := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; !stop.Load(); k++ {
					g := int(next.Add(1))
					gwMu.Lock()
					grantWorker[g] = worker
					gwMu.Unlock()
					minter := cls[(wi+lane+k)%3]
					key := fmt.Sprintf("f-grant-%d", g)
					m := h.do(record{Kind: opGrant, Grant: g, Worker: worker, Key: key, Via: (wi + lane + k) % 3}, func() (grants.Envelope, error) {
						ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
						defer cancel()
						return minter.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: key})
					})
					if m.Unknown() || !cluster.IsPermit(m.Env) {
						continue
					}
					var sw sync.WaitGroup
					for s := range 2 {
						via := (wi + lane + k + 1 + s) % 3
						sw.Add(1)
						go func() {
							defer sw.Done()
							skey := fmt.Sprintf("f-spend-%d-%d", g, s)
							h.do(record{Kind: opSpend, Grant: g, Worker: worker, Key: skey, Via: via}, func() (grants.Envelope, error) {
								ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
								defer cancel()
								return cls[via].Spend(ctx, api.SpendRequest{GrantID: m.Env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: skey})
							})
						}()
					}
					sw.Wait()
				}
			}()
		}
	}
	op := c.PinnedClient(0, "")
	op.Attempt = time.Second
	operator := func(kind opKind, worker string) {
		h.do(record{Kind: kind, Worker: worker, Via: 0}, func() (grants.Envelope, error) {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			if kind == opEpoch {
				return op.SetPolicy(ctx, policy.Recommended().Canonical())
			}
			return op.Revoke(ctx, api.RevokeRequest{Worker: worker})
		})
	}

	states := map[string]int{}
	begin := time.Now()
	revoked, bumped := false, false
	for time.Since(begin) < duration {
		for _, l := range c.Links() {
			for _, pl := range []*faultproxy.Link{l.Raft, l.Route} {
				var f faultproxy.Faults
				switch x := rng.Float64(); {
				case x < 0.5:
					states["healthy"]++
				case x < 0.75:
					f = faultproxy.Faults{Delay: time.Duration(5+rng.Intn(45)) * time.Millisecond, Jitter: 20 * time.Millisecond}
					states["slow"]++
				case x < 0.9:
					f = faultproxy.Faults{ResetProb: 0.05, RefuseProb: 0.2, Jitter: 5 * time.Millisecond}
					states["flaky"]++
				default:
					f = faultproxy.Faults{Blackhole: true}
					states["dead"]++
				}
				pl.Set(f)
			}
		}
		if !revoked && time.Since(begin) > duration/3 {
			revoked = true
			wg.Add(1)
			go func() { defer wg.Done(); operator(opRevoke, "w3") }()
		}
		if !bumped && time.Since(begin) > 2*duration/3 {
			bumped = true
			wg.Add(1)
			go func() { defer wg.Done(); operator(opEpoch, "") }()
		}
		time.Sleep(flip)
	}
	c.Heal()
	healedAt := h.since()
	stop.Store(true)
	wg.Wait()
	rs := h.all()
	var stats faultproxy.Stats
	for _, l := range c.Links() {
		for _, pl := range []*faultproxy.Link{l.Raft, l.Route} {
			s := pl.Stats()
			stats.Accepted += s.Accepted
			stats.Refused += s.Refused
			stats.Resets += s.Resets
			stats.Swallowed += s.Swallowed
		}
	}
	t.Logf("link states %v; proxies accepted %d, refused %d, reset %d connections, swallowed %d bytes", states, stats.Accepted, stats.Refused, stats.Resets, stats.Swallowed)
	t.Logf("grants %v; spends %v; revokes %v; epochs %v; healed at %s", count(rs, opGrant), count(rs, opSpend), count(rs, opRevoke), count(rs, opEpoch), healedAt.Round(time.Millisecond))

	// Progress after healing, through every node.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range c.Nodes {
		cl := c.PinnedClient(i, "w1")
		g := cluster.Mint(t, ctx, cl, 50_000+i, fmt.Sprintf("f-after-%d", i))
		if _, err := cl.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(50_000 + i), IdempotencyKey: fmt.Sprintf("f-after-spend-%d", i)}); err != nil {
			t.Errorf("invariant progress after healing: spend through %s: %v", c.Nodes[i].ID, err)
		}
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	checkCommitted(t, rs, evs)
	checkOnePerKey(t, evs)
	gwMu.Lock()
	checkAuthority(t, rs, grantWorker)
	gwMu.Unlock()
	checkRevocationBeatsSpends(t, evs)
	checkDigests(t, c)
}
