package main

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestBreakGlassCommand: breakglass records a case through a real issuer
// node, tail shows it, and bad flags are usage errors that say what to
// give.
func TestBreakGlassCommand(t *testing.T) {
	cleanEnv(t)
	env := testenv.StartSingle(t, t.TempDir(), nil)
	testenv.WaitFor(t, testenv.SetupTimeout, "receipt format 6", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatBreakGlass
	})
	for _, bad := range [][]string{
		{"--case", "inc 1", "--scope", "worker:w1", "--reason", "r"},
		{"--case", "inc-1", "--scope", "w1", "--reason", "r"},
		{"--case", "inc-1", "--scope", "worker:w1"},
		{"--case", "inc-1", "--scope", "worker:w1", "--reason", "r", "--ttl", "9h"},
	} {
		r := runCLI(t, append([]string{"breakglass", "--nats-url", env.URL}, bad...)...)
		if r.code != ExitUsage {
			t.Errorf("breakglass %v: exit %d %s", bad, r.code, r.stderr)
		}
	}
	r := runCLI(t, "breakglass", "--nats-url", env.URL, "--case", "inc-1", "--scope", "worker:w1", "--ttl", "30m", "--reason", "unknown payee")
	if r.code != ExitOK || !strings.Contains(r.stdout, "break-glass case inc-1 recorded at seq") {
		t.Fatalf("breakglass: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	var out string
	testenv.WaitFor(t, 10*time.Second, "the case in the stream", func() bool {
		r := runCLI(t, "tail", "--nats-url", env.URL, "--kind", "break_glass")
		out = r.stdout
		return strings.Contains(out, "break_glass")
	})
	if !strings.Contains(out, ` break_glass - w1 case=inc-1 scope=worker:w1 until=`) || !strings.Contains(out, `by=operator reason="unknown payee"`) {
		t.Fatalf("tail: %s", out)
	}
}
