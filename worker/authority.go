package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/hookwire"
	"github.com/writ-dev/writ/internal/jsonwire"
)

// authority is what the harness adapters ask: the issuer, reached directly
// over NATS or through the local sidecar (worker-agent run).
type authority interface {
	Grant(ctx context.Context, r api.GrantRequest) (grants.Envelope, error)
	Spend(ctx context.Context, r api.SpendRequest) (grants.Envelope, error)
	Effect(ctx context.Context, r api.EffectRequest) (grants.Envelope, error)
	RegisterSource(ctx context.Context, r api.SourceRequest) (grants.Envelope, error)
	// The combined requests (receipt format 11): a grant spent at once,
	// and an effect with the result's source registration, each one log
	// entry (client.GrantSpendUnsupported: the issuer does not take them).
	GrantSpend(ctx context.Context, r api.GrantRequest) (grants.Envelope, error)
	EffectSource(ctx context.Context, r api.EffectSourceRequest) (grants.Envelope, error)
	Close()
}

// direct is an client.Client on its own NATS connection.
type direct struct {
	*client.Client
	nc *nats.Conn
}

func (d direct) Close() { d.nc.Close() }

// dialDirect connects to NATS within ctx for a hook or the MCP proxy:
// one connection attempt, so that a call blocks at once when NATS is
// down rather than at its deadline.
func (g *Agent) dialDirect(ctx context.Context) (authority, error) {
	c, nc, err := g.dial(ctx, true)
	if err != nil {
		return nil, err
	}
	return direct{Client: c, nc: nc}, nil
}

// Sidecar protocol: one JSON object per line each way over the unix
// socket; a connection carries any number of requests, one at a time.
const sidecarVersion = hookwire.Version

type sidecarRequest struct {
	V         int             `json:"v"`
	Op        string          `json:"op"`     // api.OpGrant, OpSpend, OpEffect, OpSource, OpGrantSpend, OpEffectSource, an OpPlugin* op or hookwire.OpRun
	Worker    string          `json:"worker"` // must be the sidecar's own
	TimeoutMS int64           `json:"timeout_ms"`
	Body      json.RawMessage `json:"body"` // the api request body
}

// Sidecar error codes.
const (
	sidecarUnavailable = "unavailable"  // the issuer did not answer in time
	sidecarWrongWorker = "wrong_worker" // the sidecar serves another worker
	sidecarBadRequest  = "bad_request"  // the sidecar could not read the request
)

type sidecarResponse struct {
	Envelope *grants.Envelope `json:"envelope,omitempty"`
	Plugin   *PluginAnswer    `json:"plugin,omitempty"`  // the answer to an openclaw.* op
	Started  bool             `json:"started,omitempty"` // hook.run: the hook may act (hookwire.Reply)
	Hook     *hookwire.Answer `json:"hook,omitempty"`    // hook.run: the hook's answer
	Code     string           `json:"code,omitempty"`
	Error    string           `json:"error,omitempty"`
}

// sidecarMargin is how much sooner than the caller the sidecar gives up.
const sidecarMargin = 100 * time.Millisecond

// errSidecar marks a sidecar that cannot serve this caller (gone, or
// another worker's); the caller falls back to a direct connection.
var errSidecar = errors.New("sidecar unusable")

// viaSocket talks to a sidecar over one unix-socket connection, one
// request at a time.
type viaSocket struct {
	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	worker string
}

// dialSocket connects to the sidecar at path, giving up quickly: a missing
// or stale socket must cost the hook almost nothing.
func dialSocket(ctx context.Context, path, worker string) (*viaSocket, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSidecar, err)
	}
	return &viaSocket{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), worker: worker}, nil
}

func (s *viaSocket) Close() { s.conn.Close() }

func (s *viaSocket) Grant(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	r.V = api.Version
	return s.do(ctx, api.OpGrant, r)
}

func (s *viaSocket) Spend(ctx context.Context, r api.SpendRequest) (grants.Envelope, error) {
	r.V = api.Version
	return s.do(ctx, api.OpSpend, r)
}

func (s *viaSocket) Effect(ctx context.Context, r api.EffectRequest) (grants.Envelope, error) {
	r.V = api.Version
	return s.do(ctx, api.OpEffect, r)
}

func (s *viaSocket) RegisterSource(ctx context.Context, r api.SourceRequest) (grants.Envelope, error) {
	r.V = api.Version
	return s.do(ctx, api.OpSource, r)
}

func (s *viaSocket) GrantSpend(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	r.V = api.Version
	return s.do(ctx, api.OpGrantSpend, r)
}

func (s *viaSocket) EffectSource(ctx context.Context, r api.EffectSourceRequest) (grants.Envelope, error) {
	r.V, r.Source.V = api.Version, api.Version
	return s.do(ctx, api.OpEffectSource, r)
}

func (s *viaSocket) do(ctx context.Context, op string, body any) (grants.Envelope, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var env grants.Envelope
	b, err := sidecarBody(body)
	if err != nil {
		return env, err
	}
	req := sidecarRequest{V: sidecarVersion, Op: op, Worker: s.worker, Body: b}
	if dl, ok := ctx.Deadline(); ok {
		// The sidecar gives up a little before we do, so its answer (even
		// "unavailable") arrives in time to be read.
		req.TimeoutMS = max(1, time.Until(dl).Milliseconds()-sidecarMargin.Milliseconds())
		_ = s.conn.SetDeadline(dl)
	}
	if _, err := s.conn.Write(req.appendLine(make([]byte, 0, len(b)+128))); err != nil {
		return env, fmt.Errorf("%w: %v", errSidecar, err)
	}
	resp, err := s.r.ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			return env, fmt.Errorf("%w: the sidecar did not answer before the deadline", client.ErrUnavailable)
		}
		return env, fmt.Errorf("%w: %v", errSidecar, err)
	}
	// A sidecarResponse, its envelope left raw for grants.DecodeEnvelope
	// (the reflection-free decoder of the NATS path): decoding *Envelope
	// by reflection cost a hook process more than the rest of the answer.
	var sr struct {
		Envelope json.RawMessage `json:"envelope"`
		Code     string          `json:"code"`
		Error    string          `json:"error"`
	}
	if err := json.Unmarshal(resp, &sr); err != nil {
		return env, fmt.Errorf("%w: unreadable answer: %v", errSidecar, err)
	}
	switch {
	case sr.Code == sidecarUnavailable:
		return env, fmt.Errorf("%w: %s", client.ErrUnavailable, sr.Error)
	case sr.Code != "" || len(sr.Envelope) == 0 || string(sr.Envelope) == "null":
		return env, fmt.Errorf("%w: %s: %s", errSidecar, sr.Code, sr.Error)
	}
	if env, err = grants.DecodeEnvelope(sr.Envelope); err != nil {
		return grants.Envelope{}, fmt.Errorf("%w: unreadable answer: %v", errSidecar, err)
	}
	return env, nil
}

// sidecarBody is json.Marshal(body), without reflection for the requests
// every tool call sends (their AppendJSON methods write the same bytes).
func sidecarBody(body any) ([]byte, error) {
	switch r := body.(type) {
	case api.GrantRequest:
		return r.AppendJSON(make([]byte, 0, r.SizeHint()))
	case api.SpendRequest:
		return r.AppendJSON(make([]byte, 0, r.SizeHint()))
	case api.EffectRequest:
		return r.AppendJSON(make([]byte, 0, r.SizeHint())), nil
	}
	return json.Marshal(body)
}

// appendLine appends json.Marshal(r) and the newline that ends a request.
// Body is compact JSON (sidecarBody's), which json.Marshal would copy as
// it is.
func (r *sidecarRequest) appendLine(dst []byte) []byte {
	dst = strconv.AppendInt(append(dst, `{"v":`...), int64(r.V), 10)
	dst = jsonwire.AppendString(append(dst, `,"op":`...), r.Op)
	dst = jsonwire.AppendString(append(dst, `,"worker":`...), r.Worker)
	dst = strconv.AppendInt(append(dst, `,"timeout_ms":`...), r.TimeoutMS, 10)
	dst = append(dst, `,"body":`...)
	if r.Body == nil {
		dst = append(dst, "null"...)
	}
	dst = append(dst, r.Body...)
	return append(dst, "}\n"...)
}

// fallback prefers the sidecar and switches to a direct connection, for
// this request and every later one, when the sidecar is missing, stale,
// another worker's, or drops the connection. Every request carries its
// idempotency key, so a request the sidecar may already have sent is safely
// repeated directly.
type fallback struct {
	g      *Agent
	socket string

	mu     sync.Mutex
	sock   *viaSocket
	hosted authority // the sidecar's own connection, for a hook it runs
	direct authority
	tried  bool // the socket was tried
	used   string
}

func (g *Agent) openAuthority(socket string) *fallback {
	return &fallback{g: g, socket: socket}
}

// path reports which path answered the last request: "socket" or "direct".
func (f *fallback) path() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used
}

func (f *fallback) pick(ctx context.Context) (authority, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct != nil {
		return f.direct, nil
	}
	if f.sock != nil {
		return f.sock, nil
	}
	if f.hosted != nil {
		return f.hosted, nil
	}
	if !f.tried && f.socket != "" {
		f.tried = true
		if h := f.g.hosted; h != nil && h.serves(f.g.abs(f.socket)) {
			// Run by the sidecar this socket leads to: its connection.
			f.hosted = h.local
			return f.hosted, nil
		}
		if s, err := dialSocket(ctx, f.socket, f.g.Worker); err == nil {
			f.sock = s
			return s, nil
		}
	}
	d, err := f.g.dialDirect(ctx)
	if err != nil {
		return nil, err
	}
	f.direct = d
	return d, nil
}

// demote drops a sidecar that failed.
func (f *fallback) demote(a authority) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sock != nil && a == authority(f.sock) {
		f.sock.Close()
		f.sock = nil
	}
}

func (f *fallback) call(ctx context.Context, do func(authority) (grants.Envelope, error)) (grants.Envelope, error) {
	for {
		a, err := f.pick(ctx)
		if err != nil {
			return grants.Envelope{}, err
		}
		env, err := do(a)
		if errors.Is(err, errSidecar) {
			f.demote(a)
			continue
		}
		f.mu.Lock()
		if _, ok := a.(*viaSocket); ok || a == f.hosted {
			f.used = "socket"
		} else {
			f.used = "direct"
		}
		f.mu.Unlock()
		return env, err
	}
}

func (f *fallback) Grant(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.Grant(ctx, r) })
}

func (f *fallback) Spend(ctx context.Context, r api.SpendRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.Spend(ctx, r) })
}

func (f *fallback) Effect(ctx context.Context, r api.EffectRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.Effect(ctx, r) })
}

func (f *fallback) RegisterSource(ctx context.Context, r api.SourceRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.RegisterSource(ctx, r) })
}

func (f *fallback) GrantSpend(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.GrantSpend(ctx, r) })
}

func (f *fallback) EffectSource(ctx context.Context, r api.EffectSourceRequest) (grants.Envelope, error) {
	return f.call(ctx, func(a authority) (grants.Envelope, error) { return a.EffectSource(ctx, r) })
}

func (f *fallback) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sock != nil {
		f.sock.Close()
	}
	if f.direct != nil {
		f.direct.Close()
	}
}

// maxAttempt bounds one try of a request; client.Client retries until
// --timeout ends.
const maxAttempt = 2 * time.Second

// attemptWithin is one try's bound for a request that has timeout in all:
// several tries, each with the same idempotency key, fit inside it.
func attemptWithin(timeout time.Duration) time.Duration {
	return min(maxAttempt, max(timeout/4, 50*time.Millisecond))
}

// Client dials NATS within ctx (retrying while NATS is unreachable) and
// returns a client for the worker. The caller closes the connection.
func (g *Agent) Client(ctx context.Context) (*client.Client, *nats.Conn, error) {
	return g.dial(ctx, false)
}

// dial is Client, with one connection attempt when once is set.
func (g *Agent) dial(ctx context.Context, once bool) (*client.Client, *nats.Conn, error) {
	opts := g.Conn
	opts.Name = "worker-agent:" + g.Worker
	opts.ConnectOnce = once
	nc, err := opts.DialContext(ctx)
	if err != nil {
		return nil, nil, err
	}
	c := client.New(nc, g.Worker)
	// Several tries fit inside --timeout, each with the same idempotency key.
	c.Attempt = attemptWithin(g.Conn.Timeout)
	return c, nc, nil
}
