package issuer

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/natsbus"
)

// A snapshot request while another is being sent, or while the node is at
// its in-flight limit, is answered issuer_unavailable at once: nothing
// queues behind a snapshot, and nothing is taken (the node is not touched:
// this Service has none).
func TestSnapshotRequestsAreBounded(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := natsbus.DefaultServerConfig()
	cfg.Name, cfg.Port, cfg.StoreDir = "n1", port, t.TempDir()
	ns, err := natsbus.StartServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s := &Service{nc: nc, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sem: make(chan struct{}, 2), snapSlot: make(chan struct{}, 1)}

	ask := func(what string) {
		t.Helper()
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		s.handleSnapshot(&nats.Msg{Subject: SubjectSnapshot + ".n1", Reply: inbox, Data: []byte(`{"v":1,"compact":true}`)})
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: no answer: %v", what, err)
		}
		var rep SnapshotReply
		if err := json.Unmarshal(m.Data, &rep); err != nil || rep.Code != grants.ReasonIssuerUnavail || rep.Chunks != 0 ||
			!strings.Contains(rep.Error, "nothing was decided or changed") {
			t.Fatalf("%s: answer %s (%v); want %s saying nothing was decided", what, m.Data, err, grants.ReasonIssuerUnavail)
		}
	}
	s.snapSlot <- struct{}{} // a snapshot being sent
	ask("second snapshot")
	if len(s.sem) != 0 {
		t.Fatalf("a refused snapshot kept %d in-flight slots", len(s.sem))
	}
	<-s.snapSlot
	s.sem <- struct{}{} // the in-flight limit reached by requests
	s.sem <- struct{}{}
	ask("snapshot at the in-flight limit")
	if len(s.snapSlot) != 0 {
		t.Fatal("a refused snapshot kept the snapshot slot")
	}
}
