package main

import (
	"strings"
	"testing"
	"time"
)

// TestTailFilters: each filter keeps exactly the receipts it names, a
// grant's attempt and effects follow its permit's lane, and bad values
// are usage errors that say what is expected.
func TestTailFilters(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(10)
	b.publish(is.receipts()...)

	lines := func(args ...string) []string {
		t.Helper()
		r := runCLI(t, append([]string{"tail", "--nats-url", url}, args...)...)
		if r.code != ExitOK {
			t.Fatalf("tail %v: exit %d: %s", args, r.code, r.stderr)
		}
		return strings.Split(strings.TrimSpace(r.stdout), "\n")
	}
	all := lines()
	for _, c := range []struct {
		args []string
		keep func(f []string) bool
	}{
		{[]string{"--worker", "w1"}, func(f []string) bool { return f[4] == "w1" }},
		{[]string{"--kind", "deny,spend_refused"}, func(f []string) bool { return f[2] == "deny" || f[2] == "spend_refused" }},
		{[]string{"--reason", "already_spent"}, func(f []string) bool { return strings.HasPrefix(f[5], "already_spent") }},
		{[]string{"--grant", "g3"}, func(f []string) bool { return f[3] == "g3" }},
		{[]string{"--lane", "isolated", "--kind", "effect"}, func(f []string) bool { return f[2] == "effect" }},
		{[]string{"--worker", "w0", "--kind", "attempt", "--since", "2025-01-01T00:00:00Z"}, func(f []string) bool { return f[4] == "w0" && f[2] == "attempt" }},
		{[]string{"--since", "1h"}, func([]string) bool { return false }}, // the receipts are from 2025
		{[]string{"--lane", "coordinator"}, func([]string) bool { return false }},
	} {
		var want []string
		for _, l := range all {
			if c.keep(strings.Fields(l)) {
				want = append(want, l)
			}
		}
		got := lines(c.args...)
		if len(got) == 1 && got[0] == "" {
			got = nil
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("tail %v:\n%s\nwant:\n%s", c.args, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) == 0 && !strings.Contains(strings.Join(c.args, " "), "1h") && !strings.Contains(strings.Join(c.args, " "), "coordinator") {
			t.Errorf("tail %v: the scenario has no such receipt; the case proves nothing", c.args)
		}
	}
	for _, bad := range [][]string{{"--kind", "permits"}, {"--since", "yesterday"}, {"--since", "-1h"}} {
		r := runCLI(t, append([]string{"tail", "--nats-url", url}, bad...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("tail %v: exit %d %s", bad, r.code, r.stderr)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"90m":                  now.Add(-90 * time.Minute),
		"2026-01-02T14:00:00Z": now.Add(-time.Hour),
	} {
		got, err := parseSince(in, now)
		if err != nil || got != want.UnixNano() {
			t.Errorf("%s: %v %v", in, time.Unix(0, got).UTC(), err)
		}
	}
}
