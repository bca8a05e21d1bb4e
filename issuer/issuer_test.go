package issuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsbus"
)

func dial(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestGrantSpendEffectPublishesChainedReceipts(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	c := client.New(nc, "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	args := json.RawMessage(`{"command": "ls -la"}`)
	permit, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	if permit.Decision != grants.Permit || permit.GrantID == "" {
		t.Fatalf("want permit, got %+v", permit)
	}
	// Same request, reformatted JSON: the digest is over canonical args.
	attempt, err := c.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: json.RawMessage(`{"command":"ls -la"}`), IdempotencyKey: "spend-1"})
	if err != nil {
		t.Fatal(err)
	}
	if attempt.Decision != grants.Permit || attempt.Kind != events.KindAttempt {
		t.Fatalf("want attempt, got %+v", attempt)
	}
	retry, err := c.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args, IdempotencyKey: "spend-1"})
	if err != nil {
		t.Fatal(err)
	}
	if retry.Seq != attempt.Seq || retry.Kind != events.KindAttempt {
		t.Fatalf("retry with the same key must return the original attempt %d, got %+v", attempt.Seq, retry)
	}
	second, err := c.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: args, IdempotencyKey: "spend-2"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Decision != grants.Deny || second.Reason != grants.ReasonAlreadySpent {
		t.Fatalf("second spend: want already_spent, got %+v", second)
	}
	eff, err := c.Effect(ctx, api.EffectRequest{GrantID: permit.GrantID, Outcome: "confirmed", Verifier: "exit-code"})
	if err != nil || eff.Kind != events.KindEffect {
		t.Fatalf("effect: %+v %v", eff, err)
	}

	// Receipts: epoch(1), permit, attempt, spend_refused, effect — in the
	// stream in order, hash-chained, stream seq == event seq.
	js, _ := jetstream.New(nc)
	testenv.WaitFor(t, 10*time.Second, "5 receipts in the stream", func() bool {
		st, err := js.Stream(ctx, events.StreamName)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.LastSeq >= 5
	})
	st, _ := js.Stream(ctx, events.StreamName)
	var chain events.Chain
	want := []events.Kind{events.KindEpoch, events.KindPermit, events.KindAttempt, events.KindSpendRefused, events.KindEffect}
	for i, k := range want {
		m, err := st.GetMsg(ctx, uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		e, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("seq %d: %v", i+1, err)
		}
		if err := chain.Check(e); err != nil {
			t.Fatal(err)
		}
		chain.Advance(e)
		if e.Kind != k || m.Subject != events.Subject(k) {
			t.Fatalf("seq %d: got %s on %s, want %s", i+1, e.Kind, m.Subject, k)
		}
	}
}

func TestMalformedRequestsGetClearErrorsAndChangeNothing(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	before := env.Service.Status()
	big := make([]byte, api.MaxBodyBytes+1)
	for i := range big {
		big[i] = 'a'
	}
	cases := []struct {
		name, subject string
		body          []byte
		reason        grants.Reason
	}{
		{"not json", "writ.api.w1.grant", []byte("{"), grants.ReasonInvalidRequest},
		{"no version", "writ.api.w1.grant", []byte(`{"lane":"coordinator"}`), grants.ReasonInvalidRequest},
		{"future version", "writ.api.w1.grant", []byte(`{"v":2}`), grants.ReasonUnknownVersion},
		{"unknown field", "writ.api.w1.grant", []byte(`{"v":1,"lane":"coordinator","tool":"Bash","args":{},"idempotency_key":"k","worker":"w2"}`), grants.ReasonInvalidRequest},
		{"bad lane", "writ.api.w1.grant", []byte(`{"v":1,"lane":"a.b","tool":"Bash","args":{},"idempotency_key":"k"}`), grants.ReasonInvalidRequest},
		{"dup keys in args", "writ.api.w1.grant", []byte(`{"v":1,"lane":"coordinator","tool":"Bash","args":{"a":1,"a":2},"idempotency_key":"k"}`), grants.ReasonInvalidRequest},
		{"oversized", "writ.api.w1.grant", big, grants.ReasonRequestTooLarge},
		{"unknown op", "writ.api.w1.launch", []byte(`{"v":1}`), grants.ReasonInvalidRequest},
		{"spend no args", "writ.api.w1.spend", []byte(`{"v":1,"grant_id":"g","idempotency_key":"k"}`), grants.ReasonInvalidRequest},
		{"effect bad outcome", "writ.api.w1.effect", []byte(`{"v":1,"grant_id":"g","outcome":"contested","verifier":"v"}`), grants.ReasonInvalidRequest},
		{"revoke two", "writ.op.revoke", []byte(`{"v":1,"worker":"w1","source":"s"}`), grants.ReasonInvalidRequest},
		{"bad policy", "writ.op.policy", []byte(`{"v":1,"policy":{"version":1}}`), grants.ReasonInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := nc.Request(tc.subject, tc.body, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var env grants.Envelope
			if err := json.Unmarshal(msg.Data, &env); err != nil {
				t.Fatalf("answer is not an envelope: %s", msg.Data)
			}
			if env.Decision != grants.Deny || env.Reason != tc.reason || env.Detail == "" {
				t.Fatalf("want deny %s with a detail, got %+v", tc.reason, env)
			}
		})
	}
	after := env.Service.Status()
	if after.Seq != before.Seq || after.StateDigest != before.StateDigest {
		t.Fatalf("malformed requests changed state: seq %d -> %d", before.Seq, after.Seq)
	}
}

// A stream that really lost its receipts (deleted and created again empty)
// is reported in status once readings confirm it, and publication stops
// rather than fill the stream with receipts that do not follow the gap.
func TestStreamRecreatedEmptyIsReportedLost(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	nc := dial(t, env.URL)
	c := client.New(nc, "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func(key string) {
		t.Helper()
		env, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: key})
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("grant %s: %+v %v", key, env, err)
		}
	}
	for i := range 5 {
		grant(fmt.Sprintf("before-%d", i))
	}
	var confirmed uint64
	testenv.WaitFor(t, 10*time.Second, "receipts confirmed published", func() bool {
		st := env.Service.Status()
		confirmed = st.Published
		return st.Published == st.Seq && st.StreamLastSeq == st.Seq
	})
	js, _ := jetstream.New(nc)
	if err := js.DeleteStream(ctx, events.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := natsbus.EnsureStream(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	grant("after")
	testenv.WaitFor(t, 15*time.Second, "the lost receipts reported", func() bool {
		st := env.Service.Status()
		return st.StreamLostFrom == 1 && st.StreamLostThrough == confirmed
	})
	if info, err := js.Stream(ctx, events.StreamName); err != nil || info.CachedInfo().State.Msgs != 0 {
		t.Fatalf("the emptied stream got receipts after the gap: %v", err)
	}
}
