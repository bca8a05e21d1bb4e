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
	"github.com/writ-dev/writ/issuer"
)

// serveMetrics listens on addr and serves the node's metrics at /metrics
// until the returned stop is called.
func serveMetrics(addr string, svc *issuer.Service, lg *slog.Logger) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc.EnableMetrics(reg)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, usageError{fmt.Errorf("--metrics-listen %s: %w (pick a free port, e.g. 127.0.0.1:9464)", addr, err)}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", telemetry.Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("metrics listener stopped", "err", err)
		}
	}()
	lg.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
