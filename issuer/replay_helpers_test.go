package issuer_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// replayToDigest waits until the receipt stream holds every receipt up to
// st's seq, feeds them all to an auditor and fails the test unless the
// auditor's replay reaches st's state digest. It returns the verifier.
func replayToDigest(ctx context.Context, t *testing.T, nc *nats.Conn, st api.Status) *audit.Verifier {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "every receipt in the stream", func() bool {
		s, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.LastSeq >= st.Seq
	})
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	v := audit.NewVerifier(audit.Options{})
	for seq := uint64(1); seq <= st.Seq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Add(m.Data, seq); err != nil {
			t.Fatal(err)
		}
	}
	want, err := events.ParseHash(st.StateDigest)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.CheckDigest(want); err != nil {
		t.Fatal(err)
	}
	return v
}
