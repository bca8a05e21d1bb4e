package gobuild

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

func TestPathBuildsOnceAndRemoveDeletes(t *testing.T) {
	var c Cache
	const pkg = "github.com/writ-dev/writ/cmd/auditor"
	var wg sync.WaitGroup
	paths := make([]string, 4)
	for i := range paths {
		wg.Go(func() {
			p, err := c.Path(pkg)
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		})
	}
	wg.Wait()
	for _, p := range paths[1:] {
		if p != paths[0] {
			t.Fatalf("concurrent calls built different binaries: %q", paths)
		}
	}
	out, err := exec.Command(paths[0], "--help").CombinedOutput()
	if !strings.Contains(string(out), "auditor") {
		t.Fatalf("built binary does not run as the auditor: %v\n%s", err, out)
	}
	c.Remove()
	if _, err := os.Stat(paths[0]); !os.IsNotExist(err) {
		t.Fatalf("after Remove the binary is still there: %v", err)
	}
}

// A failed build is an error with the go command's own output (what is
// missing, or the compiler's message with file and line), reported by
// every call for that package; there is no deadline to exceed.
func TestPathReportsBuildFailure(t *testing.T) {
	for _, tc := range []struct {
		name, pkg string
		want      []string
	}{
		{"no such package", "github.com/writ-dev/writ/cmd/no-such-command", []string{"no-such-command"}},
		{"compile error", "github.com/writ-dev/writ/internal/testing/gobuild/testdata/broken",
			[]string{"go build", "main.go:6", "cannot use", "as int value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cache
			defer c.Remove()
			for range 2 {
				_, err := c.Path(tc.pkg)
				if err == nil {
					t.Fatalf("Path(%s) built it; want an error", tc.pkg)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("Path(%s) = %q; want it to contain %q", tc.pkg, err, w)
					}
				}
			}
		})
	}
}
