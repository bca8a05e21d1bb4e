package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsbus"
)

// nats-server shuts its JetStream down for good when the store runs out of
// space or cannot be written, and it does not come back when the disk is
// repaired. The node must then stop itself (fail-stop, exit 3) instead of
// running on without its replica of the receipt stream.
func TestStorageWatchStopsWhenJetStreamShutsDown(t *testing.T) {
	cfg := natsbus.DefaultServerConfig()
	cfg.Name, cfg.Host, cfg.Port = "n1", "127.0.0.1", testenv.FreePort(t)
	cfg.StoreDir = filepath.Join(t.TempDir(), "jetstream")
	ns, err := natsbus.StartServer(cfg, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	healthy := func() (error, time.Time) { return nil, time.Time{} }
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))

	ctx, stop := watchStorage(context.Background(), storageProbe{raft: healthy, jetStream: ns.JetStreamEnabled, tick: 50 * time.Millisecond}, lg)
	defer stop()
	select {
	case <-ctx.Done():
		t.Fatalf("stopped while JetStream runs: %v", context.Cause(ctx))
	case <-time.After(300 * time.Millisecond):
	}
	// What handleOutOfSpace and handleWritePermissionError do.
	if err := ns.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(jetStreamGrace + testenv.SetupTimeout):
		t.Fatal("the node kept running with its JetStream shut down")
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, errStorageFailed) || !strings.Contains(cause.Error(), "JetStream") {
		t.Fatalf("stopped with %v, want errStorageFailed naming JetStream", cause)
	}
}

// A raft store whose appends keep failing stops the node after
// storageFailStop; a store that recovers in time does not.
func TestStorageWatchStopsOnRaftStoreFailure(t *testing.T) {
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	full := errors.New("no space left on device")
	failing := func() (error, time.Time) { return full, time.Now().Add(-storageFailStop) }
	ctx, stop := watchStorage(context.Background(), storageProbe{raft: failing, tick: 10 * time.Millisecond}, lg)
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(testenv.SetupTimeout):
		t.Fatal("the node kept running on a failing raft store")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errStorageFailed) || !strings.Contains(cause.Error(), "no space left") {
		t.Fatalf("stopped with %v", cause)
	}

	recent := func() (error, time.Time) { return full, time.Now() }
	ctx2, stop2 := watchStorage(context.Background(), storageProbe{raft: recent, tick: 10 * time.Millisecond}, lg)
	defer stop2()
	select {
	case <-ctx2.Done():
		t.Fatalf("stopped before storageFailStop: %v", context.Cause(ctx2))
	case <-time.After(200 * time.Millisecond):
	}
}
