package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/internal/testing/faultproxy"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

const testLeaderHeader = "Writ-Leader-Nats"

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":  "127.0.0.1:4222",
		" 127.0.0.1:5000 ":       "127.0.0.1:5000",
		"tls://Issuer-1.Example": "issuer-1.example:4222",
		"nats://u:p@h:1":         "h:1",
		"nats://[::1]:7":         "[::1]:7",
		"":                       "",
		"nats://:4222":           "",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// A single server gives leader affinity nothing to do: no Affinity.
func TestAffinityNeedsSeveralServers(t *testing.T) {
	if a := newAffinity("nats://127.0.0.1:4222", 0); a != nil {
		t.Error("an Affinity for one server")
	}
	if a := newAffinity("nats://127.0.0.1:4222, 127.0.0.1:4222", 0); a != nil {
		t.Error("an Affinity for one server given twice")
	}
	if a := newAffinity("nats://127.0.0.1:4222,nats://127.0.0.1:4223", 0); a == nil || a.every != DefaultAffinityEvery {
		t.Errorf("want an Affinity moving at most every %s, got %+v", DefaultAffinityEvery, a)
	}
	var a *Affinity
	a.Hint("nats://127.0.0.1:4222") // a nil Affinity does nothing
	if a.Moves() != 0 {
		t.Error("a nil Affinity moved")
	}
}

// leaderRig is one NATS server reached through two proxies, so that a
// connection can be "at" either address; an echo service answers with
// the header naming the address set as the leader's.
type leaderRig struct {
	links  [2]*faultproxy.Link
	leader atomic.Int32
	url    string
}

func newLeaderRig(t *testing.T) *leaderRig {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(testenv.SetupTimeout) {
		t.Fatal("nats server did not start")
	}
	r := &leaderRig{}
	for i := range r.links {
		l, err := faultproxy.Listen(fmt.Sprintf("nats%d", i), s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		r.links[i] = l
	}
	echo, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(echo.Close)
	if _, err := echo.Subscribe("echo", func(m *nats.Msg) {
		out := nats.NewMsg(m.Reply)
		out.Data = m.Data
		out.Header.Set(testLeaderHeader, r.addr(int(r.leader.Load())))
		_ = m.RespondMsg(out)
	}); err != nil {
		t.Fatal(err)
	}
	if err := echo.Flush(); err != nil {
		t.Fatal(err)
	}
	r.url = r.addr(0) + "," + r.addr(1)
	return r
}

func (r *leaderRig) addr(i int) string { return "nats://" + r.links[i].Addr() }

// at reports which of the rig's addresses nc is connected to (-1: none).
func (r *leaderRig) at(nc *nats.Conn) int {
	u := nc.ConnectedUrl()
	for i, l := range r.links {
		if u != "" && strings.Contains(u, l.Addr()) {
			return i
		}
	}
	return -1
}

// A connection given two servers moves to the one the answers name as the
// leader's, with no request failing across the move (those in flight are
// answered first); it moves again only after AffinityEvery, never to a
// server it was not given, and requests keep working throughout.
func TestAffinityMovesToTheLeaderWithoutLosingRequests(t *testing.T) {
	r := newLeaderRig(t)
	const every = 3 * time.Second
	nc, err := Options{URL: r.url, Timeout: testenv.SetupTimeout, LeaderAffinity: true, AffinityEvery: every}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	a := AffinityOf(nc)
	if a == nil {
		t.Fatal("no Affinity for a connection given two servers with LeaderAffinity")
	}
	if noAff, err := (Options{URL: r.url, Timeout: testenv.SetupTimeout}).Dial(); err != nil {
		t.Fatal(err)
	} else if AffinityOf(noAff) != nil {
		t.Error("an Affinity without LeaderAffinity")
		noAff.Close()
	} else {
		noAff.Close()
	}

	// Requests run throughout on eight goroutines; none may fail.
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		done   atomic.Int64
		failed atomic.Int64
		errMu  sync.Mutex
		errs   []error
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				body := []byte(fmt.Sprintf("%d-%d", g, k))
				m, err := a.Request(ctx, nc, "echo", body, testLeaderHeader)
				cancel()
				if err == nil && string(m.Data) != string(body) {
					err = fmt.Errorf("answer %q to %q", m.Data, body)
				}
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
					continue
				}
				done.Add(1)
			}
		}()
	}
	finish := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer finish()

	waitAt := func(want int, within time.Duration) time.Duration {
		t.Helper()
		begin := time.Now()
		for r.at(nc) != want {
			if time.Since(begin) > within {
				t.Fatalf("connected to %q, not to the leader's %s, %s after it was named", nc.ConnectedUrl(), r.addr(want), within)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(begin)
	}

	first := r.at(nc)
	if first < 0 {
		t.Fatalf("connected to %q, neither of %s", nc.ConnectedUrl(), r.url)
	}
	other := 1 - first
	r.leader.Store(int32(other))
	took := waitAt(other, every+10*time.Second)
	if took < every/2 {
		t.Errorf("moved %s after connecting, before AffinityEvery (%s)", took, every)
	}
	t.Logf("moved from %s to %s %s after the leader was named (connecting counts as a move)", r.addr(first), r.addr(other), took.Round(time.Millisecond))
	if n := a.Moves(); n != 1 {
		t.Fatalf("%d moves, want 1", n)
	}

	// The leader flips straight back: within AffinityEvery of the move the
	// connection stays (a flapping leader cannot make it thrash).
	movedAt := time.Now()
	r.leader.Store(int32(first))
	for time.Since(movedAt) < every/3 {
		if at := r.at(nc); at != other && at != -1 {
			t.Fatalf("moved back to %s %s after the previous move", r.addr(at), time.Since(movedAt).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := a.Moves(); n != 1 {
		t.Fatalf("%d moves within %s, want 1", n, every/3)
	}
	// Once AffinityEvery has passed, it follows the leader back.
	took = waitAt(first, every+10*time.Second)
	t.Logf("moved back %s after the leader flipped (at most one move per %s)", took.Round(time.Millisecond), every)

	// A leader at a server the connection was not given: it stays.
	moves := a.Moves()
	a.mu.Lock()
	a.lastMove = time.Time{}
	a.mu.Unlock()
	a.Hint("nats://127.0.0.1:1")
	if a.Moves() != moves || r.at(nc) != first {
		t.Errorf("moved to a server it was not given")
	}

	finish()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed across the moves, first: %v", failed.Load(), failed.Load()+done.Load(), errs[0])
	}
	if done.Load() == 0 {
		t.Fatal("no request was answered")
	}
	t.Logf("%d requests answered, none failed", done.Load())

	nc.Close()
	if AffinityOf(nc) != nil {
		t.Error("a closed connection keeps its Affinity")
	}
}

// Leader affinity leaves failover as it was: a stalled server is left
// within seconds even when it is the leader's.
func TestAffinityKeepsStallFailover(t *testing.T) {
	r := newLeaderRig(t)
	nc, err := Options{URL: r.url, Timeout: testenv.SetupTimeout, LeaderAffinity: true}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	a := AffinityOf(nc)
	first := r.at(nc)
	r.leader.Store(int32(first)) // the leader's server is the one it is on
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := a.Request(ctx, nc, "echo", []byte("before"), testLeaderHeader); err != nil {
		t.Fatalf("request before the stall: %v", err)
	}
	cancel()
	r.links[first].Set(faultproxy.Faults{Blackhole: true})
	stalledAt := time.Now()
	bound := StallDetection + 2*time.Second + 5*time.Second
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, err := a.Request(ctx, nc, "echo", []byte("after"), testLeaderHeader)
		cancel()
		if err == nil && r.at(nc) == 1-first {
			t.Logf("answered through %s %s after the stall", nc.ConnectedUrl(), time.Since(stalledAt).Round(100*time.Millisecond))
			break
		}
		if time.Since(stalledAt) > bound {
			t.Fatalf("still on the stalled server %s after the stall (last error: %v)", time.Since(stalledAt).Round(100*time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a.Moves() != 0 {
		t.Errorf("%d moves: the hint named the stalled server, which it may not return to within AffinityEvery", a.Moves())
	}
}

// A connection idle since its first request follows the leader's
// announcement on api.SubjectLeader.
func TestAffinityFollowsAnnouncements(t *testing.T) {
	r := newLeaderRig(t)
	nc, err := Options{URL: r.url, Timeout: testenv.SetupTimeout, LeaderAffinity: true}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	a := AffinityOf(nc)
	// A connection that made no request does not listen.
	if n := nc.NumSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions before any request", n)
	}
	// One request (answered naming the server it is at), then idle.
	r.leader.Store(int32(r.at(nc)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := a.Request(ctx, nc, "echo", []byte("x"), testLeaderHeader); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := nc.Flush(); err != nil { // the announcement subscription is in place
		t.Fatal(err)
	}
	pub, err := nats.Connect(r.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	other := 1 - r.at(nc)
	b, _ := json.Marshal(api.LeaderAnnouncement{V: api.Version, Node: "n2", Term: 2, NATSURL: r.addr(other)})
	begin := time.Now()
	for r.at(nc) != other {
		if time.Since(begin) > 10*time.Second {
			t.Fatalf("still at %q 10s after announcing %s", nc.ConnectedUrl(), r.addr(other))
		}
		if err := pub.Publish(api.SubjectLeader, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("moved %s after the announcement", time.Since(begin).Round(time.Millisecond))
	if n := AffinityOf(nc).Moves(); n != 1 {
		t.Errorf("%d moves, want 1", n)
	}
}

// hostPort never panics, and what it returns is a host:port whose host is
// lower case, or "".
func FuzzHostPort(f *testing.F) {
	for _, s := range []string{"nats://127.0.0.1:4222", "tls://H:1", "[::1]", "nats://u:p@h", "%", "nats://:0", "a,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hp := hostPort(s)
		if hp == "" {
			return
		}
		h, p, err := net.SplitHostPort(hp)
		if err != nil || h == "" || p == "" || strings.ToLower(h) != h {
			t.Fatalf("hostPort(%q) = %q: %v", s, hp, err)
		}
		a := newAffinity("nats://127.0.0.1:1,nats://127.0.0.1:2", 0)
		a.Hint(s) // not bound to a connection: nothing happens
		if a.Moves() != 0 {
			t.Fatal("moved")
		}
	})
}
