package issuer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
)

// Requests without a reply subject are dropped unread and counted: a grant
// sent that way is not decided (its idempotency key stays unused), and
// the other API subjects drop them too.
func TestRequestsWithoutReplyAreDroppedUnread(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	before := env.Service.Status()
	grant := []byte(`{"v":1,"lane":"coordinator","tool":"Bash","args":{"command":"ls"},"idempotency_key":"no-reply"}`)
	sent := []struct {
		subject string
		body    []byte
	}{
		{"writ.api.w1.grant", grant},
		{"writ.api.w1.grant", []byte("garbage that would cost a decode")},
		{api.SubjectRevoke, []byte(`{"v":1,"worker":"w9"}`)},
		{api.SubjectStatus, nil},
		{api.OperatorPrefix + "policy.show", []byte(`{"v":1}`)},
		{api.SubjectReviews, []byte(`{"v":1}`)},
		{issuer.SubjectSnapshot + "." + env.Node.ID(), []byte(`{"v":1,"compact":true}`)},
	}
	for _, m := range sent {
		if err := nc.Publish(m.subject, m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "every request without a reply counted", func() bool {
		return env.Service.DroppedNoReply() == uint64(len(sent))
	})
	// The same grant with a reply subject is decided now, for the first
	// time: the one without a reply never reached the state machine.
	c := client.New(nc, "w1")
	got, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "no-reply"})
	if err != nil || got.Decision != grants.Permit {
		t.Fatalf("grant: %+v %v", got, err)
	}
	after := env.Service.Status()
	if got.Seq != before.Seq+1 || after.Seq != before.Seq+1 {
		t.Fatalf("state moved from seq %d to %d (grant at %d): a request without a reply was decided", before.Seq, after.Seq, got.Seq)
	}
	if after.Revoked != before.Revoked || after.SnapshotIndex != before.SnapshotIndex {
		t.Fatalf("a request without a reply took effect: revoked %d -> %d, snapshot index %d -> %d",
			before.Revoked, after.Revoked, before.SnapshotIndex, after.SnapshotIndex)
	}
	if n := env.Service.DroppedNoReply(); n != uint64(len(sent)) {
		t.Fatalf("dropped %d, want %d", n, len(sent))
	}
}
