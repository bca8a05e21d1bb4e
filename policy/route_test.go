package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/policy"
)

// TestRouteFor: who may own which route under the recommended policy's demo
// route (isolated lane, reading only), under a document with worker
// patterns and pinned workers, and under a version 1 document (which
// declares none).
func TestRouteFor(t *testing.T) {
	doc := `{"version":2,"default_ttl":"1m","lanes":{"a":{"surfaces":["*"],"consequences":["*"]},"b":{"surfaces":["*"],"consequences":["*"]}},
 "workers":{"pinned":"a"},
 "surfaces":[{"id":"s","tools":["T"],"operation":"read","consequence":"local_read"}],
 "routes":[{"name":"inbox-*@acme","workers":["cron-*"],"max_ttl":"30s","consequences":["local_read","outbound_send"]},
  {"name":"inbox-*@acme","lanes":["b"]},
  {"name":"backup","lanes":["a","b"],"consequences":["*"]}]}`
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                string
		pol                 *policy.Policy
		route, worker, lane string
		ok                  bool
		ttl                 time.Duration
		allows, refuses     string
		detail              string
	}{
		{name: "recommended: isolated heartbeat", pol: policy.Recommended(), route: "heartbeat@acme", worker: "w1", lane: "isolated",
			ok: true, ttl: time.Minute, allows: "local_read", refuses: "remote_query"},
		{name: "recommended: other lane", pol: policy.Recommended(), route: "heartbeat@acme", worker: "w1", lane: "coordinator",
			detail: "may not own it"},
		{name: "recommended: undeclared", pol: policy.Recommended(), route: "payroll", worker: "w1", lane: "isolated",
			detail: "not declared"},
		{name: "worker pattern", pol: p, route: "inbox-triage@acme", worker: "cron-1", lane: "b", ok: true, ttl: 30 * time.Second,
			allows: "outbound_send", refuses: "arbitrary_execution"},
		{name: "first matching entry decides", pol: p, route: "inbox-triage@acme", worker: "w9", lane: "b", detail: "routes[0]"},
		{name: "default ttl and classes", pol: p, route: "backup", worker: "w9", lane: "b", ok: true, ttl: policy.DefaultRouteTTL,
			allows: "device_actuation"},
		{name: "pinned to another lane", pol: p, route: "backup", worker: "pinned", lane: "b", detail: "pinned to lane a"},
		{name: "bad name", pol: p, route: "a b", worker: "w9", lane: "b", detail: "not allowed"},
		{name: "version 1", pol: policy.LegacyDefault(), route: "backup", worker: "w9", lane: "b", detail: "version 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, detail, ok := tc.pol.RouteFor(tc.route, tc.worker, tc.lane)
			if ok != tc.ok || !strings.Contains(detail, tc.detail) {
				t.Fatalf("RouteFor = %+v, %q, %v", g, detail, ok)
			}
			if !ok {
				return
			}
			if time.Duration(g.MaxTTL) != tc.ttl || (tc.allows != "" && !g.Allows(tc.allows)) || (tc.refuses != "" && g.Allows(tc.refuses)) {
				t.Fatalf("grant %+v (classes %v)", g, g.Classes())
			}
		})
	}
}

// TestRoutesRefused: malformed route entries are refused, naming the
// field.
func TestRoutesRefused(t *testing.T) {
	base := `{"version":2,"default_ttl":"1m","lanes":{"a":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"s","tools":["T"],"operation":"read","consequence":"local_read"}],"routes":[%s]}`
	for _, tc := range []struct{ entry, field string }{
		{`{"name":"","workers":["w"]}`, "routes[0].name"},
		{`{"name":"a b","workers":["w"]}`, "routes[0].name"},
		{`{"name":"r"}`, "routes[0]: name the workers or lanes"},
		{`{"name":"r","lanes":["nowhere"]}`, "routes[0].lanes[0]"},
		{`{"name":"r","workers":["w"],"max_ttl":"2h"}`, "routes[0].max_ttl"},
		{`{"name":"r","workers":["w"],"max_ttl":"10ms"}`, "routes[0].max_ttl"},
		{`{"name":"r","workers":["w"],"consequences":["teleport"]}`, "routes[0].consequences[0]"},
		{`{"name":"r","workers":["w"],"owner":"x"}`, "owner"},
	} {
		_, err := policy.Parse([]byte(strings.Replace(base, "%s", tc.entry, 1)))
		if err == nil || !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", tc.entry, err, tc.field)
		}
	}
}

// TestRouteMaxRecords: max_records is kept on the entry's grant, RouteEntry
// names the entry that decides a route (the first match), and a cap out
// of range is refused naming the field.
func TestRouteMaxRecords(t *testing.T) {
	doc := `{"version":2,"default_ttl":"1m","lanes":{"a":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"s","tools":["T"],"operation":"read","consequence":"local_read"}],
 "routes":[{"name":"inbox-*","workers":["cron-*"],"max_records":3},{"name":"*","lanes":["a"]}]}`
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	g, _, ok := p.RouteFor("inbox-x", "cron-1", "a")
	if !ok || g.MaxRecords != 3 || g.Entry != 0 {
		t.Fatalf("inbox-x: %+v %v", g, ok)
	}
	for route, want := range map[string]int{"inbox-x": 0, "backup": 1} {
		if got := p.RouteEntry(route); got != want {
			t.Errorf("RouteEntry(%s) = %d, want %d", route, got, want)
		}
	}
	if got := policy.LegacyDefault().RouteEntry("inbox-x"); got != -1 {
		t.Errorf("a version 1 document decides %d", got)
	}
	for _, bad := range []string{"-1", "1000001"} {
		_, err := policy.Parse([]byte(strings.Replace(doc, `"max_records":3`, `"max_records":`+bad, 1)))
		if err == nil || !strings.Contains(err.Error(), "max_records") {
			t.Errorf("max_records %s: %v", bad, err)
		}
	}
}
