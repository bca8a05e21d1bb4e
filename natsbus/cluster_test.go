package natsbus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/events"
)

// clusterConfigs returns n configs of one loopback cluster, each routing to
// all members.
func clusterConfigs(t testing.TB, n int) []ServerConfig {
	t.Helper()
	cfgs := make([]ServerConfig, n)
	var routes []string
	for i := range cfgs {
		cfgs[i] = testConfig(t, fmt.Sprintf("n%d", i))
		cfgs[i].ClusterName = "writ-test"
		cfgs[i].ClusterPort = freePort(t)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", cfgs[i].ClusterPort))
	}
	for i := range cfgs {
		cfgs[i].Routes = routes
	}
	return cfgs
}

// localLastSeq is the last sequence of this server's own replica of the
// receipt stream (0 if it has none).
func localLastSeq(s *server.Server) uint64 {
	info, err := s.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return 0
	}
	for _, acc := range info.AccountDetails {
		for _, sd := range acc.Streams {
			if sd.Name == events.StreamName {
				return sd.State.LastSeq
			}
		}
	}
	return 0
}

// publishEventually retries Publish (idempotent) until it succeeds, as an
// issuer would around a leader change.
func publishEventually(t *testing.T, ctx context.Context, p *Publisher, msgs []Message) uint64 {
	t.Helper()
	for {
		got, err := p.Publish(ctx, msgs)
		if err == nil {
			return got
		}
		if ctx.Err() != nil {
			t.Fatalf("Publish %d..%d: %v", msgs[0].Seq, msgs[len(msgs)-1].Seq, err)
		}
		t.Logf("Publish %d..%d: %v (retrying)", msgs[0].Seq, msgs[len(msgs)-1].Seq, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// testCluster is one loopback cluster of servers with a client on each.
// servers[i] is nil while that server is stopped.
type testCluster struct {
	cfgs    []ServerConfig
	servers []*server.Server
	js      []jetstream.JetStream
}

// startCluster starts n servers of one cluster, stops those still running
// when the test ends, connects a client to each, and has every node ensure
// the receipt stream with the given replicas at once while the cluster
// forms. Server logs go to tb when verbose, else nowhere.
func startCluster(tb testing.TB, ctx context.Context, n, replicas int, verbose bool) *testCluster {
	tb.Helper()
	c := &testCluster{cfgs: clusterConfigs(tb, n)}
	c.servers = make([]*server.Server, n)
	tb.Cleanup(func() {
		for _, s := range c.servers {
			if s != nil {
				stopServer(s)
			}
		}
	})
	for i, cfg := range c.cfgs {
		logf := func(string, ...any) {}
		if verbose {
			logf = func(f string, a ...any) { tb.Logf(cfg.Name+" "+f, a...) }
		}
		s, err := StartServer(cfg, logf)
		if err != nil {
			tb.Fatalf("StartServer(%s): %v", cfg.Name, err)
		}
		c.servers[i] = s
	}
	c.js = make([]jetstream.JetStream, n)
	for i, s := range c.servers {
		_, c.js[i] = connect(tb, ClientURL(s))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range c.js {
		wg.Go(func() { _, errs[i] = EnsureStream(ctx, c.js[i], replicas) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("EnsureStream via n%d: %v", i, err)
		}
	}
	return c
}

func TestClusterR3(t *testing.T) {
	start := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }
	ctx := testCtx(t, 45*time.Second)
	c := startCluster(t, ctx, 3, 3, true)
	cfgs, servers, js := c.cfgs, c.servers, c.js

	step("stream ensured")
	// Publish through each node in turn.
	for i := range js {
		from := uint64(i*50 + 1)
		if got := publishEventually(t, ctx, NewPublisher(js[i]), eventMsgs(from, from+49)); got != from+49 {
			t.Fatalf("Publish via n%d returned %d", i, got)
		}
	}
	if msgs, last := streamMsgs(t, ctx, js[0]); msgs != 150 || last != 150 {
		t.Fatalf("stream holds %d messages up to %d, want 150", msgs, last)
	}

	step("published 1..150")
	// Stop the stream leader.
	st, err := js[0].Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if r := st.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream has %d replicas", r)
	}
	down := -1
	for i, cfg := range cfgs {
		if cfg.Name == st.CachedInfo().Cluster.Leader {
			down = i
		}
	}
	if down < 0 {
		t.Fatalf("stream leader %q is not a test server", st.CachedInfo().Cluster.Leader)
	}
	stopServer(servers[down])
	servers[down] = nil
	step(fmt.Sprintf("stopped leader n%d", down))
	up := (down + 1) % len(servers)
	if got := publishEventually(t, ctx, NewPublisher(js[up], WithRequestTimeout(time.Second)), eventMsgs(100, 200)); got != 200 {
		t.Fatalf("Publish with n%d down returned %d", down, got)
	}

	step("published 151..200")
	// Restart it: its replica catches up, and it serves publishes again.
	s, err := StartServer(cfgs[down], func(f string, a ...any) { t.Logf("restarted "+f, a...) })
	if err != nil {
		t.Fatalf("restart n%d: %v", down, err)
	}
	servers[down] = s
	for localLastSeq(s) < 200 {
		if ctx.Err() != nil {
			t.Fatalf("restarted n%d stuck at seq %d", down, localLastSeq(s))
		}
		time.Sleep(50 * time.Millisecond)
	}
	step("restarted node caught up")
	_, jsDown := connect(t, ClientURL(s))
	if got := publishEventually(t, ctx, NewPublisher(jsDown), eventMsgs(190, 210)); got != 210 {
		t.Fatalf("Publish via restarted n%d returned %d", down, got)
	}
	if msgs, last := streamMsgs(t, ctx, jsDown); msgs != 210 || last != 210 {
		t.Fatalf("stream holds %d messages up to %d, want 210", msgs, last)
	}
	step("published 201..210 via restarted node")
	for i, s := range servers {
		for localLastSeq(s) < 210 {
			if ctx.Err() != nil {
				t.Fatalf("n%d replica stuck at seq %d", i, localLastSeq(s))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	step("all replicas at 210")
}
