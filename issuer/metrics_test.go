package issuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/telemetry"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// TestMetricsBoundedLabels: under a small bounded load of permitted,
// denied, spent, double-spent and reported grants from workers with
// distinctive ids, /metrics counts them by operation, decision and
// reason, has commit and spend latency, raft state and outbox depth, and
// no label value outside its allowed set appears (no worker id, grant
// id, tool or argument).
func TestMetricsBoundedLabels(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	reg := prometheus.NewRegistry()
	env.Service.EnableMetrics(reg)
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 6 {
		w := client.New(nc, fmt.Sprintf("worker-secret-%d", i))
		args := json.RawMessage(fmt.Sprintf(`{"command":"echo leak-%d"}`, i))
		g, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash", Args: args})
		if err != nil || g.Decision != grants.Permit {
			t.Fatalf("grant: %+v %v", g, err)
		}
		if _, err := w.Grant(ctx, api.GrantRequest{Lane: "isolated", Tool: "Bash", Args: args}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second is already_spent
			if _, err := w.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: args, IdempotencyKey: fmt.Sprintf("token-%d-%d", i, time.Now().UnixNano())}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Effect(ctx, api.EffectRequest{GrantID: g.GrantID, Outcome: "confirmed", Verifier: "verifier-" + g.GrantID}); err != nil {
			t.Fatal(err)
		}
	}
	// A request is counted just after its answer is sent, so the last
	// answers' observations may land a moment after the client has them:
	// scrape until the last one (the sixth effect's commit) is in.
	scrape := func() string {
		rec := httptest.NewRecorder()
		telemetry.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	text := scrape()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(text, `writ_issuer_commit_seconds_count{node="n1",op="effect"} 6`) && time.Now().Before(deadline); text = scrape() {
		time.Sleep(20 * time.Millisecond)
	}
	n, err := telemetry.CheckExposition(text, map[string]map[string]bool{"node": {env.Node.ID(): true}})
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if n == 0 {
		t.Fatal("no writ_ series")
	}
	for _, want := range []string{
		`writ_issuer_requests_total{node="n1",op="grant"} 12`,
		`writ_issuer_requests_total{node="n1",op="spend"} 12`,
		`decision="permit",lane="coordinator",node="n1"} 6`,
		`writ_issuer_refusals_total{node="n1",op="spend",reason="already_spent"} 6`,
		`writ_issuer_commit_seconds_count{node="n1",op="effect"} 6`,
		`writ_issuer_spend_seconds_count{node="n1"} 12`,
		`writ_issuer_raft_state{node="n1",state="Leader"} 1`,
		`writ_issuer_outbox_depth{node="n1"}`,
		`writ_issuer_stream_lag{node="n1"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "worker-secret") || strings.Contains(text, "leak-") || strings.Contains(text, "token-") {
		t.Fatal("a worker id, argument or key leaked into the metrics")
	}
	if !strings.Contains(text, `writ_issuer_refusals_total{node="n1",op="grant",reason=`) {
		t.Errorf("the isolated lane's Bash requests were not counted as refusals:\n%s", grep(text, "refusals"))
	}
}

func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
