// Package testenv starts real writ issuer nodes for tests: raft with a
// boltdb log over loopback TCP and an embedded NATS server with JetStream,
// each in its own temporary directory.
package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

// SetupTimeout bounds a first-time setup in a test: a NATS server, a raft
// node bootstrapping and electing itself, a process starting. It is
// generous because the waits poll and return as soon as the setup is done,
// while `go test ./...` on a fresh machine runs them on cores busy
// compiling other packages; a deadline meant for one operation must not
// fail on a slow start.
const SetupTimeout = time.Minute

// FreePort returns a currently free TCP port on 127.0.0.1.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Single is a one-node issuer with embedded NATS.
type Single struct {
	NATS    *server.Server
	Node    *raftnode.Node
	Service *issuer.Service
	URL     string
	cancel  context.CancelFunc
	done    chan error
	conn    *nats.Conn
}

// StartSingle starts a single-node issuer in dir and waits until it leads
// and has applied its initial policy.
func StartSingle(t testing.TB, dir string, mutate func(*raftnode.Config, *issuer.Config)) *Single {
	t.Helper()
	return StartSingleAuth(t, dir, nil, mutate)
}

// StartSingleAuth is StartSingle with NATS authorization: users are added
// to the embedded server, plus an issuer user for the service itself.
func StartSingleAuth(t testing.TB, dir string, users []natsbus.User, mutate func(*raftnode.Config, *issuer.Config)) *Single {
	t.Helper()
	scfg := natsbus.DefaultServerConfig()
	scfg.Name = "n1"
	scfg.Port = FreePort(t)
	scfg.StoreDir = filepath.Join(dir, "jetstream")
	opts := []nats.Option{}
	if len(users) > 0 {
		scfg.Users = append(append([]natsbus.User(nil), users...), natsbus.IssuerUser("issuer", "issuer-secret"))
		opts = append(opts, nats.UserInfo("issuer", "issuer-secret"))
	}
	ns, err := natsbus.StartServer(scfg, nil)
	if err != nil {
		t.Fatalf("nats: %v", err)
	}
	nc, err := nats.Connect(ns.ClientURL(), append(opts, nats.InProcessServer(ns))...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	rcfg := raftnode.DefaultConfig()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	rcfg.NodeID, rcfg.DataDir, rcfg.RaftBind = "n1", filepath.Join(dir, "raft"), addr
	rcfg.Peers = []raftnode.Peer{{ID: "n1", Addr: addr}}
	rcfg.LogLevel = "error"
	rcfg.HeartbeatTimeout, rcfg.ElectionTimeout, rcfg.LeaderLease = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	icfg := issuer.DefaultConfig()
	icfg.DevMode = true
	if mutate != nil {
		mutate(&rcfg, &icfg)
	}
	// A version 1 initial policy stands for a cluster whose log already
	// holds one (written before version 2 existed): it goes into the log
	// as it is, as its first entry, and the issuer starts on that log. The
	// issuer itself refuses to apply a version 1 document.
	var legacy []byte
	if icfg.InitialPolicy != nil {
		if p, err := policy.Parse(icfg.InitialPolicy); err == nil && p.Version == policy.LegacyVersion {
			legacy, icfg.InitialPolicy = icfg.InitialPolicy, nil
		}
	}
	node, err := raftnode.Start(rcfg, io.Discard)
	if err != nil {
		t.Fatalf("raft: %v", err)
	}
	if legacy != nil {
		WaitFor(t, SetupTimeout, "raft leadership", node.IsLeader)
		pctx, pcancel := context.WithTimeout(context.Background(), SetupTimeout)
		env, err := node.Propose(pctx, fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:test", Policy: legacy})
		pcancel()
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("version 1 initial policy: %v %+v", err, env)
		}
	}
	svc, err := issuer.New(icfg, node, nc)
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Single{NATS: ns, Node: node, Service: svc, URL: ns.ClientURL(), cancel: cancel, done: make(chan error, 1), conn: nc}
	go func() { s.done <- svc.Run(ctx) }()
	WaitFor(t, SetupTimeout, "leader with a policy", func() bool {
		st := svc.Status()
		return st.State == "Leader" && st.Epoch > 0 && st.Published >= 1
	})
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the issuer down; safe to call twice.
func (s *Single) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel = nil
	s.Node.Close()
	s.conn.Close()
	s.NATS.Shutdown()
	s.NATS.WaitForShutdown()
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WithInitialPolicy is a StartSingle mutate function that makes doc (a
// policy document, canonical JSON) the policy the issuer applies at epoch
// 1 instead of the built-in default. Tests written against the version 1
// allowlist pass policy.LegacyDefault().Canonical(): a cluster that
// started under it keeps it in its log.
func WithInitialPolicy(doc []byte) func(*raftnode.Config, *issuer.Config) {
	return func(_ *raftnode.Config, c *issuer.Config) { c.InitialPolicy = doc }
}
