package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/faultproxy"
)

// Link is node From's connection to node To: one fault proxy in front of
// To's raft transport and one in front of To's NATS route port. Faults are
// directional: Link(i, j) carries what i sends to j and j's answers on
// those connections. Partition and SetFaults act on both directions.
type Link struct {
	From, To int
	Raft     *faultproxy.Link
	Route    *faultproxy.Link
}

// Set applies f to both proxies of the link.
func (l *Link) Set(f faultproxy.Faults) {
	l.Raft.Set(f)
	l.Route.Set(f)
}

// startLinks creates every link, and the sink: a listener that resets
// every connection, which each node advertises as its route address so
// that NATS route gossip (a server telling the others to dial a new
// peer directly) cannot open a route that bypasses the proxies.
func (c *Cluster) startLinks() error {
	seed := c.opts.Seed
	sink, err := faultproxy.Listen("route-gossip-sink", "127.0.0.1:1")
	if err != nil {
		return err
	}
	sink.Set(faultproxy.Faults{RefuseProb: 1})
	c.sink = sink
	n := len(c.Nodes)
	c.links = make([][]*Link, n)
	for i := range n {
		c.links[i] = make([]*Link, n)
		for j := range n {
			if i == j {
				continue
			}
			from, to := c.Nodes[i], c.Nodes[j]
			rl, err := faultproxy.Listen(fmt.Sprintf("raft %s->%s", from.ID, to.ID), to.RaftAddr,
				faultproxy.WithSeed(seed*1000+int64(i*n+j)*2))
			if err != nil {
				return err
			}
			nl, err := faultproxy.Listen(fmt.Sprintf("route %s->%s", from.ID, to.ID), fmt.Sprintf("127.0.0.1:%d", to.ClusterPort),
				faultproxy.WithSeed(seed*1000+int64(i*n+j)*2+1))
			if err != nil {
				rl.Close()
				return err
			}
			c.links[i][j] = &Link{From: i, To: j, Raft: rl, Route: nl}
		}
	}
	return nil
}

func (c *Cluster) closeLinks() {
	for _, row := range c.links {
		for _, l := range row {
			if l != nil {
				l.Raft.Close()
				l.Route.Close()
			}
		}
	}
	if c.sink != nil {
		c.sink.Close()
	}
}

func (c *Cluster) needLinks(what string) {
	c.t.Helper()
	if c.links == nil {
		c.t.Fatalf("cluster: %s needs a cluster started with Options{Proxy: true}", what)
	}
}

// Link returns the link from node i to node j.
func (c *Cluster) Link(i, j int) *Link {
	c.t.Helper()
	c.needLinks("Link")
	if i == j {
		c.t.Fatalf("cluster: no link from a node to itself (%d)", i)
	}
	return c.links[i][j]
}

// Links returns every link.
func (c *Cluster) Links() []*Link {
	var out []*Link
	for _, row := range c.links {
		for _, l := range row {
			if l != nil {
				out = append(out, l)
			}
		}
	}
	return out
}

// SetFaults sets the faults of the links between i and j, both ways.
func (c *Cluster) SetFaults(i, j int, f faultproxy.Faults) {
	c.t.Helper()
	c.Link(i, j).Set(f)
	c.Link(j, i).Set(f)
}

// Partition cuts the network between groups of nodes: every link (raft
// and NATS route, both ways) between nodes of different groups becomes a
// blackhole, as if their packets were dropped; links inside a group stay
// as they are. A node named in no group is cut off from everyone.
// Processes are not touched, and clients keep reaching every node's client
// port. The harness's waits (Leader, WaitConverged, LeaderStatus) then
// consider only the majority group.
func (c *Cluster) Partition(groups ...[]int) {
	c.t.Helper()
	c.needLinks("Partition")
	group := make([]int, len(c.Nodes))
	for i := range group {
		group[i] = -1 - i // alone
	}
	var desc []string
	for g, members := range groups {
		var ids []string
		for _, i := range members {
			if i < 0 || i >= len(c.Nodes) {
				c.t.Fatalf("cluster: Partition: no node %d", i)
			}
			group[i] = g
			ids = append(ids, c.Nodes[i].ID)
		}
		desc = append(desc, "{"+strings.Join(ids, ",")+"}")
	}
	for _, l := range c.Links() {
		if group[l.From] != group[l.To] {
			l.Set(faultproxy.Faults{Blackhole: true})
		}
	}
	var gs [][]int
	seen := map[int][]int{}
	for i, g := range group {
		seen[g] = append(seen[g], i)
	}
	for _, members := range seen {
		gs = append(gs, members)
	}
	c.mu.Lock()
	c.groups = gs
	c.mu.Unlock()
	c.t.Logf("cluster: partition %s at %s", strings.Join(desc, " | "), time.Now().Format("15:04:05.000"))
}

// Isolate cuts node i off from every other node.
func (c *Cluster) Isolate(i int) {
	c.t.Helper()
	var rest []int
	for j := range c.Nodes {
		if j != i {
			rest = append(rest, j)
		}
	}
	c.Partition([]int{i}, rest)
}

// Heal removes every fault from every link. Connections that lost bytes
// in a blackhole are reset; new ones go through.
func (c *Cluster) Heal() {
	c.t.Helper()
	c.needLinks("Heal")
	for _, l := range c.Links() {
		l.Set(faultproxy.Faults{})
	}
	c.mu.Lock()
	c.groups = nil
	c.mu.Unlock()
	c.t.Logf("cluster: healed at %s", time.Now().Format("15:04:05.000"))
}

// Majority returns the nodes of the majority side of the current
// partition (every node when there is none). It fails the test when no
// side holds a majority.
func (c *Cluster) Majority() []int {
	c.mu.Lock()
	groups := c.groups
	c.mu.Unlock()
	if groups == nil {
		out := make([]int, len(c.Nodes))
		for i := range out {
			out[i] = i
		}
		return out
	}
	for _, g := range groups {
		if 2*len(g) > len(c.Nodes) {
			out := slices.Clone(g)
			slices.Sort(out)
			return out
		}
	}
	return nil
}

// visible marks the nodes the harness's waits look at.
func (c *Cluster) visible() []bool {
	v := make([]bool, len(c.Nodes))
	for _, i := range c.Majority() {
		v[i] = true
	}
	return v
}

// PinnedConn returns a NATS connection to node i's server only: it never
// fails over to another server (so a request through a partitioned node
// stays there). It is closed when the test ends.
func (c *Cluster) PinnedConn(i int) *nats.Conn {
	c.t.Helper()
	opts := append([]nats.Option{
		nats.Name("writ-cluster-pinned-" + c.Nodes[i].ID), nats.IgnoreDiscoveredServers(),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond), nats.Timeout(RequestTimeout),
	}, c.opts.ConnOptions...)
	nc, err := nats.Connect(c.Nodes[i].URL(), opts...)
	if err != nil {
		c.t.Fatalf("cluster: pinned connection to %s: %v", c.Nodes[i].ID, err)
	}
	c.mu.Lock()
	c.conns = append(c.conns, nc)
	c.mu.Unlock()
	return nc
}

// PinnedClient is an client.Client over PinnedConn(i).
func (c *Cluster) PinnedClient(i int, worker string) *client.Client {
	return client.New(c.PinnedConn(i), worker)
}

// JetStreamDir is node i's JetStream store directory.
func (c *Cluster) JetStreamDir(i int) string { return filepath.Join(c.Nodes[i].DataDir, "jetstream") }

// RaftDir is node i's raft directory (raft.db and snapshots).
func (c *Cluster) RaftDir(i int) string { return filepath.Join(c.Nodes[i].DataDir, "raft") }

// WipeJetStream deletes node i's JetStream store; the node must be down.
func (c *Cluster) WipeJetStream(i int) {
	c.t.Helper()
	if c.Nodes[i].Running() {
		c.t.Fatalf("cluster: WipeJetStream: node %s is running", c.Nodes[i].ID)
	}
	if err := os.RemoveAll(c.JetStreamDir(i)); err != nil {
		c.t.Fatalf("cluster: wiping %s: %v", c.JetStreamDir(i), err)
	}
}

// ExpectExit marks node i's next exit as expected (not a crash), for a
// fault that should make it fail loudly and stop.
func (c *Cluster) ExpectExit(i int) {
	nd := c.Nodes[i]
	nd.mu.Lock()
	nd.expectExit = true
	nd.mu.Unlock()
}

// ExitErr returns node i's exit error once its process has ended, and
// whether it has.
func (c *Cluster) ExitErr(i int) (bool, error) {
	nd := c.Nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		return false, nil
	}
	select {
	case <-nd.exited:
		return true, nd.exitErr
	default:
		return false, nil
	}
}

// LaunchFailing starts node i again, expecting its process to exit on its
// own (a node that must refuse to start), and returns without waiting.
// Use ExitErr to see how it ended.
func (c *Cluster) LaunchFailing(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	nd.mu.Lock()
	nd.expectNextExit = true
	nd.mu.Unlock()
	if err := c.launch(nd); err != nil {
		c.t.Fatalf("cluster: %v", err)
	}
}

// WaitExit waits up to d for node i's process to end and returns its exit
// error; it fails the test if the process is still running.
func (c *Cluster) WaitExit(i int, d time.Duration) error {
	c.t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if done, err := c.ExitErr(i); done {
			return err
		}
		if time.Now().After(end) {
			c.t.Fatalf("cluster: node %s still running %s after it should have stopped", c.Nodes[i].ID, d)
		}
	}
}

// PeersFlag is the --peers value of the cluster's nodes.
func (c *Cluster) PeersFlag() string {
	var ps []string
	for _, nd := range c.Nodes {
		ps = append(ps, nd.ID+"="+nd.RaftAddr)
	}
	return strings.Join(ps, ",")
}
