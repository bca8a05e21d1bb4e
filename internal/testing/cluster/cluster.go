// Package cluster is a test harness that runs a writ issuer cluster out of
// real processes: it builds ./cmd/issuer once, starts n `issuer serve`
// processes on loopback ports, each with its own data dir and log file, and
// lets a test kill, stop, restart and inspect them.
//
// Every wait is a poll with a deadline; nothing sleeps blindly. Every
// process is killed when the test ends, and when the test failed the tail
// of each node's log is printed.
//
// Use it from a test package whose TestMain calls Main:
//
//	func TestMain(m *testing.M) { cluster.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		c := cluster.Start(t, 3)
//		nc := c.Conn(c.Leader())
//		...
//	}
//
// Environment:
//
//	WRIT_ISSUER_BIN      use this issuer binary instead of building one
//	WRIT_CLUSTER_RACE=1  build the issuer with -race (slow; 2 cores suffer)
//	WRIT_CLUSTER_LOGS=1  print the tail of every node's log even on success
//	WRIT_CLUSTER_LOG_DIR keep every node's whole log there when a test fails
package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/faultproxy"
	"github.com/writ-dev/writ/internal/testing/gobuild"
)

// Time bounds. Generous: a 2-core machine running the test process under
// -race next to three fsyncing issuers is slow, and JetStream needs a few
// seconds to elect its meta leader and place an R3 stream.
const (
	// StartTimeout bounds Start and RestartAll: processes up, a leader
	// elected, the initial policy applied and the API served.
	StartTimeout = 90 * time.Second
	// LeaderTimeout bounds Leader.
	LeaderTimeout = 60 * time.Second
	// ConvergeTimeout bounds WaitConverged and WaitPublished.
	ConvergeTimeout = 60 * time.Second
	// StopTimeout bounds how long a SIGTERMed node may take to exit.
	StopTimeout = 20 * time.Second
	// KillTimeout bounds how long a SIGKILLed node may take to be reaped.
	KillTimeout = 10 * time.Second
	// RequestTimeout bounds one status request.
	RequestTimeout = 2 * time.Second
	// SlowWait: waits longer than this are logged.
	SlowWait = 2 * time.Second
	// LogTailLines is how many lines of each log are printed on failure.
	LogTailLines = 80
)

// ---------------------------------------------------------------------
// The issuer binary.

// bins holds the issuer binary this process built for its clusters.
var bins gobuild.Cache

// Binary returns the path of the issuer binary, building ./cmd/issuer with
// `go build` on the first call (or using $WRIT_ISSUER_BIN).
func Binary() (string, error) {
	if p := os.Getenv("WRIT_ISSUER_BIN"); p != "" {
		return p, nil
	}
	var flags []string
	if os.Getenv("WRIT_CLUSTER_RACE") == "1" {
		flags = append(flags, "-race")
	}
	p, err := bins.Path("github.com/writ-dev/writ/cmd/issuer", flags...)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return p, nil
}

// Main runs the tests of a package that uses the harness, removes the
// built binary, and fails the run if goroutines leaked (goleak). It does
// not return.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	bins.Remove()
	if code == 0 {
		opts = append(opts, goleak.IgnoreAnyFunction("github.com/writ-dev/writ/internal/testing/cluster.spawnLoop"))
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ---------------------------------------------------------------------
// Spawning. Children get SIGKILL when the test binary dies (Pdeathsig), so
// a test binary killed by a timeout panic leaves no issuers behind. Linux
// delivers the signal when the *thread* that forked the child exits, so all
// children are forked from one goroutine locked to its thread for the life
// of the process.

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)

func spawnLoop() {
	runtime.LockOSThread() // never unlocked: the thread lives as long as the process
	for r := range spawnCh {
		r.done <- r.cmd.Start()
	}
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawnLoop() })
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd, done}
	return <-done
}

// ---------------------------------------------------------------------
// Ports.

// reservePorts returns n distinct free loopback ports, held by open
// listeners until release is called: nothing else in this process (the
// fault proxies' own listeners, which take ephemeral ports) can be given
// one of them in the meantime.
func reservePorts(n int) (ports []int, release func(), err error) {
	ls := make([]net.Listener, 0, n)
	release = func() {
		for _, l := range ls {
			l.Close()
		}
	}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}

// ---------------------------------------------------------------------
// Nodes.

// Node is one issuer process.
type Node struct {
	Index       int
	ID          string // raft node id: n1, n2, ...
	RaftAddr    string
	NATSPort    int
	ClusterPort int
	DataDir     string
	LogPath     string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	// expectExit is set before the harness signals the process; an exit
	// without it is reported as a crash.
	expectExit bool
	crashes    []string
	starts     int
	scheme     string
	// expectNextExit: the next launch is expected to exit on its own.
	expectNextExit bool
}

// URL is the node's NATS client URL.
func (n *Node) URL() string {
	scheme := n.scheme
	if scheme == "" {
		scheme = "nats"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, n.NATSPort)
}

// Running reports whether the node's process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Options tune a cluster. The zero value is a plain cluster with the
// built-in initial policy.
type Options struct {
	// StreamReplicas is --stream-replicas (0: the issuer's default, 3 for
	// three or more peers).
	StreamReplicas int
	// PolicyFile is --policy, the initial policy document.
	PolicyFile string
	// LogLevel is --log-level (default info).
	LogLevel string
	// ExtraArgs are appended to every `issuer serve`.
	ExtraArgs []string

	// Proxy puts a fault proxy (internal/faultproxy) on every link between
	// nodes: node i reaches node j's raft transport and NATS route port
	// only through its own links i->j, which Partition, Isolate, SetFaults
	// and Heal control. Clients and the harness still reach every node's
	// client port directly.
	Proxy bool
	// Seed seeds the proxies' random faults (jitter, resets).
	Seed int64
	// BeforeLaunch, if set, runs before every start of a node's process
	// (for example to mount a small filesystem on its data dir).
	BeforeLaunch func(c *Cluster, nd *Node)
	// Env, if set, adds environment variables to a node's process.
	Env func(nd *Node) []string
	// NodeArgs, if set, adds per-node arguments to `issuer serve`.
	NodeArgs func(nd *Node) []string
	// Secure drops --insecure-no-auth: the caller then passes --auth (and
	// TLS) through ExtraArgs or NodeArgs, and ConnOptions/URLScheme for
	// the harness's own connections.
	Secure bool
	// ConnOptions are added to every NATS connection the harness opens.
	ConnOptions []nats.Option
	// URLScheme is the client URL scheme ("nats" by default, "tls" when
	// the nodes require TLS).
	URLScheme string
}

// Cluster is a running set of issuer processes. Its methods fail the test
// (t.Fatalf) when a bounded wait times out, so call them from the test's
// goroutine; TryStatus is safe anywhere.
type Cluster struct {
	t     testing.TB
	opts  Options
	bin   string
	Nodes []*Node

	nc     *nats.Conn   // the harness's own connection, to every node
	direct []*nats.Conn // one connection per node, to that node only

	// links[i][j] carries node i's traffic to node j (Options.Proxy);
	// sink refuses the NATS route gossip that would bypass them.
	links [][]*Link
	sink  *faultproxy.Link

	mu     sync.Mutex
	conns  []*nats.Conn
	groups [][]int // the current partition; nil when whole
}

// Start starts an n-node cluster and waits until a leader is elected, the
// initial policy is applied and the leader serves the API. Everything is
// torn down when t ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("cluster: n must be at least 1, got %d", n)
	}
	bin, err := Binary()
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	root := t.TempDir()
	ports, release, err := reservePorts(3 * n)
	if err != nil {
		t.Fatalf("cluster: picking ports: %v", err)
	}
	c := &Cluster{t: t, opts: opts, bin: bin}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{
			Index: i, ID: id,
			RaftAddr:    fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			NATSPort:    ports[3*i+1],
			ClusterPort: ports[3*i+2],
			DataDir:     filepath.Join(root, id),
			LogPath:     filepath.Join(root, id+".log"),
			scheme:      opts.URLScheme,
		})
	}
	// Cleanups run last-registered first: processes die, then logs are
	// printed, then t.TempDir is removed.
	t.Cleanup(c.printLogsOnFailure)
	t.Cleanup(c.teardown)
	if opts.Proxy {
		// The proxies listen on ephemeral ports of their own: start them
		// while the nodes' ports are still held, so none can take one.
		if err := c.startLinks(); err != nil {
			release()
			t.Fatalf("cluster: %v", err)
		}
	}
	release()

	for _, nd := range c.Nodes {
		if err := c.launch(nd); err != nil {
			t.Fatalf("cluster: %v", err)
		}
	}
	var urls []string
	for _, nd := range c.Nodes {
		urls = append(urls, nd.URL())
	}
	c.nc, err = nats.Connect(strings.Join(urls, ","), append([]nats.Option{
		nats.Name("writ-cluster-harness"),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond), nats.Timeout(RequestTimeout)}, opts.ConnOptions...)...)
	if err != nil {
		t.Fatalf("cluster: harness connection: %v", err)
	}
	for _, nd := range c.Nodes {
		dc, err := nats.Connect(nd.URL(), append([]nats.Option{
			nats.Name("writ-cluster-harness-" + nd.ID), nats.IgnoreDiscoveredServers(),
			nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
			nats.ReconnectWait(50 * time.Millisecond), nats.Timeout(RequestTimeout)}, opts.ConnOptions...)...)
		if err != nil {
			t.Fatalf("cluster: harness connection to %s: %v", nd.ID, err)
		}
		c.direct = append(c.direct, dc)
	}
	c.waitReady(StartTimeout)
	return c
}

// args is the node's `issuer serve` command line.
func (c *Cluster) args(nd *Node) []string {
	var peers, routes, dial []string
	for _, p := range c.Nodes {
		peers = append(peers, p.ID+"="+p.RaftAddr)
		switch {
		case c.links == nil:
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p.ClusterPort))
		case p != nd:
			l := c.links[nd.Index][p.Index]
			routes = append(routes, "nats-route://"+l.Route.Addr())
			dial = append(dial, p.RaftAddr+"="+l.Raft.Addr())
		}
	}
	a := []string{"serve"}
	if !c.opts.Secure {
		a = append(a, "--insecure-no-auth")
	}
	a = append(a,
		"--node-id", nd.ID,
		"--data-dir", nd.DataDir,
		"--raft-addr", nd.RaftAddr,
		"--peers", strings.Join(peers, ","),
		"--nats-host", "127.0.0.1",
		"--nats-port", fmt.Sprint(nd.NATSPort),
		"--log-level", c.opts.LogLevel,
	)
	if len(c.Nodes) > 1 {
		a = append(a, "--cluster-port", fmt.Sprint(nd.ClusterPort), "--routes", strings.Join(routes, ","))
	}
	if c.links != nil {
		a = append(a, "--test-raft-dial", strings.Join(dial, ","), "--test-cluster-advertise", c.sink.Addr())
	}
	if c.opts.NodeArgs != nil {
		a = append(a, c.opts.NodeArgs(nd)...)
	}
	if c.opts.StreamReplicas > 0 {
		a = append(a, "--stream-replicas", fmt.Sprint(c.opts.StreamReplicas))
	}
	if c.opts.PolicyFile != "" {
		a = append(a, "--policy", c.opts.PolicyFile)
	}
	return append(a, c.opts.ExtraArgs...)
}

// launch starts nd's process, appending to its log.
func (c *Cluster) launch(nd *Node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd != nil {
		select {
		case <-nd.exited:
		default:
			return fmt.Errorf("node %s is already running", nd.ID)
		}
	}
	if c.opts.BeforeLaunch != nil {
		c.opts.BeforeLaunch(c, nd)
	}
	f, err := os.OpenFile(nd.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	nd.starts++
	fmt.Fprintf(f, "=== harness: start #%d of %s at %s ===\n", nd.starts, nd.ID, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(c.bin, c.args(nd)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	if c.opts.Env != nil {
		cmd.Env = append(cmd.Env, c.opts.Env(nd)...)
	}
	if err := spawn(cmd); err != nil {
		f.Close()
		return fmt.Errorf("starting node %s: %w", nd.ID, err)
	}
	f.Close() // the child has its own descriptor
	exited := make(chan struct{})
	nd.cmd, nd.exited, nd.exitErr, nd.expectExit = cmd, exited, nil, nd.expectNextExit
	nd.expectNextExit = false
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		nd.exitErr = err
		if !nd.expectExit {
			nd.crashes = append(nd.crashes, fmt.Sprintf("node %s (pid %d) exited on its own: %v", nd.ID, cmd.Process.Pid, err))
		}
		nd.mu.Unlock()
		close(exited)
	}()
	return nil
}

// teardown closes every connection and SIGKILLs every process.
func (c *Cluster) teardown() {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
	if c.nc != nil {
		c.nc.Close()
	}
	for _, dc := range c.direct {
		dc.Close()
	}
	for _, nd := range c.Nodes {
		c.signal(nd, syscall.SIGKILL, KillTimeout)
	}
	c.closeLinks()
	for _, nd := range c.Nodes {
		nd.mu.Lock()
		crashes := nd.crashes
		nd.mu.Unlock()
		for _, cr := range crashes {
			c.t.Errorf("cluster: %s", cr)
		}
	}
}

// signal sends sig to nd (if running) and waits up to d for it to exit. It
// reports whether the process is gone.
func (c *Cluster) signal(nd *Node, sig syscall.Signal, d time.Duration) bool {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	if cmd == nil {
		nd.mu.Unlock()
		return true
	}
	nd.expectExit = true
	nd.mu.Unlock()
	select {
	case <-exited:
		return true
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

func (c *Cluster) printLogsOnFailure() {
	if dir := os.Getenv("WRIT_CLUSTER_LOG_DIR"); dir != "" && c.t.Failed() {
		name := strings.NewReplacer("/", "_", " ", "_").Replace(c.t.Name())
		for _, nd := range c.Nodes {
			if b, err := os.ReadFile(nd.LogPath); err == nil {
				_ = os.MkdirAll(dir, 0o755)
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-%s.log", name, time.Now().UnixNano(), nd.ID)), b, 0o644)
			}
		}
	}
	if !c.t.Failed() && os.Getenv("WRIT_CLUSTER_LOGS") != "1" {
		return
	}
	for _, nd := range c.Nodes {
		c.t.Logf("---- last %d lines of %s (%s) ----\n%s", LogTailLines, nd.ID, nd.LogPath, tail(nd.LogPath, LogTailLines))
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// LogTail returns the last n lines of node i's log.
func (c *Cluster) LogTail(i, n int) string { return tail(c.Nodes[i].LogPath, n) }

// crashErr reports any process that exited without being asked to.
func (c *Cluster) crashErr() error {
	var msgs []string
	for _, nd := range c.Nodes {
		nd.mu.Lock()
		msgs = append(msgs, nd.crashes...)
		nd.mu.Unlock()
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// ---------------------------------------------------------------------
// Process control.

// Kill SIGKILLs node i and waits until it is reaped.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	if !c.signal(c.Nodes[i], syscall.SIGKILL, KillTimeout) {
		c.t.Fatalf("cluster: node %s not reaped %s after SIGKILL", c.Nodes[i].ID, KillTimeout)
	}
}

// Pause SIGSTOPs node i: the process keeps its sockets open and answers
// nothing, as a paused VM, a stuck disk or a very long GC pause looks to
// its peers. Resume undoes it; teardown SIGKILLs a paused node like any
// other.
func (c *Cluster) Pause(i int) { c.t.Helper(); c.sendSignal(i, syscall.SIGSTOP) }

// Resume SIGCONTs node i after Pause.
func (c *Cluster) Resume(i int) { c.t.Helper(); c.sendSignal(i, syscall.SIGCONT) }

func (c *Cluster) sendSignal(i int, sig syscall.Signal) {
	c.t.Helper()
	nd := c.Nodes[i]
	nd.mu.Lock()
	cmd := nd.cmd
	nd.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		c.t.Fatalf("cluster: node %s is not running; cannot send %v", nd.ID, sig)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("cluster: %v to node %s: %v", sig, nd.ID, err)
	}
}

// Stop SIGTERMs node i and waits for it to exit. A node that does not exit
// within StopTimeout is a test failure (and is then SIGKILLed).
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if !c.signal(nd, syscall.SIGTERM, StopTimeout) {
		c.t.Errorf("cluster: node %s did not exit within %s of SIGTERM; killing it", nd.ID, StopTimeout)
		c.signal(nd, syscall.SIGKILL, KillTimeout)
	}
	nd.mu.Lock()
	err := nd.exitErr
	nd.mu.Unlock()
	if err != nil {
		c.t.Errorf("cluster: node %s exited uncleanly after SIGTERM: %v", nd.ID, err)
	}
}

// KillAll SIGKILLs every running node at once (a power cut) and waits
// until all are reaped.
func (c *Cluster) KillAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	gone := make([]bool, len(c.Nodes))
	for i, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gone[i] = c.signal(nd, syscall.SIGKILL, KillTimeout)
		}()
	}
	wg.Wait()
	for i, nd := range c.Nodes {
		if !gone[i] {
			c.t.Fatalf("cluster: node %s not reaped %s after SIGKILL", nd.ID, KillTimeout)
		}
	}
}

// StopAll SIGTERMs every running node at once and waits for all of them.
func (c *Cluster) StopAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	slow := make([]bool, len(c.Nodes))
	for i, nd := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slow[i] = !c.signal(nd, syscall.SIGTERM, StopTimeout)
		}()
	}
	wg.Wait()
	for i, nd := range c.Nodes {
		if slow[i] {
			c.t.Errorf("cluster: node %s did not exit within %s of SIGTERM; killing it", nd.ID, StopTimeout)
			c.signal(nd, syscall.SIGKILL, KillTimeout)
			continue
		}
		nd.mu.Lock()
		err := nd.exitErr
		nd.mu.Unlock()
		if err != nil {
			c.t.Errorf("cluster: node %s exited uncleanly after SIGTERM: %v", nd.ID, err)
		}
	}
}

// Restart starts node i again with the same data dir, ports and flags, and
// waits until it answers its status subject. It does not wait for the
// cluster to converge: use Leader or WaitConverged.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	nd := c.Nodes[i]
	if err := c.launch(nd); err != nil {
		c.t.Fatalf("cluster: %v", err)
	}
	c.poll(StartTimeout, "node "+nd.ID+" answering status after restart", func() error {
		_, err := c.TryStatus(i)
		return err
	})
}

// RestartAll starts every stopped node and waits as Start does.
func (c *Cluster) RestartAll() {
	c.t.Helper()
	for _, nd := range c.Nodes {
		if nd.Running() {
			continue
		}
		if err := c.launch(nd); err != nil {
			c.t.Fatalf("cluster: %v", err)
		}
	}
	c.waitReady(StartTimeout)
}

// ---------------------------------------------------------------------
// Connections and status.

// Conn returns a NATS connection that prefers node i's server and fails
// over to the others in order. It is closed when the test ends.
func (c *Cluster) Conn(i int, opts ...nats.Option) *nats.Conn {
	c.t.Helper()
	urls := []string{c.Nodes[i].URL()}
	for j, nd := range c.Nodes {
		if j != i {
			urls = append(urls, nd.URL())
		}
	}
	base := []nats.Option{
		nats.Name(fmt.Sprintf("writ-cluster-client-%s", c.Nodes[i].ID)),
		nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond), nats.Timeout(RequestTimeout),
	}
	base = append(base, c.opts.ConnOptions...)
	nc, err := nats.Connect(strings.Join(urls, ","), append(base, opts...)...)
	if err != nil {
		c.t.Fatalf("cluster: connecting through %s: %v", c.Nodes[i].ID, err)
	}
	c.mu.Lock()
	c.conns = append(c.conns, nc)
	c.mu.Unlock()
	return nc
}

// Client is an client.Client for worker (empty for operator calls) over
// Conn(i).
func (c *Cluster) Client(i int, worker string) *client.Client {
	return client.New(c.Conn(i), worker)
}

// TryStatus asks node i for its own status on writ.op.status.<id>, over
// the harness's connection to node i itself (so it works across a
// partition).
func (c *Cluster) TryStatus(i int) (api.Status, error) {
	return c.requestStatusOn(c.direct[i], api.SubjectStatus+"."+c.Nodes[i].ID)
}

// Status is TryStatus that fails the test on error.
func (c *Cluster) Status(i int) api.Status {
	c.t.Helper()
	st, err := c.TryStatus(i)
	if err != nil {
		c.t.Fatalf("cluster: status of %s: %v", c.Nodes[i].ID, err)
	}
	return st
}

// LeaderStatus asks writ.op.status, which only a serving leader answers,
// through the running nodes of the majority side (see Partition).
func (c *Cluster) LeaderStatus() (api.Status, error) {
	var last error = errors.New("no node of the majority side is running")
	for _, i := range c.Majority() {
		if !c.Nodes[i].Running() {
			continue
		}
		st, err := c.requestStatusOn(c.direct[i], api.SubjectStatus)
		if err == nil {
			return st, nil
		}
		last = err
	}
	return api.Status{}, last
}

func (c *Cluster) requestStatusOn(nc *nats.Conn, subj string) (api.Status, error) {
	var st api.Status
	msg, err := nc.Request(subj, []byte(`{"v":1}`), RequestTimeout)
	if err != nil {
		return st, fmt.Errorf("%s: %w", subj, err)
	}
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		return st, fmt.Errorf("%s: decoding %q: %w", subj, msg.Data, err)
	}
	return st, nil
}

// poll calls f until it returns nil, failing the test with f's last error
// when d passes or a node crashed.
func (c *Cluster) poll(d time.Duration, what string, f func() error) {
	c.t.Helper()
	begin := time.Now()
	deadline := begin.Add(d)
	wait := 10 * time.Millisecond
	for {
		err := f()
		if err == nil {
			if took := time.Since(begin); took > SlowWait {
				c.t.Logf("cluster: waited %s for %s", took.Round(time.Millisecond), what)
			}
			return
		}
		if cerr := c.crashErr(); cerr != nil {
			c.t.Fatalf("cluster: waiting for %s: %v (last: %v)", what, cerr, err)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster: timed out after %s waiting for %s: %v", d, what, err)
		}
		time.Sleep(wait)
		if wait < 200*time.Millisecond {
			wait *= 2
		}
	}
}

// leaderOnce checks, once, that the running nodes agree on one leader that
// serves the API (the leader-only writ.op.status subject answers from it,
// which happens only after its barrier and initial policy), and returns it.
func (c *Cluster) leaderOnce() (int, api.Status, error) {
	leader := -1
	var lst api.Status
	running := 0
	visible := c.visible()
	for i, nd := range c.Nodes {
		if !nd.Running() || !visible[i] {
			continue
		}
		running++
		st, err := c.TryStatus(i)
		if err != nil {
			return -1, lst, err
		}
		if st.State == "Leader" {
			if leader >= 0 {
				return -1, lst, fmt.Errorf("two leaders: %s and %s", c.Nodes[leader].ID, nd.ID)
			}
			leader, lst = i, st
		}
	}
	if running == 0 {
		return -1, lst, errors.New("no node is running")
	}
	if leader < 0 {
		return -1, lst, errors.New("no leader yet")
	}
	for i, nd := range c.Nodes {
		if !nd.Running() || i == leader || !visible[i] {
			continue
		}
		st, err := c.TryStatus(i)
		if err != nil {
			return -1, lst, err
		}
		if st.Leader != c.Nodes[leader].ID {
			return -1, lst, fmt.Errorf("%s thinks the leader is %q, not %s", nd.ID, st.Leader, c.Nodes[leader].ID)
		}
	}
	if lst.Epoch == 0 {
		return -1, lst, fmt.Errorf("leader %s has no policy yet", c.Nodes[leader].ID)
	}
	served, err := c.LeaderStatus()
	if err != nil {
		return -1, lst, fmt.Errorf("leader %s not serving yet: %w", c.Nodes[leader].ID, err)
	}
	if served.Node != c.Nodes[leader].ID {
		return -1, lst, fmt.Errorf("writ.op.status answered by %s, not the leader %s", served.Node, c.Nodes[leader].ID)
	}
	return leader, served, nil
}

// Leader waits until the running nodes agree on a leader that serves the
// API, and returns its index.
func (c *Cluster) Leader() int {
	c.t.Helper()
	idx := -1
	c.poll(LeaderTimeout, "a serving leader", func() error {
		var err error
		idx, _, err = c.leaderOnce()
		return err
	})
	return idx
}

func (c *Cluster) waitReady(d time.Duration) {
	c.t.Helper()
	c.poll(d, "every node up and a serving leader with a policy", func() error {
		for i, nd := range c.Nodes {
			if !nd.Running() {
				continue
			}
			if _, err := c.TryStatus(i); err != nil {
				return err
			}
		}
		_, _, err := c.leaderOnce()
		return err
	})
}

// WaitConverged waits until there is a serving leader and every running
// node has applied everything the leader has (applied_index) and reports
// the same receipt seq and state digest, and returns that leader's status.
func (c *Cluster) WaitConverged() api.Status {
	c.t.Helper()
	var out api.Status
	c.poll(ConvergeTimeout, "all running nodes at the same seq and state digest", func() error {
		leader, _, err := c.leaderOnce()
		if err != nil {
			return err
		}
		lst, err := c.TryStatus(leader)
		if err != nil {
			return err
		}
		visible := c.visible()
		for i, nd := range c.Nodes {
			if !nd.Running() || i == leader || !visible[i] {
				continue
			}
			st, err := c.TryStatus(i)
			if err != nil {
				return err
			}
			switch {
			case st.AppliedIndex < lst.AppliedIndex:
				return fmt.Errorf("%s applied %d < leader %s applied %d", nd.ID, st.AppliedIndex, lst.Node, lst.AppliedIndex)
			case st.Seq != lst.Seq || st.StateDigest != lst.StateDigest:
				return fmt.Errorf("%s at seq %d digest %.12s, leader %s at seq %d digest %.12s",
					nd.ID, st.Seq, st.StateDigest, lst.Node, lst.Seq, lst.StateDigest)
			}
		}
		out = lst
		return nil
	})
	return out
}

// WaitPublished waits until the leader has published every receipt it has
// applied and the stream's last sequence equals the leader's seq, and
// returns the leader's status.
func (c *Cluster) WaitPublished() api.Status {
	c.t.Helper()
	js, err := jetstream.New(c.nc)
	if err != nil {
		c.t.Fatalf("cluster: jetstream: %v", err)
	}
	var out api.Status
	c.poll(ConvergeTimeout, "every receipt in the stream", func() error {
		leader, _, err := c.leaderOnce()
		if err != nil {
			return err
		}
		st, err := c.TryStatus(leader)
		if err != nil {
			return err
		}
		if st.StreamLastSeq != st.Seq {
			return fmt.Errorf("leader %s at seq %d has published up to %d", st.Node, st.Seq, st.StreamLastSeq)
		}
		ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
		defer cancel()
		s, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return err
		}
		if last := s.CachedInfo().State.LastSeq; last != st.Seq {
			return fmt.Errorf("stream last seq %d, leader seq %d", last, st.Seq)
		}
		out = st
		return nil
	})
	return out
}

// ---------------------------------------------------------------------
// The receipt stream.

// Receipt is one message of the receipt stream.
type Receipt struct {
	StreamSeq uint64
	Subject   string
	MsgID     string
	Data      []byte
}

// readOrdered reads the stream's messages first..last through an ordered
// consumer, in batches. It returns the receipts read, the sequences it
// saw skipped (deleted or never stored) and the first sequence it did
// not get to (last+1 when it read everything); it stops early, without
// error, on any failure, leaving the rest to the caller.
func readOrdered(ctx context.Context, s jetstream.Stream, first, last uint64) (out []Receipt, missing []uint64, next uint64) {
	next = first
	if first == 0 || last < first {
		return nil, nil, next
	}
	// Bounded on its own: while the stream has no leader (after a kill or
	// a partition) creating the consumer retries until its context ends,
	// and the one-at-a-time reads after it need the rest of ctx.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// MaxResetAttempts: an ordered consumer whose stream changes leader
	// recreates itself inside Fetch, which takes no context, and by
	// default retries for ever; two attempts (about 3s) and the reads
	// below take over.
	cons, err := s.OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first,
		MaxResetAttempts: 2,
	})
	if err != nil {
		return nil, nil, next
	}
	// The bulk read itself runs until ctx ends, as long as batches come:
	// each Fetch waits at most 5s, and a consumer that cannot recover
	// returns an error that hands over to the one-at-a-time reads. (A
	// large stream on a loaded machine takes longer than the consumer's
	// creation bound, and reading its rest one message at a time took
	// longer than ctx.)
	for next <= last && ctx.Err() == nil {
		batch, err := cons.Fetch(min(1024, int(last-next+1)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return out, missing, next
		}
		n := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil || md.Sequence.Stream < next {
				return out, missing, next
			}
			for ; next < md.Sequence.Stream && next <= last; next++ {
				missing = append(missing, next)
			}
			if md.Sequence.Stream > last {
				return out, missing, next
			}
			out = append(out, Receipt{StreamSeq: md.Sequence.Stream, Subject: m.Subject(), MsgID: m.Headers().Get(jetstream.MsgIDHeader), Data: m.Data()})
			next = md.Sequence.Stream + 1
			n++
		}
		if batch.Error() != nil || n == 0 {
			return out, missing, next
		}
	}
	return out, missing, next
}

// StreamInfo is the receipt stream's state.
type StreamInfo struct {
	FirstSeq, LastSeq, Msgs uint64
	Deleted                 int
}

// Receipts reads every message of the receipt stream, by stream sequence
// from its first to its last. Missing sequences are reported as an error
// after the read, with what was read.
//
// atLeast is a last sequence the caller has already seen the stream reach
// (0 if none). Right after a heal, a stream leader that was cut off may not
// yet know it was deposed and answers the stream-info request from its
// own, shorter copy: that read is stale, not a lost suffix, so Receipts
// asks again until the stream reaches atLeast or ctx ends.
func (c *Cluster) Receipts(ctx context.Context, atLeast uint64) (StreamInfo, []Receipt, error) {
	var si StreamInfo
	js, err := jetstream.New(c.nc)
	if err != nil {
		return si, nil, err
	}
	// After a heal the JetStream meta and stream leaders may still be
	// electing (503 "temporarily unavailable", timeouts): every read below
	// retries until ctx's deadline, never on a fixed count.
	var s jetstream.Stream
	err = retryTransient(ctx, func() (e error) {
		s, e = js.Stream(ctx, events.StreamName)
		if e == nil && s.CachedInfo().State.LastSeq < atLeast {
			e = fmt.Errorf("stream info says last seq %d, but it was seen at %d (a stale answer)", s.CachedInfo().State.LastSeq, atLeast)
		}
		return e
	})
	if err != nil {
		return si, nil, err
	}
	st := s.CachedInfo().State
	si = StreamInfo{FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Msgs: st.Msgs, Deleted: st.NumDeleted}
	// Read in bulk through an ordered consumer (one round trip per
	// batch); whatever it could not deliver is read one message at a time
	// below, which also tells a missing message from a slow one.
	out, missing, next := readOrdered(ctx, s, st.FirstSeq, st.LastSeq)
	for seq := next; seq <= st.LastSeq && seq > 0; seq++ {
		var m *jetstream.RawStreamMsg
		err = retryTransient(ctx, func() (e error) {
			m, e = s.GetMsg(ctx, seq)
			if errors.Is(e, jetstream.ErrMsgNotFound) {
				return permanent{e}
			}
			return e
		})
		var p permanent
		if errors.As(err, &p) {
			err = p.err
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			missing = append(missing, seq)
			continue
		}
		if err != nil {
			return si, out, fmt.Errorf("reading stream seq %d: %w", seq, err)
		}
		out = append(out, Receipt{StreamSeq: m.Sequence, Subject: m.Subject, MsgID: m.Header.Get(jetstream.MsgIDHeader), Data: m.Data})
	}
	if len(missing) > 0 {
		return si, out, fmt.Errorf("stream is missing seqs %v", missing)
	}
	return si, out, nil
}

// CheckStream reads the receipt stream and fails the test unless it is
// whole: it starts at 1 with nothing deleted, every stream seq holds the
// event with the same seq (and message id), published on its kind's
// subject, every event decodes with a valid hash, and the hash chain is
// intact from seq 1 (so there are no gaps and no duplicates). It returns
// the decoded events (index i holds seq i+1).
func (c *Cluster) CheckStream() []events.Event {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ConvergeTimeout)
	defer cancel()
	si, rs, err := c.Receipts(ctx, 0)
	if err != nil {
		c.t.Fatalf("cluster: receipt stream: %v", err)
	}
	return CheckReceipts(c.t, si, rs)
}

// CheckReceipts is CheckStream for receipts already read.
func CheckReceipts(t testing.TB, si StreamInfo, rs []Receipt) []events.Event {
	t.Helper()
	if si.Msgs > 0 && si.FirstSeq != 1 {
		t.Fatalf("invariant gap-free stream: first seq is %d, want 1", si.FirstSeq)
	}
	if si.Msgs != si.LastSeq || si.Deleted != 0 || uint64(len(rs)) != si.LastSeq {
		t.Fatalf("invariant gap-free stream: last seq %d, %d messages, %d deleted, %d read", si.LastSeq, si.Msgs, si.Deleted, len(rs))
	}
	var chain events.Chain
	out := make([]events.Event, 0, len(rs))
	seen := make(map[events.Hash]uint64, len(rs))
	for i, r := range rs {
		want := uint64(i + 1)
		if r.StreamSeq != want {
			t.Fatalf("invariant gap-free stream: position %d holds stream seq %d", i, r.StreamSeq)
		}
		e, err := events.Decode(r.Data)
		if err != nil {
			t.Fatalf("invariant receipts decode: stream seq %d: %v", r.StreamSeq, err)
		}
		if e.Seq != r.StreamSeq {
			t.Fatalf("invariant event seq == stream seq: stream seq %d holds event seq %d", r.StreamSeq, e.Seq)
		}
		if r.MsgID != fmt.Sprint(e.Seq) {
			t.Fatalf("invariant Nats-Msg-Id == seq: seq %d has message id %q", e.Seq, r.MsgID)
		}
		if r.Subject != events.Subject(e.Kind) {
			t.Fatalf("invariant subject matches kind: seq %d (%s) on %s", e.Seq, e.Kind, r.Subject)
		}
		if err := chain.Check(e); err != nil {
			t.Fatalf("invariant hash chain intact: %v", err)
		}
		if prev, dup := seen[e.Hash]; dup {
			t.Fatalf("invariant no duplicate receipts: seq %d repeats seq %d", e.Seq, prev)
		}
		seen[e.Hash] = e.Seq
		chain.Advance(e)
		out = append(out, e)
	}
	return out
}

// permanent marks an error retryTransient must return at once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retryTransient calls f until it succeeds, returns a permanent error, or
// ctx ends; the last error is returned. Between tries it waits 50 ms,
// doubling to 1 s.
func retryTransient(ctx context.Context, f func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := f()
		var p permanent
		if err == nil || errors.As(err, &p) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-t.C:
		}
		if wait < time.Second {
			wait *= 2
		}
	}
}
