package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// smallDisk mounts a tmpfs of the given size on dir (root only).
type smallDisk struct {
	dir     string
	size    string
	mounted bool
}

func (d *smallDisk) mount(t *testing.T) {
	if d.mounted {
		return
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", d.dir, "tmpfs", 0, "size="+d.size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the disk scenarios (needs root and mount rights): %v", err)
	}
	d.mounted = true
	t.Cleanup(func() { _ = syscall.Unmount(d.dir, syscall.MNT_DETACH) })
}

func (d *smallDisk) remount(t *testing.T, readOnly bool) {
	t.Helper()
	flags := uintptr(syscall.MS_REMOUNT)
	if readOnly {
		flags |= syscall.MS_RDONLY
	}
	if err := syscall.Mount("tmpfs", d.dir, "tmpfs", flags, "size="+d.size); err != nil {
		t.Fatalf("remount %s (read-only %v): %v", d.dir, readOnly, err)
	}
}

// fill writes a ballast file until the filesystem is full.
func (d *smallDisk) fill(t *testing.T) string {
	t.Helper()
	p := filepath.Join(d.dir, "ballast")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", d.dir, err)
			}
			break
		}
	}
	// Small writes too, until not even a page fits.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
	_ = f.Sync()
	return p
}

// TestDiskFullOnOneNode is scenario 7 with the leader's disk filling up
// while it runs.
func TestDiskFullOnOneNode(t *testing.T) {
	needFull(t)
	diskScenario(t, diskFull)
}

// TestJetStreamStoreFullOnOneNode is scenario 7 with only the leader's
// JetStream store filling up (raft's store has room). nats-server shuts
// JetStream down for good on a full store, so the node must stop itself
// rather than run on without its replica of the receipt stream.
func TestJetStreamStoreFullOnOneNode(t *testing.T) {
	needFull(t)
	diskScenario(t, jetStreamFull)
}

// TestReadOnlyDataDirOnOneNode is scenario 7 with the leader's data dir
// read-only when it (re)starts. (A filesystem cannot be remounted
// read-only under a process that holds files open for writing, so the
// running case is the disk-full one.)
func TestReadOnlyDataDirOnOneNode(t *testing.T) {
	needFull(t)
	diskScenario(t, readOnlyDir)
}

// diskFault is how diskScenario breaks a node's storage.
type diskFault int

const (
	diskFull      diskFault = iota // the data dir's filesystem fills up
	readOnlyDir                    // the data dir is read-only at (re)start
	jetStreamFull                  // only the JetStream store's filesystem fills up
)

// diskScenario breaks the storage of one node (the leader, the harder
// case) while workers keep asking for grants and spending them through
// every node. Invariants:
//   - the broken node fails loudly: a full disk makes it stop leading (it
//     cannot append), its log and status name the storage error, and once
//     its store has failed every write for 10s it stops itself
//     (fail-stop) with a non-zero exit; with a read-only data dir it
//     refuses to start, non-zero, naming the read-only filesystem;
//   - the others carry on: another node leads and requests invoked well
//     after the fault are answered;
//   - no corruption on recovery: once the storage is repaired and the node
//     restarted, it converges to the same seq and state digest as the
//     others, the stream is whole and audits clean, every answer is
//     committed exactly once, and the spend history is linearizable.
func diskScenario(t *testing.T, fault diskFault) {
	readOnly := fault == readOnlyDir
	what := map[diskFault]string{diskFull: "disk full", readOnlyDir: "read-only data dir", jetStreamFull: "JetStream store full"}[fault]
	disks := map[string]*smallDisk{}
	// raft-wal preallocates each segment file; 4 MiB segments leave room
	// for the rest of a node's data on a 48 MiB disk.
	c := cluster.StartWith(t, 3, cluster.Options{ExtraArgs: []string{"--raft-wal-segment-mb", "4"}, BeforeLaunch: func(_ *cluster.Cluster, nd *cluster.Node) {
		d := disks[nd.ID]
		if d == nil {
			dir := nd.DataDir
			if fault == jetStreamFull {
				dir = filepath.Join(nd.DataDir, "jetstream")
			}
			d = &smallDisk{dir: dir, size: "48m"}
			disks[nd.ID] = d
		}
		d.mount(t)
	}})
	leader := c.Leader()
	victim := disks[c.Nodes[leader].ID]
	h := newHistory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	grantWorker := map[int]string{}
	var gwMu sync.Mutex
	next := 0
	for w := range 3 {
		worker := fmt.Sprintf("w%d", w+1)
		cl := c.Client(w%3, worker)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				gwMu.Lock()
				next++
				g := next
				grantWorker[g] = worker
				gwMu.Unlock()
				key := fmt.Sprintf("d-grant-%d", g)
				m := h.do(record{Kind: opGrant, Grant: g, Worker: worker, Key: key, Via: -1}, func() (grants.Envelope, error) {
					octx, ocancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer ocancel()
					return cl.Grant(octx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(g), IdempotencyKey: key})
				})
				if m.Unknown() || !cluster.IsPermit(m.Env) {
					continue
				}
				skey := fmt.Sprintf("d-spend-%d", g)
				h.do(record{Kind: opSpend, Grant: g, Worker: worker, Key: skey, Via: -1}, func() (grants.Envelope, error) {
					octx, ocancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer ocancel()
					return cl.Spend(octx, api.SpendRequest{GrantID: m.Env.GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: skey})
				})
			}
		}()
	}
	time.Sleep(time.Second)
	var repair func()
	if readOnly {
		c.Kill(leader)
		victim.remount(t, true)
		repair = func() { victim.remount(t, false) }
		c.LaunchFailing(leader)
	} else {
		c.ExpectExit(leader)
		ballast := victim.fill(t)
		repair = func() { os.Remove(ballast) }
	}
	brokeAt := h.since()
	t.Logf("%s on %s (the leader) at %s", what, c.Nodes[leader].ID, brokeAt.Round(time.Millisecond))

	// The others carry on: another node leads.
	deadline := time.Now().Add(45 * time.Second)
	for {
		if st, err := c.LeaderStatus(); err == nil && st.Node != c.Nodes[leader].ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("invariant the others carry on: no other node leads 45s after the %s on %s", what, c.Nodes[leader].ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !readOnly {
		if st, err := c.TryStatus(leader); err == nil {
			t.Logf("%s status: storage_error %q for %dms", st.Node, st.StorageError, st.StorageFailingMS)
		}
	}
	// It stops (fail-stop), or refuses to start.
	exitErr := c.WaitExit(leader, 30*time.Second)
	if exitErr == nil {
		t.Errorf("invariant it fails loudly: %s exited 0 after the %s", c.Nodes[leader].ID, what)
	}
	logTail := c.LogTail(leader, 200)
	wants := []string{"no space left on device"}
	switch fault {
	case readOnlyDir:
		wants = []string{"read-only file system", "not writable"}
	case jetStreamFull:
		wants = []string{"JetStream stays down"}
	}
	named := false
	for _, w := range wants {
		named = named || strings.Contains(logTail, w)
	}
	if !named {
		t.Errorf("invariant it fails loudly: %s's log says none of %q", c.Nodes[leader].ID, wants)
	}
	if !readOnly && !strings.Contains(logTail, "stopping this node (fail-stop)") {
		t.Errorf("invariant it fails loudly: %s's log does not say it stopped for its storage", c.Nodes[leader].ID)
	}
	// Keep the workload going well past the fault.
	for h.since() < brokeAt+8*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	rs := h.all()
	after := 0
	for _, r := range rs {
		if r.Call > brokeAt+5*time.Second && !r.Unknown() {
			after++
		}
	}
	if after == 0 {
		t.Errorf("invariant the others carry on: no request invoked 5s after the fault was answered")
	}
	t.Logf("%s: exit %v; %d requests invoked 5s after the fault answered; grants %v spends %v", c.Nodes[leader].ID, exitErr, after, count(rs, opGrant), count(rs, opSpend))

	// Repair and recover.
	repair()
	c.Restart(leader)
	evs := c.CheckedStream(t, c.WaitPublished())
	checkCommitted(t, rs, evs)
	checkOnePerKey(t, evs)
	gwMu.Lock()
	checkAuthority(t, rs, grantWorker)
	gwMu.Unlock()
	checkDigests(t, c)
}
