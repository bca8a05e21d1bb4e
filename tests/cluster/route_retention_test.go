package clustertests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

const retentionPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"shell","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution"}],
 "routes":[{"name":"job-*","workers":["lw*"],"max_ttl":"1m","consequences":["*"]}]}`

// TestLeaderForgetsFreeRouteRecords: a real issuer at receipt format level
// 7, whose clock is moved a day and an hour forward (the skew file the
// raft clock reads), forgets on its own the record of a route released
// twice: the leader's sweep proposes OpRouteForget, the stream holds a
// route_forgotten receipt for generation 2, `route list` no longer lists
// the route and reports the generation high-water mark 2, and the route
// acquired again gets generation 3: never a generation it had. The
// auditor passes the stream and reaches the digest.
func TestLeaderForgetsFreeRouteRecords(t *testing.T) {
	skew := filepath.Join(t.TempDir(), "skew")
	setSkew := func(d string) {
		t.Helper()
		if err := os.WriteFile(skew+".tmp", []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(skew+".tmp", skew); err != nil {
			t.Fatal(err)
		}
	}
	setSkew("0s")
	c := cluster.StartWith(t, 1, cluster.Options{Env: func(*cluster.Node) []string {
		return []string{"WRIT_TEST_CLOCK_SKEW_FILE=" + skew}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := c.Client(0, "")
	if env, err := op.SetPolicy(ctx, json.RawMessage(retentionPolicy)); err != nil || env.Decision != grants.Permit {
		t.Fatalf("set policy: %+v %v", env, err)
	}
	for deadline := time.Now().Add(20 * time.Second); c.Status(0).ReceiptFormatLevel < fsm.ReceiptFormatRouteRetention; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the issuer never raised the receipt format to the route retention level")
		}
	}
	w := c.Client(0, "lw0")
	lease := func(action, route string) grants.Envelope {
		t.Helper()
		env, err := w.Route(ctx, api.RouteRequest{Action: action, Route: route, Lane: cluster.Lane, TTLMillis: 10_000})
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("%s %s: %+v %v", action, route, env, err)
		}
		return env
	}
	for range 2 {
		lease(api.RouteAcquire, "job-a")
		lease(api.RouteRelease, "job-a")
	}
	released := c.Status(0).Clock

	// A day and an hour on: any entry the leader stamps now moves the
	// control-plane clock past job-a's retention.
	setSkew("25h")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the control-plane clock never moved past the retention")
		}
		if env := lease(api.RouteAcquire, "job-tick"); env.IssuedAt >= released+int64(fsm.RouteRetention) {
			break
		}
		lease(api.RouteRelease, "job-tick")
	}
	var rs api.Routes
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader never forgot job-a: %+v", rs)
		}
		var err error
		if rs, err = op.Routes(ctx); err != nil {
			t.Fatal(err)
		}
		listed := false
		for _, r := range rs.Routes {
			listed = listed || r.Route == "job-a"
		}
		if !listed && rs.GenerationFloor >= 2 {
			break
		}
	}
	if rs.GenerationFloor != 2 {
		t.Errorf("generation high-water mark %d, want 2 (job-a's last generation)", rs.GenerationFloor)
	}
	if env := lease(api.RouteAcquire, "job-a"); env.RouteGen != 3 {
		t.Errorf("invariant generations never reused: job-a acquired again at generation %d, want 3", env.RouteGen)
	}

	evs := c.CheckedStream(t, c.WaitPublished())
	forgotten := 0
	for _, e := range evs {
		if e.Kind == events.KindRouteForgotten && e.Route == "job-a" {
			forgotten++
			if e.RouteGen != 2 || e.Actor != "issuer:"+c.Nodes[0].ID {
				t.Errorf("route_forgotten: gen %d by %s", e.RouteGen, e.Actor)
			}
		}
	}
	if forgotten != 1 {
		t.Errorf("%d route_forgotten receipts for job-a, want 1", forgotten)
	}
}
