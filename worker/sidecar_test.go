package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	authlevel "github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
)

// A source registration through the sidecar's socket gets the issuer's
// answer, whatever it is, not a sidecar error.
func TestSidecarRegistersSources(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), testenv.WithInitialPolicy(policy.LegacyDefault().Canonical()))
	socket := filepath.Join(t.TempDir(), "run", "w1.sock")
	g := &Agent{Conn: connect.Options{URL: env.URL, Timeout: 10 * time.Second}, Worker: "w1", Stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.serveSidecar(ctx, socket) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	// The socket file appears at bind, a moment before the sidecar
	// listens on it: wait until a connection is accepted.
	testenv.WaitFor(t, testenv.SetupTimeout, "the sidecar accepting on its socket", func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	rctx := testCtx(t)
	s, err := dialSocket(rctx, socket, "w1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newSource("side-1", "toolu_side_2", authlevel.ChannelToolResult, scopeTask, "", "Bash", "x", []byte("hello from bash"))
	env2, err := s.RegisterSource(rctx, p.req)
	if err != nil || env2.Decision == "" {
		t.Fatalf("RegisterSource via the sidecar: %+v %v", env2, err)
	}
}

// The hook writes its sidecar requests without reflection (sidecarBody,
// appendLine): the line must be the bytes json.Marshal writes for the same
// request, for every body the hooks send, so the sidecar reads exactly
// what it read before.
func TestSidecarRequestLineIsJSONMarshal(t *testing.T) {
	amount := uint64(12)
	bodies := []any{
		api.GrantRequest{V: api.Version, Lane: "coordinator", Session: "s<1>&", Tool: "Bash",
			Args: json.RawMessage(`{"command": "echo <a> & \u2028 b"}`), IdempotencyKey: "k\"1\\", Cwd: "/tmp/é",
			Amount: &amount, Sources: []string{"x"}, Route: "r", RouteGen: 3,
			Provenance: []api.FieldTrace{{Field: "/command", Covered: true, Matches: []api.TraceMatch{{Source: "src-1", Transform: "raw", Whole: true, Field: "/a"}}}}},
		api.GrantRequest{Lane: "l", Tool: "t", IdempotencyKey: "k"},
		api.SpendRequest{V: api.Version, GrantID: "g1", Args: json.RawMessage(`[1, 2]`), IdempotencyKey: "k"},
		api.EffectRequest{V: api.Version, GrantID: "g1", Outcome: "confirmed", Verifier: "harness:claude-code"},
		api.SourceRequest{V: api.Version, ID: "src-1", Channel: "tool_result", Tool: "Bash", Session: "s"},
		api.EffectSourceRequest{GrantID: "g1", Outcome: "failed", Source: api.SourceRequest{ID: "src-2"}},
	}
	for _, body := range bodies {
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sidecarBody(body)
		if err != nil || string(got) != string(want) {
			t.Fatalf("sidecarBody(%T) = %s, %v; json.Marshal: %s", body, got, err, want)
		}
		for _, timeout := range []int64{0, 1, 4900} {
			req := sidecarRequest{V: sidecarVersion, Op: api.OpGrantSpend, Worker: "w<1>", TimeoutMS: timeout, Body: got}
			line, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.appendLine(nil); string(got) != string(line)+"\n" {
				t.Fatalf("appendLine:\n%s\njson.Marshal:\n%s", got, line)
			}
		}
	}
	if got, want := (&sidecarRequest{Op: "x"}).appendLine(nil), `{"v":0,"op":"x","worker":"","timeout_ms":0,"body":null}`+"\n"; string(got) != want {
		t.Fatalf("appendLine without a body = %s, want %s", got, want)
	}
}

// The hook decodes the sidecar's answer with grants.DecodeEnvelope: what
// it returns is what decoding the whole sidecarResponse by reflection
// returned, and an answer without an envelope, or an unreadable one, is
// still a sidecar error (the hook then asks NATS directly).
func TestSidecarAnswerDecodes(t *testing.T) {
	issued := grants.Envelope{Decision: grants.Permit, GrantID: "g<1>", Epoch: 3, IssuedAt: 1, ExpiresAt: 2, Seq: 9,
		Kind: events.KindAttempt, Digest: events.Hash{1, 2, 3}, Detail: "a \u2028 & b"}
	refused := grants.Refuse(grants.ReasonIssuerUnavail, "issuer answer", "no")
	for _, want := range []grants.Envelope{issued, refused} {
		line, err := json.Marshal(sidecarResponse{Envelope: &want})
		if err != nil {
			t.Fatal(err)
		}
		var ref sidecarResponse
		if err := json.Unmarshal(line, &ref); err != nil {
			t.Fatal(err)
		}
		got, err := answerOver(t, string(line))
		if err != nil || !reflect.DeepEqual(got, *ref.Envelope) {
			t.Fatalf("decoded %+v, %v; by reflection %+v", got, err, *ref.Envelope)
		}
	}
	for _, line := range []string{`{}`, `{"envelope":null}`, `{"code":"wrong_worker","error":"x"}`, `{"envelope":{"seq":"x"}}`, `not json`} {
		if env, err := answerOver(t, line); !errors.Is(err, errSidecar) {
			t.Errorf("answer %s: %+v, %v; want a sidecar error", line, env, err)
		}
	}
	if _, err := answerOver(t, `{"code":"unavailable","error":"slow"}`); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("unavailable answer: %v", err)
	}
}

// answerOver sends a grant_spend through a viaSocket whose peer answers
// line.
func answerOver(t *testing.T, line string) (grants.Envelope, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer b.Close()
		r := bufio.NewReader(b)
		if _, err := r.ReadBytes('\n'); err != nil {
			return
		}
		_, _ = b.Write([]byte(line + "\n"))
	}()
	s := &viaSocket{conn: a, r: bufio.NewReader(a), worker: "w1"}
	env, err := s.GrantSpend(testCtx(t), api.GrantRequest{Lane: "l", Tool: "t", Args: json.RawMessage(`{}`), IdempotencyKey: "k"})
	<-done
	return env, err
}
