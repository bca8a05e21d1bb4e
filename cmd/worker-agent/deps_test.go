package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// policyPkg is the policy engine; the worker never judges a call, so it
// must not link it (argument flattening comes from package args).
const policyPkg = "github.com/writ-dev/writ/policy"

// TestWorkerDoesNotLinkPolicy lists the worker's transitive imports with
// `go list -deps` and fails if the policy engine (or a package under it)
// is among them, naming the packages that import it.
func TestWorkerDoesNotLinkPolicy(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if runtime.GOOS == "windows" {
		gobin += ".exe"
	}
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go tool at %s (runtime.GOROOT), so the worker's imports cannot be listed: %v", gobin, err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	isPolicy := func(p string) bool { return p == policyPkg || strings.HasPrefix(p, policyPkg+"/") }
	var listed []string
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		listed = append(listed, fields[0])
		if isPolicy(fields[0]) {
			bad = append(bad, fields[0]+" is linked")
		}
		for _, imp := range fields[1:] {
			if isPolicy(imp) {
				bad = append(bad, fields[0]+" imports "+imp)
			}
		}
	}
	// The listing is real: it holds the worker and what it flattens with.
	for _, want := range []string{"github.com/writ-dev/writ/cmd/worker-agent", "github.com/writ-dev/writ/args"} {
		found := false
		for _, p := range listed {
			found = found || p == want
		}
		if !found {
			t.Fatalf("go list -deps does not list %s; got %d packages", want, len(listed))
		}
	}
	if len(bad) > 0 {
		t.Errorf("the worker links the policy engine:\n  %s", strings.Join(bad, "\n  "))
	}
}
