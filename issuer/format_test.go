package issuer_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// receiptAt waits for the receipt at seq in the stream and decodes it.
func receiptAt(ctx context.Context, t *testing.T, nc *nats.Conn, seq uint64) events.Event {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	testenv.WaitFor(t, 10*time.Second, "receipt in the stream", func() bool {
		s, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return false
		}
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return false
		}
		data = m.Data
		return true
	})
	e, err := events.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// registerAndGrant registers a fetched page and asks for a grant, and
// returns their receipts.
func registerAndGrant(ctx context.Context, t *testing.T, nc *nats.Conn) (src, permit events.Event) {
	t.Helper()
	w := client.New(nc, "w1")
	s, err := w.RegisterSource(ctx, api.SourceRequest{ID: "web1", Channel: "web_fetch", Tool: "WebFetch",
		Path: "/work/w1/page.html", ContentDigest: events.Sum([]byte("<html>")).String()})
	if err != nil || s.Decision != grants.Permit {
		t.Fatalf("register: %+v %v", s, err)
	}
	g, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"go test ./..."}`)})
	if err != nil || g.Decision != grants.Permit {
		t.Fatalf("grant: %+v %v", g, err)
	}
	return receiptAt(ctx, t, nc, s.Seq), receiptAt(ctx, t, nc, g.Seq)
}

// A single node's build writes receipt format 2 (and above) and it is the
// only voter: leading, it raises the level to its build's highest, and the permits and source registrations
// decided from then on carry the new form, which the auditor's replay
// folds to the issuer's digest.
func TestReceiptFormatRaisedWhenEveryVoterWritesIt(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	testenv.WaitFor(t, 10*time.Second, "the build's receipt format", func() bool {
		return env.Service.Status().ReceiptFormatLevel == fsm.MaxReceiptFormat
	})
	if st := env.Service.Status(); st.ReceiptFormat != fsm.MaxReceiptFormat {
		t.Fatalf("status reports receipt_format %d, want %d", st.ReceiptFormat, fsm.MaxReceiptFormat)
	}
	src, permit := registerAndGrant(ctx, t, nc)
	if !permit.Charged {
		t.Fatalf("the permit carries no usage facts: %+v", permit)
	}
	if src.SourceID != "web1" || src.SourcePath != "/work/w1/page.html" || len(src.Sources) != 0 || src.Target != "" {
		t.Fatalf("the source event is not in the source fields: %+v", src)
	}
	replayToDigest(ctx, t, nc, env.Service.Status())
}

// A voter that does not write format 2 holds the cluster at the legacy
// form: here the only voter is held at 1 (as a voter of an earlier build
// reports), so the leader never raises the level and permits and source
// events are written as before levels existed.
func TestReceiptFormatHeldWhileAVoterDoesNotWriteIt(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, ic *issuer.Config) {
		ic.ReceiptFormat = fsm.ReceiptFormatLegacy
		ic.FormatCheckEvery = 10 * time.Millisecond
	})
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, permit := registerAndGrant(ctx, t, nc)
	st := env.Service.Status()
	if st.ReceiptFormat != fsm.ReceiptFormatLegacy || st.ReceiptFormatLevel != fsm.ReceiptFormatLegacy {
		t.Fatalf("status: receipt_format %d, level %d", st.ReceiptFormat, st.ReceiptFormatLevel)
	}
	if permit.Charged || permit.LedgerUntil != 0 || permit.InstrumentUntil != 0 || len(permit.Quotas) != 0 {
		t.Fatalf("a legacy permit carries usage facts: %+v", permit)
	}
	if src.SourceID != "" || src.SourcePath != "" || len(src.Sources) != 1 || src.Sources[0] != "web1" || src.Target != "path:/work/w1/page.html" {
		t.Fatalf("the source event is not in the packed form: %+v", src)
	}
	replayToDigest(ctx, t, nc, st)
}

// The leader counts a voter as writing the lowest level it can: one that
// answers status without receipt_format (a build that predates levels)
// or does not answer at all writes 1; one that reports 2 writes 2.
func TestClusterFormatAsksEveryVoter(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	self := env.Node.ID()
	if got := env.Service.ClusterFormat(ctx, []string{self}); got != fsm.MaxReceiptFormat {
		t.Fatalf("alone: %d", got)
	}
	if got := env.Service.ClusterFormat(ctx, []string{self, "silent"}); got != fsm.ReceiptFormatLegacy {
		t.Fatalf("with a voter that does not answer: %d", got)
	}
	var answer atomic.Pointer[string]
	answer.Store(ptr(`{"node":"old","state":"Follower","seq":7}`))
	sub, err := nc.Subscribe(api.SubjectStatus+".old", func(m *nats.Msg) { _ = m.Respond([]byte(*answer.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := env.Service.ClusterFormat(ctx, []string{self, "old"}); got != fsm.ReceiptFormatLegacy {
		t.Fatalf("with a voter that predates levels: %d", got)
	}
	answer.Store(ptr(`{"node":"old","receipt_format":2}`))
	if got := env.Service.ClusterFormat(ctx, []string{self, "old"}); got != fsm.ReceiptFormatFacts {
		t.Fatalf("with a voter that writes 2: %d", got)
	}
}

func ptr(s string) *string { return &s }
