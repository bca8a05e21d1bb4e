package clustertests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/issuer"
)

// affinityDial connects with leader affinity to urls, its first server
// one that is not node avoid's (the client library shuffles the list, so
// it dials again until it lands elsewhere).
func affinityDial(t *testing.T, c *cluster.Cluster, urls []string, avoid int) *nats.Conn {
	t.Helper()
	for range 50 {
		nc, err := connect.Options{URL: strings.Join(urls, ","), Timeout: 10 * time.Second, Name: "affinity-test",
			LeaderAffinity: true, AffinityEvery: 500 * time.Millisecond}.Dial()
		if err != nil {
			t.Fatal(err)
		}
		if connectedTo(c, nc) != avoid {
			t.Cleanup(nc.Close)
			return nc
		}
		nc.Close()
	}
	t.Fatalf("every dial of %v landed on %s", urls, c.Nodes[avoid].ID)
	return nil
}

// connectedTo is the index of the node whose server nc is connected to
// (-1: none).
func connectedTo(c *cluster.Cluster, nc *nats.Conn) int {
	u := nc.ConnectedUrl()
	for i, nd := range c.Nodes {
		if u != "" && strings.HasSuffix(u, fmt.Sprintf(":%d", nd.NATSPort)) {
			return i
		}
	}
	return -1
}

// waitConnectedTo polls until nc is at node want's server.
func waitConnectedTo(t *testing.T, c *cluster.Cluster, nc *nats.Conn, want int, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for connectedTo(c, nc) != want {
		if time.Since(begin) > within {
			t.Fatalf("connected to %q, not to the leader %s's server %s, after %s", nc.ConnectedUrl(), c.Nodes[want].ID, c.Nodes[want].URL(), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(begin)
}

// TestLeaderAffinity runs a 3-node cluster of issuer processes and checks:
//   - the leader's status names its NATS server's client URL;
//   - a worker client given every server's URL, connected to a follower's
//     server, ends up at the leader's server while its requests flow;
//   - after the leader is killed it moves to the new leader's server within
//     seconds, and its requests keep being answered, with no grant spent
//     twice (two spenders, different keys, race on every grant: exactly
//     one attempt each, in the answers and in the receipt stream);
//   - a client given only followers' URLs never moves and keeps working
//     through routing;
//   - an idle client follows the leader's announcements to its server,
//     before and after the kill.
func TestLeaderAffinity(t *testing.T) {
	leaderAffinity(t, "SIGKILL", func(c *cluster.Cluster, i int) { c.Kill(i) })
}

// TestLeaderAffinityStopped is TestLeaderAffinity with a graceful stop
// (SIGTERM) of the leader.
func TestLeaderAffinityStopped(t *testing.T) {
	leaderAffinity(t, "SIGTERM", func(c *cluster.Cluster, i int) { c.Stop(i) })
}

func leaderAffinity(t *testing.T, how string, down func(c *cluster.Cluster, i int)) {
	c := cluster.Start(t, 3)
	leader := c.Leader()
	st, err := c.LeaderStatus()
	if err != nil {
		t.Fatal(err)
	}
	if st.NATSURL != c.Nodes[leader].URL() {
		t.Fatalf("leader status nats_url %q, want %q", st.NATSURL, c.Nodes[leader].URL())
	}
	var all, followers []string
	for i, nd := range c.Nodes {
		all = append(all, nd.URL())
		if i != leader {
			followers = append(followers, nd.URL())
		}
	}

	// Four workers' clients on one connection with affinity, and one on a
	// connection to followers only.
	nc := affinityDial(t, c, all, leader)
	a := connect.AffinityOf(nc)
	if a == nil {
		t.Fatal("no leader affinity on a connection given three servers")
	}
	// A client idle after one request follows the leader's announcements
	// alone.
	idle := affinityDial(t, c, all, leader)
	{
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cluster.Mint(t, ctx, client.New(idle, "wi"), 0, "idle-grant")
		cancel()
	}
	outside := affinityDial(t, c, followers, leader)

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  []string
		granted []grants.Envelope
		spends  = map[string][]grants.Envelope{}
		n       atomic.Int64
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		failed = append(failed, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	work := func(name string, cl *client.Client) {
		defer wg.Done()
		for k := 0; !stop.Load(); k++ {
			g := int(n.Add(1))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			env, err := cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: fmt.Sprintf("%s-grant-%d", name, k)})
			if err != nil || !cluster.IsPermit(env) {
				cancel()
				fail("%s grant %d: %v %+v", name, k, err, env)
				continue
			}
			mu.Lock()
			granted = append(granted, env)
			mu.Unlock()
			var sw sync.WaitGroup
			for s := range 2 {
				sw.Add(1)
				go func() {
					defer sw.Done()
					e, err := cl.Spend(ctx, api.SpendRequest{GrantID: env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: fmt.Sprintf("%s-spend-%d-%d", name, k, s)})
					if err != nil {
						fail("%s spend %d/%d: %v", name, k, s, err)
						return
					}
					mu.Lock()
					spends[env.GrantID] = append(spends[env.GrantID], e)
					mu.Unlock()
				}()
			}
			sw.Wait()
			cancel()
		}
	}
	// One worker per caller: each grant's losing spend is a refusal, and
	// admission control counts refusals per worker.
	for g := range 4 {
		wg.Add(1)
		go work(fmt.Sprintf("aff%d", g), client.New(nc, fmt.Sprintf("wa%d", g)))
	}
	wg.Add(1)
	go work("outside", client.New(outside, "wo"))
	finish := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer finish()

	took := waitConnectedTo(t, c, nc, leader, 20*time.Second)
	t.Logf("client started at a follower's server; at the leader %s's within %s", c.Nodes[leader].ID, took.Round(time.Millisecond))
	took = waitConnectedTo(t, c, idle, leader, issuer.AnnounceEvery+10*time.Second)
	t.Logf("idle client at the leader's server within %s", took.Round(time.Millisecond))

	// Kill the leader once some work went through it.
	for start := n.Load(); n.Load() < start+20; {
		time.Sleep(10 * time.Millisecond)
	}
	// The client given only followers' servers stayed where it was: the
	// leader it hears of is not in its list.
	if at := connectedTo(c, outside); at == leader || at < 0 {
		t.Errorf("the client given only followers' servers is at %q", outside.ConnectedUrl())
	}
	if m := connect.AffinityOf(outside).Moves(); m != 0 {
		t.Errorf("the client given only followers' servers moved %d times", m)
	}
	killedAt := time.Now()
	down(c, leader)
	next := c.Leader()
	elected := time.Since(killedAt)
	took = waitConnectedTo(t, c, nc, next, 20*time.Second)
	t.Logf("%s to leader %s; %s elected %s later; the client was at its server %s after it", how, c.Nodes[leader].ID, c.Nodes[next].ID,
		elected.Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))
	took = waitConnectedTo(t, c, idle, next, issuer.AnnounceEvery+20*time.Second)
	t.Logf("idle client at the new leader's server %s after the leader went down", time.Since(killedAt).Round(time.Millisecond))
	// Requests keep succeeding at the new leader.
	for start := n.Load(); n.Load() < start+20; {
		if time.Since(killedAt) > 60*time.Second {
			t.Fatalf("no progress after the kill")
		}
		time.Sleep(10 * time.Millisecond)
	}
	finish()

	t.Logf("%d grants; %d moves of the client given every server", len(granted), a.Moves())
	for _, f := range failed {
		t.Errorf("invariant every request is answered: %s", f)
	}
	for _, env := range granted {
		won, lost := 0, 0
		for _, e := range spends[env.GrantID] {
			switch {
			case cluster.IsAttempt(e):
				won++
			case cluster.IsRefusal(e, grants.ReasonAlreadySpent):
				lost++
			default:
				t.Errorf("spend of %s: want attempt or already_spent, got %+v", env.GrantID, e)
			}
		}
		if won != 1 || lost != 1 {
			t.Errorf("invariant exactly one of two spenders wins: grant %s: %d attempts, %d already_spent", env.GrantID, won, lost)
		}
	}
	if t.Failed() {
		return
	}
	// The receipt stream agrees: one attempt per grant.
	evs := c.CheckedStream(t, c.WaitPublished())
	attempts := attemptsByGrant(evs)
	for _, env := range granted {
		if k := len(attempts[env.GrantID]); k != 1 {
			t.Errorf("invariant at most one attempt per grant: %s has %d attempt receipts", env.GrantID, k)
		}
	}
}
