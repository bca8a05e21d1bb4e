// Package gobuild builds writ's commands, each at most once per process,
// for the tests and harnesses that run them as real processes.
package gobuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Cache builds packages into one temporary directory. The zero value is
// ready to use and safe for concurrent use; Remove deletes what it built.
type Cache struct {
	mu    sync.Mutex
	dir   string
	built map[string]*build
}

type build struct {
	n    int // names the output, so two flag sets of one package differ
	once sync.Once
	path string
	err  error
}

// Path returns the binary of the main package pkg (an import path such as
// github.com/writ-dev/writ/cmd/issuer) built with `go build` and the given
// extra flags, building it on the first call for that package and flags.
// A failed build is reported by every call, with the compiler's output.
func (c *Cache) Path(pkg string, flags ...string) (string, error) {
	key := strings.Join(append([]string{pkg}, flags...), " ")
	c.mu.Lock()
	if c.built == nil {
		c.built = map[string]*build{}
	}
	b := c.built[key]
	if b == nil {
		b = &build{n: len(c.built)}
		c.built[key] = b
	}
	c.mu.Unlock()
	b.once.Do(func() { b.path, b.err = c.build(pkg, b.n, flags) })
	return b.path, b.err
}

func (c *Cache) build(pkg string, n int, flags []string) (string, error) {
	c.mu.Lock()
	if c.dir == "" {
		dir, err := os.MkdirTemp("", "writ-bin-")
		if err != nil {
			c.mu.Unlock()
			return "", fmt.Errorf("gobuild: %w", err)
		}
		c.dir = dir
	}
	dir := c.dir
	c.mu.Unlock()
	out := filepath.Join(dir, fmt.Sprintf("%d-%s", n, path.Base(pkg)))
	if runtime.GOOS == "windows" {
		out += ".exe"
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := append(append([]string{"build", "-o", out}, flags...), pkg)
	cmd := exec.Command(goTool, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gobuild: go %s: %v\n%s", strings.Join(args, " "), err, buf.String())
	}
	return out, nil
}

// Remove deletes every binary the cache built.
func (c *Cache) Remove() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir, c.built = "", nil
	}
}
