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

func TestPathReportsBuildFailure(t *testing.T) {
	var c Cache
	defer c.Remove()
	for range 2 {
		_, err := c.Path("github.com/writ-dev/writ/cmd/no-such-command")
		if err == nil || !strings.Contains(err.Error(), "no-such-command") {
			t.Fatalf("Path of a missing package = %v; want an error naming it", err)
		}
	}
}
