package main

import (
	"strings"
	"testing"
	"time"
)

// A built-binary run's timeout covers the run alone. The first run of a
// test binary builds worker-agent, which on an empty build cache (a fresh
// clone, CI) takes far longer than any run; a clock started before the
// build killed the run with "context deadline exceeded". Here the binary
// takes longer to resolve than the whole timeout, as a cold build does,
// and the run must still get its full budget.
func TestBinRunTimeoutStartsAfterTheBuild(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		run  func(*testing.T, binRun) result
	}{
		{"run", func(t *testing.T, r binRun) result { return r.run(t, "--help") }},
		{"command", func(t *testing.T, r binRun) result {
			cmd := r.command(t, "--help")
			var out strings.Builder
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("running worker-agent --help: %v", err)
			}
			return result{stdout: out.String()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolved := false
			slowBuild := func(tb testing.TB) string {
				p := builtBinary(tb)
				// The build outlasts the run's timeout (a stand-in for a
				// cold compile, which no poll can shorten).
				time.Sleep(timeout + 500*time.Millisecond)
				resolved = true
				return p
			}
			r := tc.run(t, binRun{timeout: timeout, binary: slowBuild})
			if !resolved {
				t.Fatal("the binary was never resolved")
			}
			if r.code != 0 || !strings.Contains(r.stdout, "worker-agent") {
				t.Fatalf("worker-agent --help after a slow build: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
}
