package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

const ttlPolicy = `{"version":2,"default_ttl":"2s","lanes":{"coordinator":{"ttl":"2s","surfaces":["*"],"consequences":["*"]}},"surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution","target":{"field":"command","canon":"shell"},"sinks":["command"]}]}`

// TestClockJumpsAndSkew is scenario 6: the nodes' wall clocks disagree
// (n2 runs 90s fast, n3 2m slow) and the leader's clock jumps 10 minutes
// back, then 10 minutes forward, then the leader fails over to a node with
// another clock. Grants live 2s. Invariants:
//   - the control-plane clock never runs backwards: not in any node's
//     status over time, not in the receipts' times;
//   - no grant lives longer than its lifetime on the log's clock: every
//     permit's expires_at - issued_at is exactly the 2s ttl, and no
//     attempt is at or after its grant's expires_at (the auditor checks
//     every receipt);
//   - a leader whose wall clock jumped back does not stretch grants in
//     real time: a grant minted just before the jump is refused expired
//     once 2.5s of real time have passed (the leader stamps batches no
//     earlier than its last stamp plus the monotonic time elapsed);
//   - the same holds after failing over to a node whose clock is behind
//     the log's clock;
//   - a forward jump only shortens lives: a grant minted before it is
//     refused expired right after it.
func TestClockJumpsAndSkew(t *testing.T) {
	needFull(t)
	dir := t.TempDir()
	polFile := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(polFile, []byte(ttlPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	skewFile := func(id string) string { return filepath.Join(dir, "skew-"+id) }
	setSkew := func(id, d string) {
		t.Helper()
		tmp := skewFile(id) + ".tmp"
		if err := os.WriteFile(tmp, []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, skewFile(id)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond) // the node re-reads it every 50ms
	}
	for id, d := range map[string]string{"n1": "0s", "n2": "90s", "n3": "-2m"} {
		if err := os.WriteFile(skewFile(id), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := cluster.StartWith(t, 3, cluster.Options{PolicyFile: polFile, Env: func(nd *cluster.Node) []string {
		return []string{"WRIT_TEST_CLOCK_SKEW_FILE=" + skewFile(nd.ID)}
	}})

	// Watch every node's control-plane clock.
	var (
		watchMu   sync.Mutex
		watchErrs []string
		lastClock = map[string]int64{}
		stopWatch = make(chan struct{})
		watchDone = make(chan struct{})
	)
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for i := range c.Nodes {
				st, err := c.TryStatus(i)
				if err != nil || st.Clock == 0 {
					continue
				}
				watchMu.Lock()
				if prev := lastClock[st.Node]; st.Clock < prev {
					watchErrs = append(watchErrs, fmt.Sprintf("%s: clock went from %d back to %d", st.Node, prev, st.Clock))
				}
				lastClock[st.Node] = max(lastClock[st.Node], st.Clock)
				watchMu.Unlock()
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := 0
	mintVia := func(cl *client.Client) grants.Envelope {
		t.Helper()
		n++
		return cluster.Mint(t, ctx, cl, n, fmt.Sprintf("clock-grant-%d", n))
	}
	spendOf := func(cl *client.Client, g grants.Envelope, i int) grants.Envelope {
		t.Helper()
		env, err := cl.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i), IdempotencyKey: fmt.Sprintf("clock-spend-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	// Expired, or already forgotten (a grant leaves the state machine a
	// margin after its expiry on the control-plane clock; a 10 minute jump
	// passes that margin): either way dead, with request_new_grant.
	wantExpired := func(what string, env grants.Envelope) {
		t.Helper()
		if !cluster.IsRefusal(env, grants.ReasonExpired) && !cluster.IsRefusal(env, grants.ReasonUnknownGrant) || env.Recovery != grants.RecoverRequestNewGrant {
			t.Errorf("invariant %s: want expired, got %s %s (%+v)", what, env.Decision, env.Reason, env)
		}
	}

	leader := c.Leader()
	lid := c.Nodes[leader].ID
	cl := c.Client(leader, "w1")
	c0 := c.Status(leader).Clock

	// The leader's clock jumps 10 minutes back.
	gA := mintVia(cl)
	iA := n
	setSkew(lid, "-10m")
	time.Sleep(2500 * time.Millisecond)
	mintVia(cl) // an entry stamped by the jumped-back clock
	wantExpired("a jumped-back leader clock does not stretch a grant (2.5s real time after minting a 2s grant)", spendOf(cl, gA, iA))

	// Then 10 minutes forward: a grant minted before is dead at once.
	gB := mintVia(cl)
	iB := n
	setSkew(lid, "10m")
	mintVia(cl)
	wantExpired("a forward jump expires older grants", spendOf(cl, gB, iB))
	gC := mintVia(cl)
	iC := n
	if gC.ExpiresAt-gC.IssuedAt != int64(2*time.Second) {
		t.Errorf("grant lifetime on the log clock %s, want 2s", time.Duration(gC.ExpiresAt-gC.IssuedAt))
	}

	// Back to normal, then fail over to a node whose clock is behind the
	// log's clock (which is now about 10 minutes ahead).
	setSkew(lid, "0s")
	c.Kill(leader)
	l2 := c.Leader()
	cl2 := c.Client(l2, "w1")
	gD := mintVia(cl2) // the new leader's first stamp
	if gD.IssuedAt < gC.IssuedAt {
		t.Errorf("invariant clock never runs backwards: grant after failover issued at %d < %d", gD.IssuedAt, gC.IssuedAt)
	}
	time.Sleep(2500 * time.Millisecond)
	mintVia(cl2)
	wantExpired("a grant outlives no failover to a slower clock", spendOf(cl2, gC, iC))
	// And a fresh grant spends normally under the new leader.
	gE := mintVia(cl2)
	if a := spendOf(cl2, gE, n); !cluster.IsAttempt(a) {
		t.Errorf("a fresh grant after failover: %+v", a)
	}
	c.Restart(leader)
	close(stopWatch)
	<-watchDone
	for _, e := range watchErrs {
		t.Errorf("invariant control-plane clock never runs backwards: %s", e)
	}
	st := checkDigests(t, c)
	t.Logf("control-plane clock moved %s during the test (real clock and skews: n1 0, n2 +90s, n3 -2m, jumps -10m/+10m on %s, failover to %s)",
		time.Duration(st.Clock-c0).Round(time.Second), lid, c.Nodes[l2].ID)

	evs := c.CheckedStream(t, c.WaitPublished())
	var prev int64
	for _, e := range evs {
		if e.Time < prev {
			t.Errorf("invariant receipt times never run backwards: seq %d at %d after %d", e.Seq, e.Time, prev)
		}
		prev = max(prev, e.Time)
		if e.Kind == events.KindPermit && e.ExpiresAt-e.IssuedAt > int64(2*time.Second) {
			t.Errorf("invariant no grant lives longer than its ttl: %s lives %s", e.GrantID, time.Duration(e.ExpiresAt-e.IssuedAt))
		}
	}
}
