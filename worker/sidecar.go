package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/hookwire"
)

// maxSidecarTimeout caps the time a sidecar spends on one request.
const maxSidecarTimeout = 30 * time.Second

// timeout is how long the sidecar works on r: its timeout_ms, capped at
// maxSidecarTimeout (which also stands for none given).
func (r *sidecarRequest) timeout() time.Duration {
	t := time.Duration(r.TimeoutMS) * time.Millisecond
	if t <= 0 || t > maxSidecarTimeout {
		return maxSidecarTimeout
	}
	return t
}

// Sidecar resolves the worker config under flags, then serves the
// sidecar socket until ctx ends.
func (g *Agent) Sidecar(ctx context.Context, flags *pflag.FlagSet, af *AdapterFlags) error {
	cfg, err := af.resolve(flags, g)
	if err != nil {
		return Usagef("%v", err)
	}
	if af.socket == "" {
		return Usagef("--socket %s: the sidecar needs a socket to serve; give its path, or leave --socket out for worker-%s.sock in the state dir", SocketNone, g.Worker)
	}
	return g.serveSidecarState(ctx, af.socket, af.stateDir, cfg.Provenance.maxBytes())
}

// serveSidecar connects to NATS (retrying until it can), then serves the
// socket until ctx ends; it keeps no provenance registries for plugins.
func (g *Agent) serveSidecar(ctx context.Context, socket string) error {
	return g.serveSidecarState(ctx, socket, "", 0)
}

// serveSidecarState is serveSidecar keeping the provenance registries of
// plugin sessions under stateDir (none when "").
func (g *Agent) serveSidecarState(ctx context.Context, socket, stateDir string, maxBytes int64) error {
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("socket directory: %v", err)}
	}
	// A socket another sidecar still answers on is not ours to take.
	if c, err := net.DialTimeout("unix", socket, 200*time.Millisecond); err == nil {
		c.Close()
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("a sidecar is already serving %s", socket)}
	}
	var client *client.Client
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, nc, err := g.Client(dctx)
		cancel()
		if err == nil {
			defer nc.Close()
			client = c
			break
		}
		if errors.Is(err, connect.ErrBadURL) {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		fmt.Fprintf(g.Stderr, "worker-agent run: %v; retrying\n", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
	_ = os.Remove(socket) // stale: nothing answered on it
	l, err := net.Listen("unix", socket)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("listening on %s: %v", socket, err)}
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("socket mode: %v", err)}
	}
	fmt.Fprintf(g.Stderr, "worker-agent run: serving worker %s on %s (NATS %s)\n", g.Worker, socket, g.Conn.URL)

	abs, err := filepath.Abs(socket)
	if err != nil {
		l.Close()
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("socket path: %v", err)}
	}
	s := &sidecar{client: client, worker: g.Worker, socket: abs, runHook: g.HookRunner, conn: g.Conn, stateDir: stateDir, maxBytes: maxBytes, conns: map[net.Conn]struct{}{}}
	go func() {
		<-ctx.Done()
		l.Close()
		s.closeAll()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			break
		}
		s.track(conn, true)
		s.wg.Add(1)
		go s.serve(ctx, conn)
	}
	s.closeAll()
	s.wg.Wait()
	_ = os.Remove(socket)
	return nil
}

type sidecar struct {
	client  *client.Client
	worker  string
	socket  string          // where it serves, absolute and clean
	runHook HookRunner      // runs hosted hooks (nil: hook.run is declined)
	conn    connect.Options // the worker's; a plugin's reviewer dials the same servers

	stateDir string // plugin sessions' provenance registries ("" keeps none)
	maxBytes int64
	held     heldReviews
	spent    spentGrants // OpenClaw calls' grants, for their after op

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func (s *sidecar) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add && s.closed {
		c.Close()
	}
	if add {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *sidecar) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

// serve answers one connection's requests in order.
func (s *sidecar) serve(ctx context.Context, conn net.Conn) {
	defer s.wg.Done()
	defer s.track(conn, false)
	defer conn.Close()
	r := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, tooLong, err := readBounded(r, api.MaxBodyBytes+4096)
		if tooLong {
			s.reply(conn, sidecarResponse{Code: sidecarBadRequest, Error: "request too long"})
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var ok bool
			if req, resp := s.decode(line); resp != nil {
				ok = s.reply(conn, *resp)
			} else if req.Op == hookwire.OpRun {
				ok = s.hostHook(ctx, conn, req)
			} else {
				ok = s.reply(conn, s.handle(ctx, req))
			}
			if !ok {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *sidecar) reply(conn net.Conn, resp sidecarResponse) bool {
	b, err := json.Marshal(resp)
	if err != nil {
		return false
	}
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Write(append(b, '\n'))
	return err == nil
}

// decode reads one request line; a line it cannot take gets the answer
// resp.
func (s *sidecar) decode(line []byte) (req *sidecarRequest, resp *sidecarResponse) {
	req = new(sidecarRequest)
	if err := json.Unmarshal(line, req); err != nil {
		return nil, &sidecarResponse{Code: sidecarBadRequest, Error: err.Error()}
	}
	if req.V != sidecarVersion {
		return nil, &sidecarResponse{Code: sidecarBadRequest, Error: fmt.Sprintf("sidecar protocol version %d; this sidecar speaks %d", req.V, sidecarVersion)}
	}
	return req, nil
}

// handle answers one request of the ops that carry an api request.
func (s *sidecar) handle(ctx context.Context, req *sidecarRequest) sidecarResponse {
	if req.Worker != s.worker {
		return sidecarResponse{Code: sidecarWrongWorker, Error: fmt.Sprintf("this sidecar serves worker %s, not %s", s.worker, req.Worker)}
	}
	timeout := req.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := *s.client
	c.Attempt = attemptWithin(timeout)
	var (
		env grants.Envelope
		err error
	)
	switch req.Op {
	case api.OpGrant:
		var r api.GrantRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.Grant(ctx, r)
		}
	case api.OpSpend:
		var r api.SpendRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.Spend(ctx, r)
		}
	case api.OpEffect:
		var r api.EffectRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.Effect(ctx, r)
		}
	case api.OpSource:
		var r api.SourceRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.RegisterSource(ctx, r)
		}
	case api.OpGrantSpend:
		var r api.GrantRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.GrantSpend(ctx, r)
		}
	case api.OpEffectSource:
		var r api.EffectSourceRequest
		if err = json.Unmarshal(req.Body, &r); err == nil {
			env, err = c.EffectSource(ctx, r)
		}
	case OpPluginBefore, OpPluginAfter, OpPluginResolve, OpPluginMessage:
		a, perr := s.plugin(ctx, &c, req.Op, req.Body)
		switch {
		case errors.Is(perr, harness.ErrMalformed):
			return sidecarResponse{Code: sidecarBadRequest, Error: perr.Error()}
		case perr != nil:
			return sidecarResponse{Code: sidecarUnavailable, Error: unreachable(perr).Error()}
		}
		return sidecarResponse{Plugin: a}
	default:
		return sidecarResponse{Code: sidecarBadRequest, Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	if err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		if errors.As(err, &se) || errors.As(err, &te) {
			return sidecarResponse{Code: sidecarBadRequest, Error: err.Error()}
		}
		return sidecarResponse{Code: sidecarUnavailable, Error: err.Error()}
	}
	return sidecarResponse{Envelope: &env}
}

// readBounded reads one line of at most max bytes; a longer line is
// reported tooLong.
func readBounded(r *bufio.Reader, max int) ([]byte, bool, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, true, err
		}
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, false, err
	}
}
