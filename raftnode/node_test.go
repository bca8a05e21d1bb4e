package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// hashicorp/raft's Shutdown waits for its own goroutines, and Close waits
// for the batcher and closes the transport, so nothing should outlive a
// test. goleak retries for a while before failing, which covers
// connection-handling goroutines that notice the closed listener a moment
// later.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// testConfig is a single-voter node on loopback TCP with its boltdb log in
// dir. Timeouts are short so that it elects itself quickly.
func testConfig(dir, addr string) Config {
	c := DefaultConfig()
	c.NodeID, c.DataDir, c.RaftBind = "n1", dir, addr
	c.Peers = []Peer{{ID: "n1", Addr: addr}}
	c.LogLevel = "error"
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLease = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	return c
}

func start(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := Start(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func waitLeader(t testing.TB, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !n.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not become leader (state %s)", n.ID(), n.Raft().State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Everything committed by earlier terms is applied before we look.
	if err := n.Barrier(5 * time.Second); err != nil {
		t.Fatalf("barrier: %v", err)
	}
}

func digest(n *Node) (d events.Hash) {
	n.View(func(s *fsm.State, _ uint64) { d = s.Digest() })
	return d
}

func setPolicy(t testing.TB, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := n.Propose(ctx, fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:test", Policy: policy.LegacyDefault().Canonical()})
	if err != nil {
		t.Fatal(err)
	}
	if env.Kind != events.KindEpoch {
		t.Fatalf("policy refused: %+v", env)
	}
}

func requestCmd(t testing.TB, worker string, i int) fsm.Command {
	t.Helper()
	call := []byte(fmt.Sprintf(`{"command":"echo %d"}`, i))
	d, err := args.Digest("Bash", call)
	if err != nil {
		t.Fatal(err)
	}
	return fsm.Command{
		Op: fsm.OpRequest, Caller: worker, GrantID: uuid.NewString(), Lane: "coordinator",
		Tool: "Bash", Digest: d, IdemKey: fmt.Sprintf("%s-%d", worker, i),
	}
}

// propose runs count proposals spread over workers goroutines, released
// together, and returns each command with the envelope it got back.
func propose(t *testing.T, n *Node, workers, each int) (cmds []fsm.Command, envs []grants.Envelope) {
	t.Helper()
	cmds = make([]fsm.Command, workers*each)
	envs = make([]grants.Envelope, workers*each)
	for w := range workers {
		for i := range each {
			cmds[w*each+i] = requestCmd(t, fmt.Sprintf("w%d", w), i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		gate = make(chan struct{})
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for i := range each {
				k := w*each + i
				env, err := n.Propose(ctx, cmds[k])
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("command %d: %w", k, err))
					mu.Unlock()
					return
				}
				envs[k] = env
			}
		}()
	}
	close(gate)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d proposals failed, first: %v", len(errs), errs[0])
	}
	return cmds, envs
}

func TestConcurrentProposalsAreBatchedAndAnsweredInOrder(t *testing.T) {
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("pipeline=%d", depth), func(t *testing.T) { testBatchedInOrder(t, depth) })
	}
}

func testBatchedInOrder(t *testing.T, depth int) {
	cfg := testConfig(t.TempDir(), freeAddr(t))
	cfg.Pipeline = depth
	// A wider batching window than the default makes coalescing certain
	// even on a loaded machine under -race (it applies while fewer than
	// Pipeline entries are in flight); the proposals themselves are what
	// the issuer sends.
	cfg.BatchWait = 2 * time.Millisecond
	n := start(t, cfg)
	waitLeader(t, n)
	setPolicy(t, n)

	const workers, each = 50, 10
	before := n.Raft().LastIndex()
	start := time.Now()
	cmds, envs := propose(t, n, workers, each)
	elapsed := time.Since(start)
	entries := n.Raft().LastIndex() - before

	grantIDs := map[string]bool{}
	seqs := map[uint64]bool{}
	for k, env := range envs {
		if env.Decision != grants.Permit || env.Kind != events.KindPermit {
			t.Fatalf("command %d: want a permit, got %+v", k, env)
		}
		// Each proposer got the answer to its own command, not a neighbour's.
		if env.GrantID != cmds[k].GrantID || env.Digest != cmds[k].Digest {
			t.Fatalf("command %d (grant %s) was answered with %+v", k, cmds[k].GrantID, env)
		}
		if grantIDs[env.GrantID] {
			t.Fatalf("grant id %s answered twice", env.GrantID)
		}
		grantIDs[env.GrantID] = true
		if seqs[env.Seq] {
			t.Fatalf("receipt seq %d answered twice", env.Seq)
		}
		seqs[env.Seq] = true
	}
	n.View(func(s *fsm.State, _ uint64) {
		if st := s.Stats(); st.Grants != workers*each {
			t.Fatalf("state holds %d grants, want %d", st.Grants, workers*each)
		}
	})
	t.Logf("%d commands in %d log entries (%s)", workers*each, entries, elapsed)
	if entries >= workers*each/2 {
		t.Fatalf("%d commands took %d log entries: concurrent proposals were not batched", workers*each, entries)
	}

	// Idempotent retry through the log: the same command again gets the
	// original answer and mints nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	again := cmds[0]
	again.GrantID = uuid.NewString()
	env, err := n.Propose(ctx, again)
	if err != nil {
		t.Fatal(err)
	}
	if env.GrantID != cmds[0].GrantID || env.Seq != envs[0].Seq {
		t.Fatalf("retry with the same idempotency key: want the original %+v, got %+v", envs[0], env)
	}
}

// TestLiveStoreIsFsynced: the default node keeps its log in raft-wal
// (which always syncs) and its term and vote in raft.db, whose bbolt
// handle must not have NoSync set.
func TestLiveStoreIsFsynced(t *testing.T) {
	n := start(t, testConfig(t.TempDir(), freeAddr(t)))
	if in := n.Info(); in.LogStore != LogStoreWAL || in.LogNoSync || !in.LogSyncKnown {
		t.Fatalf("default node: log store %q, no_sync %v (known %v); want the WAL, synced", in.LogStore, in.LogNoSync, in.LogSyncKnown)
	}
	// raft-boltdb does not export its *bbolt.DB; read its NoSync through
	// reflection so the test checks the handle raft really writes to.
	conn := reflect.ValueOf(n.store).Elem().FieldByName("conn")
	if !conn.IsValid() || conn.Kind() != reflect.Pointer || conn.IsNil() {
		t.Skip("raft-boltdb's BoltStore layout changed; TestBoltStoreIsFsynced still pins the options")
	}
	noSync := conn.Elem().FieldByName("NoSync")
	if !noSync.IsValid() || noSync.Kind() != reflect.Bool {
		t.Skip("bbolt.DB layout changed")
	}
	if noSync.Bool() {
		t.Fatal("the raft log's bbolt handle has NoSync set: appends are not fsynced")
	}
}

func TestProposeOnClosedNode(t *testing.T) {
	n := start(t, testConfig(t.TempDir(), freeAddr(t)))
	waitLeader(t, n)
	setPolicy(t, n)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 20 {
		_, err := n.Propose(ctx, requestCmd(t, "w1", i))
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Propose on a closed node: want ErrClosed, got %v", err)
		}
	}
}

// Proposals racing Close each get an answer or an error promptly; none is
// stranded in the queue after the batcher has gone.
func TestCloseWhileProposing(t *testing.T) {
	for round := range 3 {
		n := start(t, testConfig(t.TempDir(), freeAddr(t)))
		waitLeader(t, n)
		setPolicy(t, n)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var bad []error
		for w := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					_, err := n.Propose(ctx, requestCmd(t, fmt.Sprintf("w%d", w), i))
					if err == nil {
						continue
					}
					if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotLeader) {
						mu.Lock()
						bad = append(bad, err)
						mu.Unlock()
					}
					return
				}
			}()
		}
		time.Sleep(time.Duration(20+round*30) * time.Millisecond)
		_ = n.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Logf("%s", buf[:runtime.Stack(buf, true)])
			cancel()
			<-done
			t.Fatalf("round %d: proposals still waiting 10s after Close", round)
		}
		cancel()
		if len(bad) > 0 {
			t.Fatalf("round %d: want ErrClosed or ErrNotLeader after Close, got %v", round, bad[0])
		}
	}
}

func TestRestartKeepsState(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	n := start(t, testConfig(dir, addr))
	waitLeader(t, n)
	setPolicy(t, n)
	propose(t, n, 5, 4)
	want := digest(n)
	if want == fsm.New().Digest() {
		t.Fatal("state did not change")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := start(t, testConfig(dir, addr))
	waitLeader(t, n2)
	if got := digest(n2); got != want {
		t.Fatalf("after restart the state digest is %s, want %s", got, want)
	}
	// And it carries on from there.
	setPolicy(t, n2)
	if digest(n2) == want {
		t.Fatal("a new policy did not change the digest")
	}
}

func TestSnapshotRestoreKeepsState(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	n := start(t, testConfig(dir, addr))
	waitLeader(t, n)
	setPolicy(t, n)
	propose(t, n, 5, 4)
	want := digest(n)
	if err := n.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := start(t, testConfig(dir, addr))
	// raft restores the latest snapshot while starting, before any entry
	// is committed, so the state is there before leadership is.
	if got := digest(n2); got != want {
		t.Fatalf("right after a restart from a snapshot the digest is %s, want %s", got, want)
	}
	waitLeader(t, n2)
	if got := digest(n2); got != want {
		t.Fatalf("after leadership the digest is %s, want %s", got, want)
	}
	// Idempotency records came back with the snapshot: a retry of the
	// first request made before it gets the original grant, not a new one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	retry := requestCmd(t, "w0", 0)
	env, err := n2.Propose(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if env.Decision != grants.Permit || env.GrantID == retry.GrantID {
		t.Fatalf("retry after restore minted a new grant: %+v", env)
	}
	fresh, err := n2.Propose(ctx, requestCmd(t, "w-new", 0))
	if err != nil || fresh.Decision != grants.Permit {
		t.Fatalf("fresh request after restore: %+v %v", fresh, err)
	}
}

// holdApply blocks the state machine's Apply (it waits for the adapter's
// write lock while a View holds the read lock) until the returned func is
// called.
func holdApply(t *testing.T, n *Node) (release func()) {
	t.Helper()
	held, free := make(chan struct{}), make(chan struct{})
	go n.View(func(*fsm.State, uint64) {
		close(held)
		<-free
	})
	<-held
	var once sync.Once
	release = func() { once.Do(func() { close(free) }) }
	t.Cleanup(release)
	return release
}

// A proposal whose entry is not applied within the deadline gets
// context.DeadlineExceeded from ProposeWithin, as from Propose under
// context.WithTimeout, about when the deadline passes; the entries still
// commit, callers whose answer channels were abandoned leave no trace, and
// later callers each get the answer to their own command.
func TestProposeWithinDeadline(t *testing.T) {
	n := start(t, testConfig(t.TempDir(), freeAddr(t)))
	waitLeader(t, n)
	setPolicy(t, n)

	release := holdApply(t, n)
	const timeout = 150 * time.Millisecond
	var (
		wg   sync.WaitGroup
		cmds = make([]fsm.Command, 8)
		errs = make([]error, 8)
		took = make([]time.Duration, 8)
	)
	for i := range cmds {
		cmds[i] = requestCmd(t, "w-held", i)
	}
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if i%2 == 0 {
				_, errs[i] = n.ProposeWithin(timeout, cmds[i])
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				_, errs[i] = n.Propose(ctx, cmds[i])
				cancel()
			}
			took[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("proposal %d while apply is held: want context.DeadlineExceeded, got %v", i, err)
		}
		if took[i] < timeout || took[i] > timeout+2*time.Second {
			t.Fatalf("proposal %d gave up after %s with a %s deadline", i, took[i], timeout)
		}
	}
	release()

	// The held entries were committed all the same: a retry with the same
	// idempotency key (and a fresh grant id) gets the original grant.
	for i, c := range cmds {
		retry := requestCmd(t, "w-held", i)
		env, err := n.ProposeWithin(10*time.Second, retry)
		if err != nil || env.Decision != grants.Permit || env.GrantID != c.GrantID {
			t.Fatalf("retry of timed-out proposal %d: want the original grant %s, got %+v %v", i, c.GrantID, env, err)
		}
	}

	// Answer channels and timers are reused: many callers, each its own
	// answer.
	const workers, each = 16, 20
	wg = sync.WaitGroup{}
	bad := make(chan string, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c := requestCmd(t, fmt.Sprintf("w%d", w), i)
				env, err := n.ProposeWithin(10*time.Second, c)
				if err != nil || env.GrantID != c.GrantID || env.Digest != c.Digest {
					bad <- fmt.Sprintf("worker %d command %d (grant %s): %+v %v", w, i, c.GrantID, env, err)
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	for b := range bad {
		t.Fatal(b)
	}
}

// A deadline that has already passed proposes nothing; a closed node
// still says ErrClosed first.
func TestProposeWithinPassedDeadline(t *testing.T) {
	n := start(t, testConfig(t.TempDir(), freeAddr(t)))
	waitLeader(t, n)
	setPolicy(t, n)
	before := n.Raft().LastIndex()
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := n.ProposeWithin(d, requestCmd(t, "w1", 0)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ProposeWithin(%s): want context.DeadlineExceeded, got %v", d, err)
		}
	}
	if got := n.Raft().LastIndex(); got != before {
		t.Fatalf("an expired proposal reached the log (last index %d -> %d)", before, got)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{0, time.Second} {
		if _, err := n.ProposeWithin(d, requestCmd(t, "w1", 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("ProposeWithin(%s) on a closed node: want ErrClosed, got %v", d, err)
		}
	}
}
