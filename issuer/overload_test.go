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

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/natsbus"
)

// overloadService is a Service with a NATS connection and no node: every
// path exercised here answers before a node would be touched, and one
// that did not would fail the test by panicking.
func overloadService(t *testing.T) (*Service, *nats.Conn) {
	t.Helper()
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
	quit := make(chan struct{})
	t.Cleanup(func() { close(quit) })
	return &Service{nc: nc, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sem: make(chan struct{}, 2), snapSlot: make(chan struct{}, 1),
		work: make(chan request), quit: quit}, nc
}

// answer runs deliver for a request on subject and returns the envelope
// answered.
func answer(t *testing.T, nc *nats.Conn, subject string, body any, deliver func(*nats.Msg)) grants.Envelope {
	t.Helper()
	sub, err := nc.Subscribe(subject, deliver)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	data, _ := json.Marshal(body)
	m, err := nc.Request(subject, data, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: no answer: %v", subject, err)
	}
	var env grants.Envelope
	if err := json.Unmarshal(m.Data, &env); err != nil {
		t.Fatalf("%s: answer %s: %v", subject, m.Data, err)
	}
	return env
}

// shedRequests are requests of every kind a worker or operator sends,
// each of which would be permitted by an issuer with room for it.
var shedRequests = []struct {
	subject string
	body    any
	h       handler
}{
	{"writ.api.w1." + api.OpGrant, api.GrantRequest{V: 1, Lane: "coordinator", Tool: "Read", Args: json.RawMessage(`{"file_path":"/tmp/a"}`)}, workerHandler},
	{"writ.api.w1." + api.OpSpend, api.SpendRequest{V: 1, GrantID: "g-1", Digest: strings.Repeat("ab", 32), IdempotencyKey: "k-1"}, workerHandler},
	{"writ.api.w1." + api.OpEffect, api.EffectRequest{V: 1, GrantID: "g-1", Outcome: grants.OutcomeConfirmed, Verifier: "harness:claude-code"}, workerHandler},
	{"writ.api.w1." + api.OpSpawn, api.SpawnRequest{V: 1, Child: "w1-c", Lane: "isolated", ParentLane: "coordinator"}, workerHandler},
	{api.SubjectRevoke, api.RevokeRequest{V: 1, Worker: "w1"}, operatorHandler},
}

// At its in-flight limit the issuer refuses every request, worker's and
// operator's alike, issuer_unavailable without deciding it, and says what
// held: nothing decided, single-spend, revocation and policy checks kept,
// retry with the same key. It never permits.
func TestInFlightLimitRefusesUndecided(t *testing.T) {
	s, nc := overloadService(t)
	s.sem <- struct{}{}
	s.sem <- struct{}{} // the limit reached
	for _, r := range shedRequests {
		env := answer(t, nc, r.subject, r.body, func(m *nats.Msg) { s.spawn(m, r.h) })
		if env.Decision == grants.Permit || env.Decision != grants.Deny || env.Reason != grants.ReasonIssuerUnavail ||
			env.Missing != "capacity" || env.Seq != 0 || env.GrantID != "" {
			t.Fatalf("%s at the in-flight limit: %+v", r.subject, env)
		}
		for _, s := range []string{grants.KeptUndecided, grants.KeptRetrySame} {
			if !strings.Contains(env.Detail, s) {
				t.Errorf("%s: detail %q does not say %q", r.subject, env.Detail, s)
			}
		}
	}
	if len(s.sem) != 2 {
		t.Fatalf("refused requests changed the in-flight count to %d", len(s.sem))
	}
}

// A worker whose refusals ran past its admission rate is answered
// rate_limited without the request being decided, whatever it asks, and
// the answer says what held. It never permits.
func TestThrottledRequestsAreRefusedUndecided(t *testing.T) {
	s, nc := overloadService(t)
	a := newAdmission(0.001, 1)
	a.on.Store(true)
	now := time.Now()
	a.refused("w1", now)
	a.refused("w1", now)
	s.adm.Store(a)
	for _, r := range shedRequests {
		if r.h != workerHandler || strings.HasSuffix(r.subject, api.OpSpawn) || strings.HasSuffix(r.subject, api.OpGrant) {
			continue // those read the applied state before admission: covered end to end
		}
		env := answer(t, nc, r.subject, r.body, s.worker)
		if env.Decision == grants.Permit || env.Decision != grants.Deny || env.Reason != grants.ReasonRateLimited ||
			env.Recovery != grants.RecoverRetryLater || env.Seq != 0 || !strings.Contains(env.Detail, grants.KeptUndecided) {
			t.Fatalf("%s throttled: %+v", r.subject, env)
		}
	}
	if got := a.drain(time.Now()); len(got) != 2 {
		t.Fatalf("throttled requests counted %+v, want spend and effect once each", got)
	}
}
