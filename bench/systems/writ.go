package systems

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Workers is how many worker identities the benchmark's grants are spread
// over (grants are bound to their grantee; both spends of a grant come
// from the grantee, over two different connections).
const Workers = 16

// Lane and Tool of every benchmark grant: the built-in policy lets the
// coordinator lane call any tool.
const (
	Lane = "coordinator"
	Tool = "Bash"
)

// Node is one issuer node of a Writ cluster: its ids, ports and data dir.
type Node struct {
	ID          string
	RaftAddr    string
	NATSPort    int
	ClusterPort int
	DataDir     string
	// MetricsPort serves the node's /metrics (issuer processes only; 0
	// for in-process nodes).
	MetricsPort int
}

// URL is the node's NATS client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.NATSPort) }

// Writ is a 3-node issuer cluster (processes or in-process nodes) and two
// worker connections that drive it exactly as worker-agent does: client.Client
// requests over NATS, retried with the same idempotency key.
type Writ struct {
	Nodes   []*Node
	Mode    string // "processes" or "in-process"
	payload int
	admin   *nats.Conn
	conns   [2]*nats.Conn
	clients [2][Workers]*client.Client
	stop    func() error
	pids    []int

	mu      sync.Mutex
	tag     string
	ids     []string
	Reasons map[string]int // refusals by reason, for the report
}

func newNodes(dir string) ([]*Node, error) {
	ports, err := FreePorts(12)
	if err != nil {
		return nil, err
	}
	var nodes []*Node
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		nodes = append(nodes, &Node{
			ID: id, RaftAddr: fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			NATSPort: ports[3*i+1], ClusterPort: ports[3*i+2], DataDir: filepath.Join(dir, id),
			MetricsPort: ports[9+i],
		})
	}
	return nodes, nil
}

// connect opens the worker connections and waits until a leader serves the
// API with a policy applied and the R3 receipt stream exists.
func (w *Writ) connect(ctx context.Context) error {
	var urls []string
	for _, n := range w.Nodes {
		urls = append(urls, n.URL())
	}
	dial := func(first int, name string) (*nats.Conn, error) {
		order := []string{urls[first]}
		for j, u := range urls {
			if j != first {
				order = append(order, u)
			}
		}
		return nats.Connect(strings.Join(order, ","), nats.Name(name), nats.DontRandomize(),
			nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	}
	var err error
	if w.admin, err = dial(0, "writ-bench-admin"); err != nil {
		return err
	}
	for c := range w.conns {
		// Worker connection c enters through node c+1's NATS server; the
		// request reaches the leader's subscription wherever it is.
		if w.conns[c], err = dial(c, fmt.Sprintf("writ-bench-worker-%d", c)); err != nil {
			return err
		}
		for k := range Workers {
			cl := client.New(w.conns[c], fmt.Sprintf("w%d", k))
			w.clients[c][k] = cl
		}
	}
	deadline := time.Now().Add(120 * time.Second)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := w.LeaderStatus()
		if err == nil && st.Epoch > 0 {
			js, _ := jetstream.New(w.admin)
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, serr := js.Stream(sctx, events.StreamName)
			cancel()
			if serr == nil {
				return nil
			}
			err = fmt.Errorf("receipt stream: %w", serr)
		} else if err == nil {
			err = errors.New("leader has no policy yet")
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("writ cluster not serving after 120s: %v", last)
}

// LeaderStatus asks writ.op.status, which only the serving leader answers.
func (w *Writ) LeaderStatus() (api.Status, error) { return w.status(api.SubjectStatus) }

// NodeStatus asks one node for its own status.
func (w *Writ) NodeStatus(i int) (api.Status, error) {
	return w.status(api.SubjectStatus + "." + w.Nodes[i].ID)
}

func (w *Writ) status(subj string) (api.Status, error) {
	var st api.Status
	m, err := w.admin.Request(subj, []byte(`{"v":1}`), 2*time.Second)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(m.Data, &st)
	return st, err
}

func (w *Writ) Name() string { return "writ" }

func (w *Writ) NewRound(tag string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tag = tag
	w.ids = make([]string, n)
	if w.Reasons == nil {
		w.Reasons = map[string]int{}
	}
}

func (w *Writ) refused(op string, env grants.Envelope) {
	w.mu.Lock()
	w.Reasons[op+":"+string(env.Reason)]++
	w.mu.Unlock()
}

func (w *Writ) client(conn, i int) *client.Client { return w.clients[conn][i%Workers] }

// Mint is a grant request: request -> permit, answered after the permit is
// committed and applied on the raft group.
func (w *Writ) Mint(ctx context.Context, i int) (bool, error) {
	env, err := w.client(i%2, i).Grant(ctx, api.GrantRequest{
		Lane: Lane, Tool: Tool, Args: Payload(w.tag, i, w.payload),
	})
	if err != nil {
		return false, err
	}
	if env.Decision != grants.Permit || env.GrantID == "" {
		w.refused("grant", env)
		return false, nil
	}
	w.ids[i] = env.GrantID
	return true, nil
}

// Spend spends grant i through connection client, presenting the same args
// (the issuer checks the request digest), with a fresh idempotency key.
func (w *Writ) Spend(ctx context.Context, i, client int) (bool, error) {
	if w.ids[i] == "" {
		return false, errors.New("grant was not minted")
	}
	env, err := w.client(client, i).Spend(ctx, api.SpendRequest{GrantID: w.ids[i], Args: Payload(w.tag, i, w.payload)})
	if err != nil {
		return false, err
	}
	if env.Decision != grants.Permit {
		w.refused("spend", env)
		return false, nil
	}
	return true, nil
}

// Cycle is one full tool call: request -> permit, spend -> attempt, effect
// (confirmed, verifier exit-code). It returns the effect receipt's seq.
func (w *Writ) Cycle(ctx context.Context, i int) (uint64, error) {
	cl := w.client(i%2, i)
	args := Payload(w.tag, i, w.payload)
	env, err := cl.Grant(ctx, api.GrantRequest{Lane: Lane, Tool: Tool, Args: args})
	if err != nil {
		return 0, err
	}
	if env.Decision != grants.Permit {
		return 0, fmt.Errorf("grant refused: %s %s", env.Reason, env.Detail)
	}
	sp, err := cl.Spend(ctx, api.SpendRequest{GrantID: env.GrantID, Args: args})
	if err != nil {
		return 0, err
	}
	if sp.Decision != grants.Permit {
		return 0, fmt.Errorf("spend refused: %s %s", sp.Reason, sp.Detail)
	}
	ef, err := cl.Effect(ctx, api.EffectRequest{GrantID: env.GrantID, Outcome: "confirmed", Verifier: "exit-code"})
	if err != nil {
		return 0, err
	}
	if ef.Decision != grants.Permit {
		return 0, fmt.Errorf("effect refused: %s %s", ef.Reason, ef.Detail)
	}
	return ef.Seq, nil
}

// WaitPublished waits until the receipt stream holds every receipt the
// leader has applied (stream last seq == leader seq) and returns that seq.
func (w *Writ) WaitPublished(ctx context.Context, limit time.Duration) (uint64, error) {
	js, err := jetstream.New(w.admin)
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(limit)
	for {
		st, err := w.LeaderStatus()
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			s, serr := js.Stream(sctx, events.StreamName)
			cancel()
			if serr == nil && s.CachedInfo().State.LastSeq >= st.Seq {
				return st.Seq, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("receipts not all in the stream after %s", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// DiskUsage sums the files under each node's raft dir: the stable store
// (raft.db, which also holds the log on a boltdb node), the WAL's
// segments, the snapshots, and the JetStream store.
type DiskUsage struct {
	Node      string `json:"node"`
	RaftDB    int64  `json:"raft_db_bytes"`
	RaftWAL   int64  `json:"raft_wal_bytes"`
	Snapshots int64  `json:"snapshot_bytes"`
	JetStream int64  `json:"jetstream_bytes"`
}

func (w *Writ) DiskUsage() []DiskUsage {
	var out []DiskUsage
	for _, n := range w.Nodes {
		u := DiskUsage{Node: n.ID}
		if fi, err := os.Stat(filepath.Join(n.DataDir, "raft", "raft.db")); err == nil {
			u.RaftDB = fi.Size()
		}
		u.RaftWAL = dirSize(filepath.Join(n.DataDir, "raft", "wal"))
		u.Snapshots = dirSize(filepath.Join(n.DataDir, "raft", "snapshots"))
		u.JetStream = dirSize(filepath.Join(n.DataDir, "jetstream"))
		out = append(out, u)
	}
	return out
}

func dirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	return total
}

// Leader is the index of the node whose issuer serves writ.op.status.
func (w *Writ) Leader() (int, error) {
	st, err := w.LeaderStatus()
	if err != nil {
		return -1, err
	}
	for i, n := range w.Nodes {
		if n.ID == st.Node {
			return i, nil
		}
	}
	return -1, fmt.Errorf("leader %q is no node of the cluster", st.Node)
}

// Reenter replaces the two worker connections: each is given urls, in
// order, and with affinity set keeps to the leader's server (connect's
// leader affinity, as worker-agent's default). The clients of the old
// connections must be idle.
func (w *Writ) Reenter(urls []string, affinity bool) error {
	for c := range w.conns {
		var (
			nc  *nats.Conn
			err error
		)
		name := fmt.Sprintf("writ-bench-worker-%d", c)
		if affinity {
			nc, err = connect.Options{URL: strings.Join(urls, ","), Name: name, Timeout: 10 * time.Second, LeaderAffinity: true}.Dial()
		} else {
			nc, err = nats.Connect(strings.Join(urls, ","), nats.Name(name), nats.DontRandomize(),
				nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		}
		if err != nil {
			return err
		}
		if old := w.conns[c]; old != nil {
			old.Close()
		}
		w.conns[c] = nc
		for k := range Workers {
			w.clients[c][k] = client.New(nc, fmt.Sprintf("w%d", k))
		}
	}
	return nil
}

// ConnectedTo returns, for each worker connection, the index of the node
// whose server it is connected to (-1: none).
func (w *Writ) ConnectedTo() []int {
	var out []int
	for _, nc := range w.conns {
		at := -1
		u := nc.ConnectedUrl()
		for i, n := range w.Nodes {
			if u != "" && strings.HasSuffix(u, fmt.Sprintf(":%d", n.NATSPort)) {
				at = i
			}
		}
		out = append(out, at)
	}
	return out
}

func (w *Writ) Close() error {
	for _, c := range w.conns {
		if c != nil {
			c.Close()
		}
	}
	if w.admin != nil {
		w.admin.Close()
	}
	if w.stop != nil {
		return w.stop()
	}
	return nil
}

// Heartbeat routes: the built-in policy declares heartbeat@* for the
// isolated lane, leases of at most a minute.
const (
	RouteLane = "isolated"
	RouteTTL  = time.Minute
)

// RouteName is the name of benchmark route i.
func RouteName(i int) string { return fmt.Sprintf("heartbeat@r%05d", i) }

// route sends one route lease operation on route i, in the name of the
// route's owner (worker i%Workers, over connection i%2).
func (w *Writ) route(ctx context.Context, action string, i int) (bool, error) {
	env, err := w.client(i%2, i).Route(ctx, api.RouteRequest{Action: action, Route: RouteName(i), Lane: RouteLane,
		TTLMillis: int64(RouteTTL / time.Millisecond)})
	if err != nil {
		return false, err
	}
	if env.Decision != grants.Permit {
		w.refused("route_"+action, env)
		return false, nil
	}
	return true, nil
}

// AcquireRoute acquires route i for its owner.
func (w *Writ) AcquireRoute(ctx context.Context, i int) (bool, error) {
	return w.route(ctx, api.RouteAcquire, i)
}

// RenewRoute renews the owner's lease on route i: a heartbeat. Each
// renewal moves the expiry, so each is a receipt.
func (w *Writ) RenewRoute(ctx context.Context, i int) (bool, error) {
	return w.route(ctx, api.RouteRenew, i)
}
