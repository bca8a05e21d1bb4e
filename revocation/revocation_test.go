package revocation

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
)

// TestParseKey: keys have the form scope/id with a known scope and a
// non-empty id; the id may itself contain '/'.
func TestParseKey(t *testing.T) {
	cases := []struct {
		key, scope, id string
		err            string // substring; empty means valid
	}{
		{key: "worker/w1", scope: ScopeWorker, id: "w1"},
		{key: "source/doc-17", scope: ScopeSource, id: "doc-17"},
		{key: "lane/isolated", scope: ScopeLane, id: "isolated"},
		{key: "incarnation/w1", scope: ScopeIncarnation, id: "w1"},
		{key: "dest/api.example.com/v1/pay", scope: ScopeDest, id: "api.example.com/v1/pay"},
		{key: "worker//", scope: ScopeWorker, id: "/"},
		{key: "", err: "want scope/id"},
		{key: "worker", err: "want scope/id"},
		{key: "worker/", err: "want scope/id"},
		{key: "/w1", err: "unknown scope"},
		{key: "Worker/w1", err: "unknown scope"},
		{key: "grant/g1", err: "unknown scope"},
		{key: " worker/w1", err: "unknown scope"},
	}
	for _, tc := range cases {
		scope, id, err := ParseKey(tc.key)
		if tc.err == "" {
			if err != nil || scope != tc.scope || id != tc.id {
				t.Errorf("ParseKey(%q) = %q, %q, %v; want %q, %q", tc.key, scope, id, err, tc.scope, tc.id)
			}
			if Key(scope, id) != tc.key {
				t.Errorf("Key(%q, %q) = %q, want %q", scope, id, Key(scope, id), tc.key)
			}
			continue
		}
		if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), tc.err) || scope != "" || id != "" {
			t.Errorf("ParseKey(%q) = %q, %q, %v; want ErrBadKey mentioning %q", tc.key, scope, id, err, tc.err)
		}
	}
}

// TestSetZeroDeletes: setting a counter to 0 removes it, so a map holding
// zeros and one without them are the same state (Len, Sorted, snapshots).
func TestSetZeroDeletes(t *testing.T) {
	var c Counters
	c.Set("worker/w1", 3)
	c.Set("lane/isolated", 1)
	c.Set("worker/w1", 0)
	c.Set("source/never-set", 0)
	if c.Len() != 1 || c.Get("worker/w1") != 0 {
		t.Fatalf("Len %d, worker/w1=%d; want 1 counter and 0", c.Len(), c.Get("worker/w1"))
	}
	if got := c.Sorted(); !reflect.DeepEqual(got, []events.Counter{{Key: "lane/isolated", Value: 1}}) {
		t.Fatalf("Sorted = %v", got)
	}
}

// TestBump: Bump increments from zero and returns the new value.
func TestBump(t *testing.T) {
	var c Counters
	for want := uint64(1); want <= 3; want++ {
		if got := c.Bump("source/s1"); got != want || c.Get("source/s1") != want {
			t.Fatalf("Bump = %d, Get = %d; want %d", got, c.Get("source/s1"), want)
		}
	}
	if c.Get("source/s2") != 0 {
		t.Fatalf("bumping one key moved another")
	}
}

// TestBindSortsAndDedups: Bind returns each distinct key once, sorted, with
// its current value (0 for counters never moved), and does not reorder the
// caller's slice.
func TestBindSortsAndDedups(t *testing.T) {
	var c Counters
	c.Set("worker/w1", 2)
	c.Set("source/s1", 5)
	cases := []struct {
		keys []string
		want []events.Counter
	}{
		{nil, []events.Counter{}},
		{[]string{"worker/w1"}, []events.Counter{ctr("worker/w1", 2)}},
		{
			[]string{"worker/w1", "lane/l1", "source/s1", "worker/w1", "lane/l1", "source/s1"},
			[]events.Counter{ctr("lane/l1", 0), ctr("source/s1", 5), ctr("worker/w1", 2)},
		},
		{[]string{"source/b", "source/a", "source/b"}, []events.Counter{ctr("source/a", 0), ctr("source/b", 0)}},
	}
	for _, tc := range cases {
		in := append([]string(nil), tc.keys...)
		got := c.Bind(in...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Bind(%v) = %v, want %v", tc.keys, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.keys) {
			t.Errorf("Bind reordered its argument: %v", in)
		}
	}
}

// TestStale: a bound counter is stale when its current value differs in
// either direction; unbound counters never matter; the first stale counter
// in bound order is reported.
func TestStale(t *testing.T) {
	var c Counters
	c.Set("worker/w1", 1)
	c.Set("source/s1", 4)
	bound := c.Bind("worker/w1", "source/s1", "lane/l1")

	cases := []struct {
		name  string
		move  func(*Counters)
		stale bool
		key   string
	}{
		{"nothing moved", func(*Counters) {}, false, ""},
		{"unbound counter moved", func(c *Counters) { c.Bump("worker/w2"); c.Bump("dest/x") }, false, ""},
		{"worker bumped", func(c *Counters) { c.Bump("worker/w1") }, true, "worker/w1"},
		{"zero counter bumped", func(c *Counters) { c.Bump("lane/l1") }, true, "lane/l1"},
		{"counter moved back", func(c *Counters) { c.Set("source/s1", 3) }, true, "source/s1"},
		{"counter reset to zero", func(c *Counters) { c.Set("worker/w1", 0) }, true, "worker/w1"},
		{"two moved: first in key order", func(c *Counters) { c.Bump("worker/w1"); c.Bump("lane/l1") }, true, "lane/l1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var now Counters
			for _, kv := range c.Sorted() {
				now.Set(kv.Key, kv.Value)
			}
			tc.move(&now)
			got, stale := now.Stale(bound)
			if stale != tc.stale || got.Key != tc.key {
				t.Fatalf("Stale = %v, %v; want stale=%v key %q", got, stale, tc.stale, tc.key)
			}
		})
	}
}

// TestNilCountersReadAsZero: a nil *Counters behaves as the empty set for
// every read (no panic): nothing bound at zero is stale, anything bound
// above zero is.
func TestNilCountersReadAsZero(t *testing.T) {
	var c *Counters
	if c.Get("worker/w1") != 0 || c.Len() != 0 || len(c.Sorted()) != 0 {
		t.Fatalf("nil counters are not empty")
	}
	if got := c.Bind("worker/w1"); !reflect.DeepEqual(got, []events.Counter{ctr("worker/w1", 0)}) {
		t.Fatalf("Bind = %v", got)
	}
	if _, stale := c.Stale([]events.Counter{ctr("worker/w1", 0)}); stale {
		t.Fatalf("zero binding is stale against nil counters")
	}
	if got, stale := c.Stale([]events.Counter{ctr("worker/w1", 1)}); !stale || got.Key != "worker/w1" {
		t.Fatalf("binding at 1 is not stale against nil counters")
	}
}

// TestSortedDeterministic: Sorted lists every non-zero counter by key,
// whatever the insertion order.
func TestSortedDeterministic(t *testing.T) {
	keys := []string{"worker/b", "source/z", "lane/a", "dest/m", "worker/a", "source/a"}
	want := []events.Counter{
		ctr("dest/m", 4), ctr("lane/a", 3), ctr("source/a", 6), ctr("source/z", 2), ctr("worker/a", 5), ctr("worker/b", 1),
	}
	for rot := range keys {
		var c Counters
		for i := range keys {
			k := keys[(i+rot)%len(keys)]
			c.Set(k, uint64(indexOf(keys, k)+1))
		}
		for range 3 {
			if got := c.Sorted(); !reflect.DeepEqual(got, want) {
				t.Fatalf("rotation %d: Sorted = %v, want %v", rot, got, want)
			}
		}
	}
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

func ctr(key string, v uint64) events.Counter { return events.Counter{Key: key, Value: v} }
