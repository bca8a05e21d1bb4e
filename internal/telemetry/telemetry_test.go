package telemetry

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/writ-dev/writ/events"
)

// TestSanitizers: values outside a label's set become "other", empty
// ones "none"; nothing a worker chooses passes through.
func TestSanitizers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Lane("isolated"), "isolated"},
		{Lane("w7-private-lane"), Other},
		{Lane(""), None},
		{Consequence("outbound_send"), "outbound_send"},
		{Consequence("mail to bob@example.com"), Other},
		{Reason("worker_revoked"), "worker_revoked"},
		{Reason("sk-live-123"), Other},
		{Decision("approval_required"), "approval_required"},
		{Op("spend"), "spend"},
		{Op("route"), "route"},
		{Op("review"), "review"},
		{Kind(events.KindRouteTaken), "route_taken"},
		{Op("drop tables"), Other},
		{Outcome("contested"), "contested"},
		{Kind(events.KindApproval), "approval"},
		{Kind(events.Kind(60)), Other},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestCheckExposition: the checker accepts what the sanitizers let
// through and names a series that carries a worker id.
func TestCheckExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewAuditor(reg)
	a.Receipt(&events.Event{Kind: events.KindDeny, Decision: "deny", Reason: "worker_revoked", Lane: "custom", Worker: "w1"})
	a.Progress(10, 12)
	rec := httptest.NewRecorder()
	Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var b strings.Builder
	b.WriteString(rec.Body.String())
	if n, err := CheckExposition(b.String(), nil); err != nil || n == 0 {
		t.Fatalf("%d series: %v\n%s", n, err, b.String())
	}
	if _, err := CheckExposition(b.String()+"writ_x_total{worker=\"w1\"} 1\n", nil); err == nil || !strings.Contains(err.Error(), "worker") {
		t.Fatalf("a worker label passed: %v", err)
	}
	if _, err := CheckExposition(`writ_x_total{lane="w1-lane"} 1`+"\n", nil); err == nil {
		t.Fatal("a lane outside the set passed")
	}
	for _, want := range []string{"writ_auditor_projection_lag 2\n", `writ_auditor_decisions_total{consequence="none",decision="deny",lane="other"} 1`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
