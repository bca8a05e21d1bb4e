package issuer_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy/policyfile"
	"github.com/writ-dev/writ/raftnode"
)

// A recipient traced to the attested sender of a chat result is permitted
// once the cluster writes receipt format 10; a node held below it strips
// the traced result fields before the log and decides as earlier builds
// did (authority_too_low, no field in the grounds).
func TestResultFieldsByReceiptFormat(t *testing.T) {
	raw, err := os.ReadFile("../policy/testdata/results.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := policyfile.ToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		format uint64
		want   grants.Decision
		ground string
	}{
		{"held at 6", fsm.ReceiptFormatBreakGlass, grants.Deny, "transform=raw whole"},
		{"at 10", fsm.ReceiptFormatResultFields, grants.Permit, "from=mcp__chat__read_channel_messages:/messages/0/sender attested"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, ic *issuer.Config) { ic.ReceiptFormat = tc.format })
			testenv.WaitFor(t, testenv.SetupTimeout, "the receipt format", func() bool {
				return env.Service.Status().ReceiptFormatLevel == tc.format
			})
			nc := dial(t, env.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if e, err := client.New(nc, "operator").SetPolicy(ctx, doc); err != nil || e.Decision != grants.Permit {
				t.Fatalf("policy: %+v %v", e, err)
			}
			w := client.New(nc, "w1")
			s, err := w.RegisterSource(ctx, api.SourceRequest{ID: "chat1", Channel: "tool_result", Tool: "mcp__chat__read_channel_messages",
				ContentDigest: events.Sum([]byte("bob")).String()})
			if err != nil || s.Decision != grants.Permit {
				t.Fatalf("register: %+v %v", s, err)
			}
			g, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "mcp__chat__send_message", Args: json.RawMessage(`{"recipient":"bob"}`),
				Provenance: []api.FieldTrace{{Field: "/recipient", Covered: true, Matches: []api.TraceMatch{
					{Source: "chat1", Transform: "raw", Whole: true, Field: "/messages/0/sender", FieldWhole: true}}}}})
			if err != nil || g.Decision != tc.want {
				t.Fatalf("grant: %+v %v", g, err)
			}
			e := receiptAt(ctx, t, nc, g.Seq)
			if len(e.Grounds) != 1 || !strings.HasSuffix(e.Grounds[0], tc.ground) {
				t.Fatalf("grounds %q, want one ending in %q", e.Grounds, tc.ground)
			}
		})
	}
}
