package issuer_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
)

// askSnapshot sends body to the node's snapshot subject and returns the
// head of the answer and how many more messages arrived.
func askSnapshot(t *testing.T, nc *nats.Conn, node string, body []byte) (issuer.SnapshotReply, int) {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(issuer.SubjectSnapshot+"."+node, inbox, body); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer to %q: %v", body, err)
	}
	var rep issuer.SnapshotReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		t.Fatalf("answer to %q is not a SnapshotReply: %s", body, m.Data)
	}
	extra := 0
	for range rep.Chunks {
		if _, err := sub.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("chunk missing: %v", err)
		}
		extra++
	}
	// Nothing beyond the announced chunks.
	if _, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		extra++
	}
	return rep, extra
}

// A snapshot request body is validated: garbage, unknown fields, a missing
// or unknown version are refused with a code, and nothing is done (no
// state sent, no raft snapshot taken).
func TestSnapshotRequestBodyIsValidated(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	node := env.Node.ID()
	before := env.Service.Status().SnapshotIndex
	cases := []struct {
		body string
		code grants.Reason
	}{
		{"garbage", grants.ReasonInvalidRequest},
		{"", grants.ReasonInvalidRequest},
		{"null", grants.ReasonInvalidRequest},
		{"[1]", grants.ReasonInvalidRequest},
		{`{"compact":true}`, grants.ReasonInvalidRequest},
		{`{"v":1,"compact":true,"all":true}`, grants.ReasonInvalidRequest},
		{`{"v":1,"compact":"yes"}`, grants.ReasonInvalidRequest},
		{`{"v":1,"compact":true}{"v":1}`, grants.ReasonInvalidRequest},
		{`{"v":2,"compact":true}`, grants.ReasonUnknownVersion},
	}
	for _, tc := range cases {
		rep, extra := askSnapshot(t, nc, node, []byte(tc.body))
		if rep.Code != tc.code || rep.Error == "" || rep.Chunks != 0 || extra != 0 || rep.Header.Size != 0 {
			t.Errorf("body %q: code %q error %q, %d chunks (+%d messages), header %+v; want refused %s with nothing sent",
				tc.body, rep.Code, rep.Error, rep.Chunks, extra, rep.Header, tc.code)
		}
	}
	if after := env.Service.Status().SnapshotIndex; after != before {
		t.Errorf("refused requests took a raft snapshot: snapshot index %d -> %d", before, after)
	}
	// A valid request is served, and compacts.
	rep, extra := askSnapshot(t, nc, node, []byte(`{"v":1,"compact":true}`))
	if rep.Error != "" || rep.Code != "" || rep.Chunks == 0 || extra != rep.Chunks || rep.Header.Size == 0 {
		t.Fatalf("valid request: %+v, %d chunks received", rep, extra)
	}
	if after := env.Service.Status().SnapshotIndex; after <= before {
		t.Errorf("compact request took no raft snapshot: index %d -> %d", before, after)
	}
	rep, _ = askSnapshot(t, nc, node, []byte(`{"v":1}`))
	if rep.Error != "" || rep.Chunks == 0 {
		t.Fatalf("valid request without compact: %+v", rep)
	}
}
