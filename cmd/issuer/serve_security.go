package main

// Transport security, storage tuning and test hooks of `issuer serve`.
// Kept apart from serve.go so that the flags and their checks read in one
// place.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/raftnode"
)

// secFlags are the TLS, snapshot and test-hook flags.
type secFlags struct {
	tlsCert, tlsKey, tlsCA string
	insecureNoTLS          bool

	snapThreshold uint64
	snapInterval  time.Duration
	trailingLogs  uint64

	// Hidden test hooks (the fault suite): per-link proxies.
	testRaftDial         string // advertised=dial,... raft dial redirects
	testClusterAdvertise string // NATS route advertise address
}

func addSecFlags(fl *pflag.FlagSet, f *secFlags) {
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate of this node: NATS clients, NATS routes and the raft transport (mutual TLS between nodes)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key for --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA that signs every node's certificate; peers are verified against it")
	fl.BoolVar(&f.insecureNoTLS, "insecure-no-tls", false, "run a multi-node cluster without TLS between nodes (never in production)")
	fl.Uint64Var(&f.snapThreshold, "snapshot-threshold", 0, "raft log entries between snapshots (default 8192)")
	fl.DurationVar(&f.snapInterval, "snapshot-interval", 0, "how often raft checks whether to snapshot (default 30s)")
	fl.Uint64Var(&f.trailingLogs, "trailing-logs", 0, "raft log entries kept after a snapshot, so a lagging follower catches up without one (default 10240)")
	fl.StringVar(&f.testRaftDial, "test-raft-dial", "", "test only: dial redirects for raft, advertised=dial,...")
	fl.StringVar(&f.testClusterAdvertise, "test-cluster-advertise", "", "test only: the NATS route address advertised to other servers")
	_ = fl.MarkHidden("test-raft-dial")
	_ = fl.MarkHidden("test-cluster-advertise")
}

// tls reports whether TLS files were given.
func (f *secFlags) tls() bool { return f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "" }

// check refuses an incomplete TLS setup and a cluster without TLS between
// its nodes. peers is the number of raft members; insecure is
// --insecure-no-auth (which already declares an insecure deployment).
func (f *secFlags) check(dev, insecure bool, peers int) error {
	if f.tls() && (f.tlsCert == "" || f.tlsKey == "" || f.tlsCA == "") {
		return fmt.Errorf("TLS needs all of --tls-cert, --tls-key and --tls-ca (nodes verify each other against the CA)")
	}
	if !dev && peers > 1 && !f.tls() && !f.insecureNoTLS && !insecure {
		return fmt.Errorf("a cluster node needs TLS between nodes: pass --tls-cert, --tls-key and --tls-ca " +
			"(raft and NATS routes then use mutual TLS, clients TLS); --insecure-no-tls runs without it (never in production)")
	}
	return nil
}

// applyRaft sets the raft transport's TLS, the snapshot tuning and the
// test dial redirects.
func (f *secFlags) applyRaft(c *raftnode.Config) error {
	if f.tls() {
		c.TLS = &raftnode.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
	}
	if f.snapThreshold > 0 {
		c.SnapshotThreshold = f.snapThreshold
	}
	if f.snapInterval > 0 {
		c.SnapshotInterval = f.snapInterval
	}
	if f.trailingLogs > 0 {
		c.TrailingLogs = f.trailingLogs
	}
	if f.testRaftDial != "" {
		c.DialAddrs = map[string]string{}
		for _, item := range splitList(f.testRaftDial) {
			from, to, ok := strings.Cut(item, "=")
			if !ok {
				return fmt.Errorf("--test-raft-dial: %q is not advertised=dial", item)
			}
			c.DialAddrs[from] = to
		}
	}
	clock, err := testClock()
	if err != nil {
		return err
	}
	c.Clock = clock
	return nil
}

// applyNATS sets the embedded server's TLS and route advertise address.
func (f *secFlags) applyNATS(c *natsbus.ServerConfig) {
	if f.tls() {
		c.TLS = &natsbus.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, CAFile: f.tlsCA}
	}
	if f.testClusterAdvertise != "" {
		c.ClusterAdvertise = f.testClusterAdvertise
	}
}

// natsOptions are the options of a connection to an external NATS cluster.
func (f *secFlags) natsOptions() []nats.Option {
	if f.tlsCA == "" {
		return nil
	}
	return []nats.Option{nats.RootCAs(f.tlsCA)}
}

// natsLogf routes the embedded server's log lines into the node's log at
// their own level: refused clients (authorization violations, publish
// permission violations, failed TLS handshakes) are warnings an operator
// must see, not debug noise.
func natsLogf(lg *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		level := slog.LevelDebug
		switch {
		case strings.Contains(msg, "Error trying to connect to route"):
			// Retried every second while a peer is down: not news.
			level = slog.LevelDebug
		case strings.HasPrefix(msg, "[FTL]"), strings.HasPrefix(msg, "[ERR]"):
			level = slog.LevelError
			if refusal(msg) {
				level = slog.LevelWarn
			}
		case strings.HasPrefix(msg, "[WRN]"):
			level = slog.LevelWarn
		case strings.HasPrefix(msg, "[INF]"):
			level = slog.LevelDebug
		}
		if level < slog.LevelWarn && refusal(msg) {
			level = slog.LevelWarn
		}
		lg.Log(context.Background(), level, strings.TrimSpace(msg), "component", "nats")
	}
}

// refusal reports a log line about a refused client or peer.
func refusal(msg string) bool {
	for _, k := range []string{"Authorization Violation", "Permissions Violation", "Publish Violation", "Subscription Violation",
		"TLS handshake error", "authentication error", "Authentication Timeout"} {
		if strings.Contains(msg, k) {
			return true
		}
	}
	return false
}

// raftContext adds the node's raft term and applied index to every log
// record, once the raft node is running.
type raftContext struct {
	slog.Handler
	fn *atomic.Pointer[func() (term, index uint64)]
}

func newRaftContext(h slog.Handler) raftContext {
	return raftContext{Handler: h, fn: &atomic.Pointer[func() (uint64, uint64)]{}}
}

// set installs the source of term and index.
func (h raftContext) set(fn func() (term, index uint64)) { h.fn.Store(&fn) }

func (h raftContext) Handle(ctx context.Context, r slog.Record) error {
	if fn := h.fn.Load(); fn != nil {
		t, i := (*fn)()
		r.AddAttrs(slog.Uint64("term", t), slog.Uint64("index", i))
	}
	return h.Handler.Handle(ctx, r)
}

func (h raftContext) WithAttrs(as []slog.Attr) slog.Handler {
	return raftContext{Handler: h.Handler.WithAttrs(as), fn: h.fn}
}

func (h raftContext) WithGroup(name string) slog.Handler {
	return raftContext{Handler: h.Handler.WithGroup(name), fn: h.fn}
}

// testClock returns the wall clock raft stamps batches with. The fault
// suite skews it through $WRIT_TEST_CLOCK_SKEW_FILE: a file holding a Go
// duration (for example -10m) added to the real clock, re-read every 50ms
// so a test can make a running node's clock jump. Unset: nil (time.Now).
func testClock() (func() time.Time, error) {
	path := os.Getenv("WRIT_TEST_CLOCK_SKEW_FILE")
	if path == "" {
		return nil, nil
	}
	var (
		mu     sync.Mutex
		skew   time.Duration
		readAt time.Time
	)
	read := func() error {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := strings.TrimSpace(string(raw))
		if s == "" {
			skew = 0
			return nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("WRIT_TEST_CLOCK_SKEW_FILE %s: %w", path, err)
		}
		skew = d
		return nil
	}
	if err := read(); err != nil {
		return nil, err
	}
	readAt = time.Now()
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(readAt) > 50*time.Millisecond {
			_ = read() // keep the last good skew on a torn write
			readAt = time.Now()
		}
		return time.Now().Add(skew)
	}, nil
}

// storageFailStop is how long the raft store may keep failing every log
// append before the node stops itself; jetStreamGrace is how long the
// embedded JetStream may stay shut down (it shuts itself down for good
// when its store runs out of space or loses write permission).
const (
	storageFailStop = 10 * time.Second
	jetStreamGrace  = 2 * time.Second
)

// errStorageFailed is the cause a node stops with when its raft store or
// its JetStream store cannot be written (disk full, read-only data dir).
var errStorageFailed = errors.New("storage failed")

// storageProbe is what watchStorage looks at: the raft store's write
// health, and whether the node's embedded JetStream is running (nil when
// the node uses an external NATS server).
type storageProbe struct {
	raft      func() (err error, failingSince time.Time)
	jetStream func() bool
	tick      time.Duration
}

// watchStorage returns a context that ends, with errStorageFailed as its
// cause, once the node's raft store has failed every log append for
// storageFailStop, or once its embedded JetStream has shut itself down for
// jetStreamGrace. A node that cannot persist must not linger: it can
// neither lead nor vote nor accept entries, a JetStream that shut down
// does not come back by itself after the disk is repaired (its replica
// of the receipt stream stays gone until a restart), and staying up would
// only hide the failure from whoever supervises the process. Stopping is
// fail-stop, never corruption: everything the node acknowledged was
// fsynced before, and it catches up from the others once restarted on a
// repaired disk.
func watchStorage(ctx context.Context, p storageProbe, lg *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	if p.tick <= 0 {
		p.tick = 500 * time.Millisecond
	}
	jsWasUp := p.jetStream != nil && p.jetStream()
	go func() {
		warned := false
		var jsDownSince time.Time
		t := time.NewTicker(p.tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if jsWasUp && !p.jetStream() {
				if jsDownSince.IsZero() {
					jsDownSince = time.Now()
					lg.Error("the embedded JetStream shut itself down (it does so when its store runs out of space or cannot be written): this node's replica of the receipt stream is gone until it restarts")
				}
				if time.Since(jsDownSince) >= jetStreamGrace && ctx.Err() == nil {
					lg.Error("JetStream stays down: stopping this node (fail-stop); free space or fix the data dir's permissions, then restart it")
					cancel(fmt.Errorf("%w: the embedded JetStream shut itself down (out of space or not writable)", errStorageFailed))
					return
				}
			} else {
				jsDownSince = time.Time{}
			}
			err, since := p.raft()
			switch {
			case err == nil:
				warned = false
			case time.Since(since) >= storageFailStop:
				lg.Error("raft storage keeps failing: stopping this node (fail-stop); repair the disk and restart it", "err", err, "failing_for", time.Since(since).Round(time.Millisecond))
				cancel(fmt.Errorf("%w: raft store: %v", errStorageFailed, err))
				return
			case !warned:
				lg.Error("raft storage write failed: this node cannot append, vote or lead until it is repaired", "err", err)
				warned = true
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// checkClusterPeers refuses a node that joins a NATS cluster (--routes)
// without naming its raft peers: it would bootstrap a one-node raft group
// of its own next to the others and mint authority nobody else sees.
func checkClusterPeers(dev bool, peers, routes string) error {
	if dev || strings.TrimSpace(peers) != "" || strings.TrimSpace(routes) == "" {
		return nil
	}
	return fmt.Errorf("--routes makes this node part of a cluster, but --peers is empty: list every raft member as id=host:port,... " +
		"(this node included); without it the node would bootstrap a one-node cluster of its own")
}
