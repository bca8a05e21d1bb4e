package issuer_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// TestResentOperatorRequest: an operator request sent again with the same
// bytes (a client's retry after its try timed out) is answered with the
// first answer and changes nothing more: a policy apply resent, in turn
// or at the same time, moves the epoch once, and an approval resent after
// it was approved is answered with the approval, not "no open review". A
// different request is proposed as usual.
func TestResentOperatorRequest(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	send := func(subject string, body any) grants.Envelope {
		t.Helper()
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := nc.Request(subject, data, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var e grants.Envelope
		if err := json.Unmarshal(msg.Data, &e); err != nil {
			t.Fatalf("answer %s: %v", msg.Data, err)
		}
		return e
	}
	doc := policy.Recommended().Canonical()
	apply := api.PolicyRequest{V: api.Version, Policy: doc}
	first := send(api.SubjectPolicy, apply)
	if first.Kind != events.KindEpoch || first.Decision != grants.Permit {
		t.Fatalf("apply: %+v", first)
	}
	if again := send(api.SubjectPolicy, apply); again.Epoch != first.Epoch || again.Seq != first.Seq {
		t.Errorf("resent apply answered epoch %d seq %d, want the first answer's epoch %d seq %d", again.Epoch, again.Seq, first.Epoch, first.Seq)
	}

	// Two at once: one of them is proposed, the other waits for its answer.
	var other map[string]any
	if err := json.Unmarshal(doc, &other); err != nil {
		t.Fatal(err)
	}
	other["default_ttl"] = "2m"
	otherDoc, _ := json.Marshal(other)
	both := api.PolicyRequest{V: api.Version, Policy: otherDoc}
	var wg sync.WaitGroup
	answers := make([]grants.Envelope, 2)
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = send(api.SubjectPolicy, both) }()
	}
	wg.Wait()
	if answers[0].Epoch != first.Epoch+1 || answers[1].Epoch != first.Epoch+1 || answers[0].Seq != answers[1].Seq {
		t.Errorf("concurrent identical applies answered %+v and %+v, want one new epoch %d", answers[0], answers[1], first.Epoch+1)
	}

	// An approval resent after it was approved.
	held := send(api.WorkerPrefix+"w1.grant", api.GrantRequest{V: api.Version, IdempotencyKey: "k-mail", Lane: "coordinator", Tool: "send_email",
		Args: json.RawMessage(`{"to":"bob@outside.net","body":"hi"}`)})
	if held.Decision != grants.ApprovalRequired || held.ReviewID == "" {
		t.Fatalf("mail outside the trust domains: %+v", held)
	}
	approve := api.ApproveRequest{V: api.Version, ReviewID: held.ReviewID}
	ok := send(api.SubjectApprove, approve)
	if ok.Decision != grants.Permit {
		t.Fatalf("approve: %+v", ok)
	}
	if again := send(api.SubjectApprove, approve); again.Decision != grants.Permit || again.Seq != ok.Seq {
		t.Errorf("resent approval answered %s %s seq %d, want the approval at seq %d", again.Decision, again.Reason, again.Seq, ok.Seq)
	}
	// The first document again, after others: a rollback is a change of
	// its own, never answered from the first apply.
	if third := send(api.SubjectPolicy, apply); third.Epoch != first.Epoch+2 {
		t.Errorf("a later, different apply answered epoch %d, want %d", third.Epoch, first.Epoch+2)
	}
}
