package testenv

import (
	"bytes"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// StartNATS runs a bare embedded nats-server on a random 127.0.0.1 port
// for one test (with JetStream in a temporary store when jetStream is
// set) and shuts it down at cleanup. Tests that need writ's own server
// configuration use natsbus.StartServer instead.
func StartNATS(t testing.TB, jetStream bool) *server.Server {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: jetStream}
	if jetStream {
		opts.StoreDir = t.TempDir()
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(SetupTimeout) {
		s.Shutdown()
		t.Fatalf("nats-server did not start within %s", SetupTimeout)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// SyncBuffer is an io.Writer that a test may read while something else
// (a command's run function, a child process) writes to it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
