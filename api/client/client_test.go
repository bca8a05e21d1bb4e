package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startNATS runs a plain embedded nats-server (no JetStream, no auth) for
// one test and returns it.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func dial(t testing.TB, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func inMsgs(t *testing.T, s *server.Server) int64 {
	t.Helper()
	v, err := s.Varz(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v.InMsgs
}

// recorder answers requests on subj with answer(n, body) (n counts from 1;
// a nil answer drops the request) and keeps every body it saw.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) serve(t *testing.T, nc *nats.Conn, subj string, answer func(n int, body []byte) []byte) {
	t.Helper()
	sub, err := nc.Subscribe(subj, func(m *nats.Msg) {
		r.mu.Lock()
		r.bodies = append(r.bodies, bytes.Clone(m.Data))
		n := len(r.bodies)
		r.mu.Unlock()
		if out := answer(n, m.Data); out != nil {
			_ = m.Respond(out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (r *recorder) seen() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClientNoRespondersRetriesUntilContextEnds(t *testing.T) {
	s := startNATS(t)
	nc := dial(t, s)
	c := New(nc, "w1")
	c.Attempt = 200 * time.Millisecond

	before := inMsgs(t, s)
	const budget = 700 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	env, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{}`)})
	elapsed := time.Since(start)

	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got env=%+v err=%v", env, err)
	}
	if !strings.Contains(err.Error(), "no responders") {
		t.Errorf("error should carry the last cause (no responders): %v", err)
	}
	// It kept trying until the context ended rather than giving up at the
	// first "no responders", and stopped promptly afterwards.
	if elapsed < budget-50*time.Millisecond {
		t.Errorf("gave up after %s, before the %s context ended", elapsed, budget)
	}
	if elapsed > budget+time.Second {
		t.Errorf("took %s to notice the %s context ended", elapsed, budget)
	}
	if n := inMsgs(t, s) - before; n < 3 {
		t.Errorf("the server saw %d requests; want several retries", n)
	}
}

func TestClientCancelledContextIsUnavailable(t *testing.T) {
	s := startNATS(t)
	c := New(dial(t, s), "w1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	_, err := c.Status(ctx)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cancelled context took %s", d)
	}
}

func TestClientRetriesIssuerUnavailableWithSameBody(t *testing.T) {
	s := startNATS(t)
	issuer := dial(t, s)
	var rec recorder
	real := grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 7, Epoch: 1}
	rec.serve(t, issuer, api.WorkerSubject("w1", api.OpGrant), func(n int, _ []byte) []byte {
		if n == 1 {
			return mustJSON(t, grants.Refuse(grants.ReasonIssuerUnavail, "", "not the leader"))
		}
		return mustJSON(t, real)
	})

	c := New(dial(t, s), "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if env.Decision != grants.Permit || env.GrantID != real.GrantID || env.Seq != real.Seq {
		t.Fatalf("want the real envelope %+v, got %+v", real, env)
	}
	assertSameBodies(t, rec.seen(), 2)
}

func TestClientRetriesTimeoutWithSameBody(t *testing.T) {
	s := startNATS(t)
	issuer := dial(t, s)
	var rec recorder
	rec.serve(t, issuer, api.WorkerSubject("w1", api.OpSpend), func(n int, _ []byte) []byte {
		if n == 1 {
			return nil // lost: the client's attempt times out
		}
		return mustJSON(t, grants.Envelope{Decision: grants.Permit, GrantID: "g-2", Seq: 9})
	})

	c := New(dial(t, s), "w1")
	c.Attempt = 150 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env, err := c.Spend(ctx, api.SpendRequest{GrantID: "g-2", Args: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if env.GrantID != "g-2" || env.Seq != 9 {
		t.Fatalf("unexpected envelope %+v", env)
	}
	assertSameBodies(t, rec.seen(), 2)
}

// assertSameBodies checks that the issuer saw exactly n requests, all with
// the same bytes, carrying this build's version and one idempotency key.
func assertSameBodies(t *testing.T, bodies [][]byte, n int) {
	t.Helper()
	if len(bodies) != n {
		t.Fatalf("issuer saw %d requests, want %d", len(bodies), n)
	}
	for i := 1; i < len(bodies); i++ {
		if !bytes.Equal(bodies[0], bodies[i]) {
			t.Fatalf("retry %d carried a different body:\n first %s\n retry %s", i, bodies[0], bodies[i])
		}
	}
	var probe struct {
		V   int    `json:"v"`
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(bodies[0], &probe); err != nil {
		t.Fatal(err)
	}
	if probe.V != api.Version || probe.Key == "" {
		t.Fatalf("body %s: want v=%d and a filled-in idempotency key", bodies[0], api.Version)
	}
}

// Concurrent calls share the pooled body buffers: each call's body reaches
// the issuer whole, under its own worker's subject, and each caller gets
// the answer to its own body, small bodies and bodies too large to pool
// alike.
func TestClientConcurrentBodies(t *testing.T) {
	s := startNATS(t)
	issuer := dial(t, s)
	sub, err := issuer.Subscribe(api.WorkerPrefix+"*.*", func(m *nats.Msg) {
		// Answer with the grant id, worker and size of the body received.
		var r api.SpendRequest
		if err := json.Unmarshal(m.Data, &r); err != nil {
			_ = m.Respond(mustJSON(t, grants.Refuse(grants.ReasonInvalidRequest, "body", err.Error())))
			return
		}
		w, op, err := api.ParseWorkerSubject(m.Subject)
		if err != nil {
			_ = m.Respond(mustJSON(t, grants.Refuse(grants.ReasonInvalidRequest, "subject", err.Error())))
			return
		}
		_ = m.Respond(mustJSON(t, grants.Envelope{Decision: grants.Permit, GrantID: r.GrantID, Detail: w + "/" + op, Bytes: uint64(len(r.Args))}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := issuer.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := New(nc, fmt.Sprintf("w%d", w))
			for i := range 20 {
				size := 10 + (w*20+i)*37
				if i == 7 {
					size = maxPooledBody + 1000 // past the pool's bound
				}
				args := json.RawMessage(`{"a":"` + strings.Repeat("x", size) + `"}`)
				id := fmt.Sprintf("g-%d-%d", w, i)
				env, err := c.Spend(ctx, api.SpendRequest{GrantID: id, Args: args})
				if err == nil && (env.GrantID != id || env.Detail != c.Worker+"/"+api.OpSpend || env.Bytes != uint64(len(args))) {
					err = fmt.Errorf("spend %s (%d bytes of args) was answered %+v", id, len(args), env)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// The subject follows Worker: a Client made without New, or whose
// Worker changed after New, sends under its Worker.
func TestClientSubjectFollowsWorker(t *testing.T) {
	c := New(nil, "w1")
	for _, op := range []string{api.OpGrant, api.OpSpend, api.OpEffect, api.OpSource} {
		if got, want := c.workerSubject(op), api.WorkerSubject("w1", op); got != want {
			t.Fatalf("New: %s subject %q, want %q", op, got, want)
		}
	}
	c.Worker = "w2"
	lit := &Client{Worker: "w3"}
	empty := &Client{}
	for _, op := range []string{api.OpGrant, api.OpSpend, api.OpEffect, api.OpSource} {
		if got, want := c.workerSubject(op), api.WorkerSubject("w2", op); got != want {
			t.Fatalf("after Worker changed: %s subject %q, want %q", op, got, want)
		}
		if got, want := lit.workerSubject(op), api.WorkerSubject("w3", op); got != want {
			t.Fatalf("Client literal: %s subject %q, want %q", op, got, want)
		}
		if got, want := empty.workerSubject(op), api.WorkerSubject("", op); got != want {
			t.Fatalf("Client literal without a worker: %s subject %q, want %q", op, got, want)
		}
	}
}

// TestClientSendsMarshalBytes: what Client puts on the wire for grants,
// spends and effects is json.Marshal of the request as it fills it in.
func TestClientSendsMarshalBytes(t *testing.T) {
	s := startNATS(t)
	issuer := dial(t, s)
	var rec recorder
	answer := func(int, []byte) []byte { return []byte(`{"decision":"permit"}`) }
	for _, op := range []string{api.OpGrant, api.OpSpend, api.OpEffect} {
		rec.serve(t, issuer, api.WorkerSubject("w1", op), answer)
	}
	c := New(dial(t, s), "w1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	amount := uint64(0)
	grant := api.GrantRequest{
		V: api.Version, Lane: "coordinator", Session: "s-1", Tool: "Bash", Args: json.RawMessage(`{"command":"ls -la"}`),
		TTLMillis: 30000, Sources: []string{"web", "u1"}, IdempotencyKey: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f60",
		TargetLabel: "config.yaml", Amount: &amount, Bytes: 4096, Cwd: "/work", ResolvedTarget: "/work/a <b> & c",
		Provenance: []api.FieldTrace{
			{Field: "/to", Covered: true, Matches: []api.TraceMatch{{Source: "u1", Transform: "raw", Whole: true}, {Source: "d1", Transform: "dns_labels+hex", Part: "host"}}},
			{Field: "/cc"}, {Field: "/x", Matches: []api.TraceMatch{}},
		},
	}
	spend := api.SpendRequest{V: api.Version, GrantID: "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", Args: json.RawMessage(`{"command":"ls"}`), IdempotencyKey: "k2"}
	effect := api.EffectRequest{V: -7, GrantID: "\"\\", Outcome: "\u2029", Verifier: "<\xff>"}
	spend.IdempotencyKey = "" // filled in by Spend
	if _, err := c.Grant(ctx, grant); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Spend(ctx, spend); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Effect(ctx, effect); err != nil {
		t.Fatal(err)
	}
	bodies := rec.seen()
	if len(bodies) != 3 {
		t.Fatalf("issuer saw %d requests", len(bodies))
	}
	var sent api.SpendRequest
	if err := json.Unmarshal(bodies[1], &sent); err != nil || sent.IdempotencyKey == "" {
		t.Fatalf("spend body %s: no idempotency key filled in (%v)", bodies[1], err)
	}
	grant.V, spend.V, effect.V, spend.IdempotencyKey = api.Version, api.Version, api.Version, sent.IdempotencyKey
	for i, v := range []any{grant, spend, effect} {
		if want := mustJSON(t, v); string(bodies[i]) != string(want) {
			t.Errorf("body %d:\n sent %s\n want %s", i, bodies[i], want)
		}
	}
	// Args json.Marshal refuses are refused before anything is sent.
	if _, err := c.Spend(ctx, api.SpendRequest{GrantID: "g", Args: json.RawMessage(`{`)}); err == nil || !strings.Contains(err.Error(), "client: encoding request: json: error calling MarshalJSON") {
		t.Fatalf("bad args: %v", err)
	}
	if len(rec.seen()) != 3 {
		t.Fatal("a body with bad args was sent")
	}
}
