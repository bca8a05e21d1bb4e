package issuer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// TestTypedTracesBelowTheirLevel: a worker that traces typed matches and
// nested decodings (receipt format level 9) against a cluster held below
// that level is not refused for it: the issuer rewrites what the level
// would refuse before proposing. At the level, the same request goes
// through as sent.
func TestTypedTracesBelowTheirLevel(t *testing.T) {
	for _, level := range []uint64{fsm.ReceiptFormatBreakGlass, fsm.ReceiptFormatTypedTraces} {
		env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, ic *issuer.Config) {
			ic.ReceiptFormat = level
			ic.FormatCheckEvery = 10 * time.Millisecond
		})
		nc := dial(t, env.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		testenv.WaitFor(t, 10*time.Second, "the receipt format level", func() bool {
			return env.Service.Status().ReceiptFormatLevel == level
		})
		w := client.New(nc, "w1")
		s, err := w.RegisterSource(ctx, api.SourceRequest{ID: "u1", Channel: "user_prompt",
			ContentDigest: events.Sum([]byte("pay 98.70 EUR")).String()})
		if err != nil || s.Decision != grants.Permit {
			t.Fatalf("level %d: register: %+v %v", level, s, err)
		}
		g, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: json.RawMessage(`{"command":"echo 98.7"}`),
			Provenance: []api.FieldTrace{{Field: "/command", Matches: []api.TraceMatch{
				{Source: "u1", Transform: "number:EUR", Whole: true},
				{Source: "u1", Transform: "hex+base64"},
				{Source: "u1", Transform: "json"},
			}}}})
		cancel()
		if err != nil || g.Decision != grants.Permit {
			t.Fatalf("level %d: a request with typed traces: %+v %v", level, g, err)
		}
	}
}
