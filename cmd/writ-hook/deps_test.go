package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writ-hook starts for every hook event, so it links the standard library
// and hookwire only, and neither package net nor cgo (which would make a
// default build a dynamic binary): TestLinksOnlyTheStandardLibrary lists
// its transitive imports with go list -deps and fails on any other.
func TestLinksOnlyTheStandardLibrary(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go tool at %s (runtime.GOROOT), so writ-hook's imports cannot be listed: %v", gobin, err)
	}
	all, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(all)) {
		if p == "net" || p == "runtime/cgo" || p == "os/user" {
			t.Errorf("writ-hook links %s", p)
		}
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	got := strings.Fields(string(out))
	allowed := map[string]bool{
		"github.com/writ-dev/writ/cmd/writ-hook":     true,
		"github.com/writ-dev/writ/internal/hookwire": true,
	}
	for _, p := range got {
		if !allowed[p] {
			t.Errorf("writ-hook links %s", p)
		}
	}
	if len(got) != len(allowed) {
		t.Errorf("listed %v, want exactly %d packages outside the standard library", got, len(allowed))
	}
}
