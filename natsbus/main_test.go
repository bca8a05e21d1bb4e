package natsbus

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/events"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// freePort asks the kernel for a free loopback port. nats-server cannot
// report a port it picked itself for routes, so tests pick ports up front.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testConfig is a single-server config on a free port with a temp store.
func testConfig(t testing.TB, name string) ServerConfig {
	t.Helper()
	cfg := DefaultServerConfig()
	cfg.Name = name
	cfg.Port = freePort(t)
	cfg.StoreDir = t.TempDir()
	return cfg
}

// startServer starts cfg and stops it when the test ends.
func startServer(t testing.TB, cfg ServerConfig) *server.Server {
	t.Helper()
	s, err := StartServer(cfg, t.Logf)
	if err != nil {
		t.Fatalf("StartServer(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { stopServer(s) })
	return s
}

func stopServer(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// connect opens a connection closed when the test ends.
func connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return nc, js
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventMsgs returns messages from..to (inclusive) with deterministic bodies.
func eventMsgs(from, to uint64) []Message {
	var msgs []Message
	for seq := from; seq <= to; seq++ {
		msgs = append(msgs, event(seq))
	}
	return msgs
}

func event(seq uint64) Message {
	return Message{Seq: seq, Subject: "writ.evt.permit", Data: []byte(fmt.Sprintf("event-%d", seq))}
}

// streamMsgs returns the number of messages the stream holds.
func streamMsgs(t testing.TB, ctx context.Context, js jetstream.JetStream) (msgs, last uint64) {
	t.Helper()
	st, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	state := st.CachedInfo().State
	return state.Msgs, state.LastSeq
}
