package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/writ-dev/writ/internal/telemetry"
)

// metricsServer serves one node's metrics at /metrics. The issuer's own
// series join reg once its service exists (issuer.Service.EnableMetrics).
type metricsServer struct {
	reg       *prometheus.Registry
	srv       *http.Server
	uninstall func()
}

// serveMetrics listens on addr and serves the process's metrics at
// /metrics until stop is called. It makes the process's go-metrics sink
// (the only place hashicorp/raft reports its timers) node's raft stage
// histogram: one issuer process runs one raft node.
func serveMetrics(addr, node string, lg *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--metrics-listen %s: %w (pick a free port, e.g. 127.0.0.1:9464)", addr, err)}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	uninstall, err := telemetry.InstallRaftStages(telemetry.NewRaftStages(reg, node))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("raft stage metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.Handler(reg))
	m := &metricsServer{reg: reg, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, uninstall: uninstall}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("metrics listener stopped", "err", err)
		}
	}()
	lg.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return m, nil
}

// stop closes the listener and puts go-metrics' discarding sink back.
func (m *metricsServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	m.uninstall()
}
