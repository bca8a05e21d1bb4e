package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Machine describes where the numbers were measured.
type Machine struct {
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemGB      float64 `json:"mem_gb"`
	Kernel     string  `json:"kernel"`
	Go         string  `json:"go"`
	FsyncP50Ms float64 `json:"fsync_p50_ms"` // 4 KiB write + fdatasync in the temp dir
	FsyncP99Ms float64 `json:"fsync_p99_ms"`
	// AppendP50Ms: 4 KiB appended to a growing file + fdatasync (the file
	// size changes, so the filesystem journal commits too).
	AppendP50Ms float64 `json:"append_fsync_p50_ms"`
	AppendP99Ms float64 `json:"append_fsync_p99_ms"`
	LoadAvg     string  `json:"loadavg_start"`
	LoadAvgEnd  string  `json:"loadavg_end"`
}

func probeMachine(dir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadAvg: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				m.MemGB = kb / 1024 / 1024
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.FsyncP50Ms, m.FsyncP99Ms = fsyncProbe(dir, 100, false)
	m.AppendP50Ms, m.AppendP99Ms = fsyncProbe(dir, 100, true)
	return m
}

// fsyncProbe overwrites one 4 KiB block (or appends one) and fdatasyncs,
// n times.
func fsyncProbe(dir string, n int, appendBlocks bool) (p50, p99 float64) {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		return 0, 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var ds []float64
	for i := range n {
		buf[0] = byte(i)
		t := time.Now()
		off := int64(0)
		if appendBlocks {
			off = int64(i) * 4096
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, 0
		}
		if err := f.Sync(); err != nil {
			return 0, 0
		}
		ds = append(ds, float64(time.Since(t))/1e6)
	}
	slices.Sort(ds)
	return ds[n/2], ds[n*99/100]
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Micro is one Go benchmark result found in the root module.
type Micro struct {
	Package string  `json:"package"`
	Name    string  `json:"name"`
	NsPerOp float64 `json:"ns_per_op"`
	Extra   string  `json:"extra,omitempty"`
}

// MicroReport says which Go benchmarks were looked for and what ran.
type MicroReport struct {
	Results []Micro  `json:"results"`
	Notes   []string `json:"notes"`
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(.*)$`)

// microBenchmarks runs the policy-evaluation, argument-flattening and hook
// Go benchmarks of the root module if they exist (they are written by the
// owners of those packages; this only links to them).
func microBenchmarks(ctx context.Context, root string) *MicroReport {
	rep := &MicroReport{}
	for _, pkg := range []string{"policy", "args", "harness", "cmd/worker-agent"} {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
		found := false
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), "func Benchmark") {
				found = true
			}
		}
		if !found {
			rep.Notes = append(rep.Notes, fmt.Sprintf("./%s: no Go benchmark (skipped)", pkg))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cmd := exec.CommandContext(cctx, "go", "test", "-run", "^$", "-bench", ".", "-benchtime", "200ms", "-benchmem", "./"+pkg+"/")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("./%s: go test -bench failed (skipped): %v: %s", pkg, err, lastLine(string(out))))
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			if m := benchLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				ns, _ := strconv.ParseFloat(m[2], 64)
				rep.Results = append(rep.Results, Micro{Package: "./" + pkg, Name: m[1], NsPerOp: ns, Extra: strings.TrimSpace(m[3])})
			}
		}
	}
	return rep
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
