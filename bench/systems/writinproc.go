package systems

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/natsbus"
	"github.com/writ-dev/writ/raftnode"
)

// StartWritInProcess runs the three issuer nodes inside this process, each
// wired exactly as `issuer serve` wires one (embedded clustered NATS with
// JetStream, raftnode with the default config, issuer.Service with an R3
// stream). It exists so that one CPU profile covers the whole spend path;
// the headline numbers come from StartWritProcesses.
func StartWritInProcess(ctx context.Context, dir string, payload int) (*Writ, error) {
	nodes, err := newNodes(dir)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		n.MetricsPort = 0 // raft's timers are process-wide: three nodes here would mix
	}
	var peers []raftnode.Peer
	var routes []string
	for _, n := range nodes {
		peers = append(peers, raftnode.Peer{ID: n.ID, Addr: n.RaftAddr})
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", n.ClusterPort))
	}
	rctx, cancel := context.WithCancel(context.Background())
	var (
		servers []*server.Server
		conns   []*nats.Conn
		rafts   []*raftnode.Node
		wg      sync.WaitGroup
	)
	stop := func() error {
		cancel()
		wg.Wait()
		var errs []error
		for _, r := range rafts {
			errs = append(errs, r.Close())
		}
		for _, c := range conns {
			c.Close()
		}
		for _, s := range servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		scfg := natsbus.DefaultServerConfig()
		scfg.Name, scfg.Port = n.ID, n.NATSPort
		scfg.StoreDir = filepath.Join(n.DataDir, "jetstream")
		scfg.ClusterName, scfg.ClusterPort, scfg.Routes = "writ", n.ClusterPort, routes
		ns, err := natsbus.StartServer(scfg, nil)
		if err != nil {
			stop()
			return nil, err
		}
		servers = append(servers, ns)
		nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns), nats.Name("writ-issuer-"+n.ID), nats.MaxReconnects(-1))
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		rcfg := raftnode.DefaultConfig()
		rcfg.NodeID, rcfg.DataDir, rcfg.RaftBind, rcfg.Peers = n.ID, filepath.Join(n.DataDir, "raft"), n.RaftAddr, peers
		rcfg.LogLevel = "error"
		node, err := raftnode.Start(rcfg, io.Discard)
		if err != nil {
			stop()
			return nil, err
		}
		rafts = append(rafts, node)
		icfg := issuer.DefaultConfig()
		icfg.StreamReplicas = 3
		icfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		svc, err := issuer.New(icfg, node, nc)
		if err != nil {
			stop()
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = svc.Run(rctx) }()
	}
	w := &Writ{Nodes: nodes, Mode: "in-process", payload: payload, stop: stop}
	if err := w.connect(ctx); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}
