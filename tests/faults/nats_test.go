package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// streamLeader returns the index of the node whose JetStream leads the
// receipt stream.
func streamLeader(t *testing.T, c *cluster.Cluster, nc *nats.Conn) int {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := js.Stream(ctx, events.StreamName)
		cancel()
		var ci *jetstream.ClusterInfo
		if err == nil {
			if ci = s.CachedInfo().Cluster; ci != nil {
				for i, nd := range c.Nodes {
					if nd.ID == ci.Leader {
						return i
					}
				}
			}
		}
		if time.Now().After(end) {
			t.Fatalf("no receipt stream leader: %v (cluster info %+v)", err, ci)
		}
	}
}

// TestNATSServerLostAndWiped is scenario 5. The receipt stream has three
// replicas. A node whose JetStream replica is not the stream leader is
// killed; receipts keep being acknowledged by the other two; then the
// stream leader is killed too, and the first node comes back with its
// JetStream store wiped — so the two live replicas are one complete and
// one empty. Invariants:
//   - the wiped replica does not win with its empty store: no receipt the
//     cluster confirmed published goes missing (the leader's status never
//     reports stream loss, and publication resumes from the stream's own
//     last seq with no gap). JetStream may instead stall until the other
//     complete replica returns; requests are answered meanwhile (raft
//     decides, receipts wait in the replicated outbox);
//   - once every node is back, the stream is complete and gap-free from
//     seq 1 (it equals the raft log's receipts: the auditor's replay gives
//     the issuer's state digest), and every node has the same state;
//   - requests answered throughout are committed exactly once.
func TestNATSServerLostAndWiped(t *testing.T) {
	needFull(t)
	c := cluster.Start(t, 3)
	nc := c.Conn(0)
	h := newHistory()
	n := 0
	var mu sync.Mutex
	grantWorker := map[int]string{}
	work := func(count int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for w := range 3 {
			worker := fmt.Sprintf("w%d", w+1)
			cl := c.Client(c.Leader(), worker)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range count {
					mu.Lock()
					n++
					g := n
					grantWorker[g] = worker
					mu.Unlock()
					key := fmt.Sprintf("n-grant-%d", g)
					r := h.do(record{Kind: opGrant, Grant: g, Worker: worker, Key: key, Via: -1}, func() (grants.Envelope, error) {
						return cl.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: key})
					})
					if r.Unknown() || !cluster.IsPermit(r.Env) {
						t.Errorf("grant %d: %+v %v", g, r.Env, r.Err)
						continue
					}
					skey := fmt.Sprintf("n-spend-%d", g)
					h.do(record{Kind: opSpend, Grant: g, Worker: worker, Key: skey, Via: -1}, func() (grants.Envelope, error) {
						return cl.Spend(ctx, api.SpendRequest{GrantID: r.Env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: skey})
					})
				}
			}()
		}
		wg.Wait()
	}
	// Watch the leader's status for stream loss all along.
	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	var lost []string
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if st, err := c.LeaderStatus(); err == nil && st.StreamLostFrom != 0 {
				lost = append(lost, fmt.Sprintf("%s: stream lost %d..%d", st.Node, st.StreamLostFrom, st.StreamLostThrough))
			}
		}
	}()

	work(10)
	c.WaitPublished()
	sl := streamLeader(t, c, nc)
	k := (sl + 1) % 3
	third := (sl + 2) % 3
	t.Logf("stream leader %s; losing %s's NATS server", c.Nodes[sl].ID, c.Nodes[k].ID)
	c.Kill(k)
	work(10)
	before := c.WaitPublished()
	t.Logf("receipts confirmed by %s and %s: %d", c.Nodes[sl].ID, c.Nodes[third].ID, before.Seq)

	c.Kill(sl)
	c.WipeJetStream(k)
	t.Logf("killed %s (stream leader); %s comes back with its JetStream store wiped, next to %s", c.Nodes[sl].ID, c.Nodes[k].ID, c.Nodes[third].ID)
	c.Restart(k)
	// Raft has a quorum again (the wiped node's raft data is intact), so
	// requests are answered; their receipts wait in the replicated outbox
	// while JetStream sorts itself out. JetStream may stall here rather
	// than let the empty replica vote: that is the safe outcome.
	work(10)
	published := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if st, err := c.LeaderStatus(); err == nil && st.StreamLastSeq == st.Seq && st.Seq > before.Seq {
			published = true
			break
		}
	}
	if published {
		t.Logf("with one complete and one wiped replica, publication went on")
	} else {
		st, _ := c.LeaderStatus()
		t.Logf("with one complete and one wiped replica, publication stalled (seq %d, stream at %d, outbox %d): JetStream did not let the empty replica vote", st.Seq, st.StreamLastSeq, st.Outbox)
	}
	c.Restart(sl)
	work(5)
	c.WaitPublished()
	evs := c.CheckedStream(t, c.WaitPublished())
	close(stopWatch)
	<-watchDone
	for _, l := range lost {
		t.Errorf("invariant no acknowledged receipt lost: %s", l)
	}
	rs := h.all()
	checkCommitted(t, rs, evs)
	checkOnePerKey(t, evs)
	mu.Lock()
	checkAuthority(t, rs, grantWorker)
	mu.Unlock()
	conv := checkDigests(t, c)
	if uint64(len(evs)) != conv.Seq {
		t.Errorf("invariant stream complete: %d receipts in the stream, raft seq %d", len(evs), conv.Seq)
	}
	t.Logf("grants %v spends %v; %d receipts", count(rs, opGrant), count(rs, opSpend), len(evs))
}
