package faults

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/policy"
)

// partitionPlan sizes scenario 1.
type partitionPlan struct {
	seed        int64
	workers     int           // w1..wN, grants minted for each
	perWorker   int           // grants per worker
	window      time.Duration // spends are invoked uniformly over it
	partitionAt time.Duration // the leader is cut off from both followers
	healAt      time.Duration
	opTimeout   time.Duration // an operation unanswered by then is unknown
}

// TestPartitionLeaderDuringAuthorityChanges is scenario 1: the leader is
// partitioned from both followers while spends, worker revocations and a
// policy epoch bump are in flight, through clients pinned to the old
// leader's server and to the majority's. Invariants:
//   - the deposed leader answers nothing as committed: no definite answer
//     comes back through its server while it is cut off, and every
//     definite answer anywhere names the receipt that records it;
//   - at most one spend per grant (answers, and receipts);
//   - the history of spends, revocations and epoch bumps is linearizable
//     against the authority model (porcupine): a revocation or epoch bump
//     acknowledged before a spend was invoked beats that spend;
//   - in the log, no attempt of a worker's grant follows that worker's
//     revocation, and none follows the epoch bump (the auditor checks
//     every receipt);
//   - after healing, the old leader rejoins with the same state digest.
func TestPartitionLeaderDuringAuthorityChanges(t *testing.T) {
	smokeOK(t)
	p := partitionPlan{seed: 1, workers: 4, perWorker: 6, window: 4 * time.Second,
		partitionAt: 800 * time.Millisecond, healAt: 5500 * time.Millisecond, opTimeout: 3 * time.Second}
	if full() {
		p.perWorker, p.window, p.healAt = 12, 6*time.Second, 7*time.Second
	}
	partitionScenario(t, p)
}

func partitionScenario(t *testing.T, p partitionPlan) {
	c := cluster.StartWith(t, 3, cluster.Options{Proxy: true, Seed: p.seed})
	old := c.Leader()
	var majority []int
	for i := range c.Nodes {
		if i != old {
			majority = append(majority, i)
		}
	}
	rng := rand.New(rand.NewSource(p.seed))

	// Mint every grant before the faults.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type minted struct {
		env    grants.Envelope
		worker string
	}
	all := make([]minted, p.workers*p.perWorker)
	grantWorker := map[int]string{}
	h := newHistory()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for w := range p.workers {
		worker := fmt.Sprintf("w%d", w+1)
		cl := c.Client(old, worker)
		for k := range p.perWorker {
			g := w*p.perWorker + k
			grantWorker[g] = worker
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				key := fmt.Sprintf("p-grant-%d", g)
				r := h.do(record{Kind: opGrant, Grant: g, Worker: worker, Key: key, Via: -1}, func() (grants.Envelope, error) {
					return cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: key})
				})
				if r.Unknown() || !cluster.IsPermit(r.Env) {
					t.Errorf("grant %d: %+v %v", g, r.Env, r.Err)
				}
				all[g] = minted{r.Env, worker}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Clients pinned to one server each: through the old leader, or
	// through one of the majority.
	pinned := map[string]map[int]*client.Client{}
	for w := range p.workers {
		worker := fmt.Sprintf("w%d", w+1)
		pinned[worker] = map[int]*client.Client{}
		for i := range c.Nodes {
			pinned[worker][i] = c.PinnedClient(i, worker)
		}
	}
	opOld, opMaj := c.PinnedClient(old, ""), c.PinnedClient(majority[0], "")
	for _, cl := range []*client.Client{opOld, opMaj} {
		cl.Attempt = 500 * time.Millisecond
	}
	for _, m := range pinned {
		for _, cl := range m {
			cl.Attempt = 500 * time.Millisecond
		}
	}

	start := h.since()
	run := func(at time.Duration, f func()) {
		at += start
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := at - h.since(); d > 0 {
				time.Sleep(d)
			}
			f()
		}()
	}
	spend := func(g int, key string, via int) {
		m := all[g]
		h.do(record{Kind: opSpend, Grant: g, Worker: m.worker, Key: key, Via: via}, func() (grants.Envelope, error) {
			octx, ocancel := context.WithTimeout(context.Background(), p.opTimeout)
			defer ocancel()
			return pinned[m.worker][via].Spend(octx, api.SpendRequest{GrantID: m.env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: key})
		})
	}
	for g := range all {
		run(time.Duration(rng.Int63n(int64(p.window))), func() { spend(g, fmt.Sprintf("g%d-old", g), old) })
		via := majority[rng.Intn(len(majority))]
		run(time.Duration(rng.Int63n(int64(p.window))), func() { spend(g, fmt.Sprintf("g%d-maj", g), via) })
		if g%3 == 0 {
			other := majority[0]
			if other == via {
				other = majority[1]
			}
			run(time.Duration(rng.Int63n(int64(p.window))), func() { spend(g, fmt.Sprintf("g%d-maj2", g), other) })
		}
	}
	operator := func(at time.Duration, kind opKind, worker string, via int, cl *client.Client) {
		run(at, func() {
			h.do(record{Kind: kind, Worker: worker, Via: via}, func() (grants.Envelope, error) {
				octx, ocancel := context.WithTimeout(context.Background(), p.opTimeout)
				defer ocancel()
				if kind == opEpoch {
					return cl.SetPolicy(octx, policy.Recommended().Canonical())
				}
				return cl.Revoke(octx, api.RevokeRequest{Worker: worker})
			})
		})
	}
	frac := func(f float64) time.Duration { return time.Duration(f * float64(p.window)) }
	operator(frac(0.35), opRevoke, "w2", majority[0], opMaj)
	operator(frac(0.40), opRevoke, "w3", old, opOld)
	operator(frac(0.60), opEpoch, "", majority[0], opMaj)
	operator(frac(0.80), opRevoke, "w4", majority[0], opMaj)

	var partitionedAt, healedAt, servedAt time.Duration
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	time.Sleep(start + p.partitionAt - h.since())
	partitionedAt = h.since()
	c.Isolate(old)
	// When does the majority serve again?
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for end := time.Now().Add(p.healAt); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if st, err := c.LeaderStatus(); err == nil && st.Node != c.Nodes[old].ID {
				servedAt = h.since()
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(start + p.healAt - h.since()):
	}
	healedAt = h.since()
	<-watchDone
	c.Heal()
	<-done

	rs := h.all()
	t.Logf("partition of %s over [%s, %s], majority serving again at %s; spends %v; revokes %v; epochs %v", c.Nodes[old].ID,
		partitionedAt.Round(time.Millisecond), healedAt.Round(time.Millisecond), servedAt.Round(time.Millisecond),
		count(rs, opSpend), count(rs, opRevoke), count(rs, opEpoch))

	// The deposed leader answered nothing as committed while cut off.
	lease := 1500 * time.Millisecond
	fromOld := 0
	for _, r := range rs {
		if r.Via == old && !r.Unknown() && r.Return > partitionedAt+lease && r.Return < healedAt {
			fromOld++
			t.Errorf("invariant deposed leader answers nothing: %s %s %s answered %s/%s seq %d at %s, while %s was cut off",
				r.Kind, r.Worker, r.Key, r.Env.Decision, r.Env.Reason, r.Env.Seq, r.Return.Round(time.Millisecond), c.Nodes[old].ID)
		}
	}
	newLeader := c.Leader()
	if newLeader == old {
		t.Logf("%s leads again after the heal", c.Nodes[old].ID)
	}
	evs := c.CheckedStream(t, c.WaitPublished())
	checkCommitted(t, rs, evs)
	checkOnePerKey(t, evs)
	checkAuthority(t, rs, grantWorker)
	checkRevocationBeatsSpends(t, evs)
	conv := checkDigests(t, c)
	if st := c.Status(old); st.StateDigest != conv.StateDigest {
		t.Errorf("old leader %s did not converge: %+v", st.Node, st)
	}
	// The cluster makes progress after the heal.
	cl := c.Client(newLeader, "w1")
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	cluster.Mint(t, pctx, cl, 10_000, "p-after-heal")
}

// checkRevocationBeatsSpends checks the log order: once a worker's
// revocation or a policy epoch is committed, no attempt of a grant minted
// before it follows.
func checkRevocationBeatsSpends(t testing.TB, evs []events.Event) {
	t.Helper()
	permitSeq := map[string]uint64{}
	permitWorker := map[string]string{}
	revokedAt := map[string]uint64{} // worker -> seq of its last revocation
	var epochAt uint64
	for _, e := range evs {
		switch e.Kind {
		case events.KindPermit:
			permitSeq[e.GrantID], permitWorker[e.GrantID] = e.Seq, e.Worker
		case events.KindRevoke:
			if e.Worker != "" {
				revokedAt[e.Worker] = e.Seq
			}
		case events.KindEpoch:
			epochAt = e.Seq
		case events.KindAttempt:
			ps := permitSeq[e.GrantID]
			if r := revokedAt[permitWorker[e.GrantID]]; r > ps {
				t.Errorf("invariant revocation beats later spends: attempt of %s at seq %d after %s's revocation at seq %d", e.GrantID, e.Seq, permitWorker[e.GrantID], r)
			}
			if epochAt > ps {
				t.Errorf("invariant epoch change beats later spends: attempt of %s at seq %d after the epoch at seq %d", e.GrantID, e.Seq, epochAt)
			}
		}
	}
}
