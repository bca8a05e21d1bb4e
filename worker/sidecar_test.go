package worker

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	authlevel "github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/connect"
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
