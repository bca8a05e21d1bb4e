// Command writbench runs writ side by side with etcd and a JetStream KV
// bucket in one run, on loopback, and writes one table (stdout), JSON, CSV
// and a PNG chart under -out. See the "Performance" section of README.md.
//
//	go run ./cmd/writbench -quick        # make bench-quick (< 2 minutes)
//	go run ./cmd/writbench               # make bench       (< 10 minutes)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/writ-dev/writ/bench/gen"
)

// Params size a run. Every loop is bounded in count (the N) and in time
// (Limit per measured run).
type Params struct {
	Mode        string        `json:"mode"`
	Conc        []int         `json:"concurrency"`
	N           map[int]int   `json:"grants_per_concurrency"` // same N for every system
	Payload     int           `json:"payload_bytes"`
	Limit       time.Duration `json:"limit_per_run_ns"`
	Cycles      int           `json:"cycles"`
	CycleConc   int           `json:"cycle_concurrency"`
	PubEvents   int           `json:"publication_events"`
	AuditEvents int           `json:"audit_events"`
	MemGrants   int           `json:"memory_grants"`
	Micro       bool          `json:"micro_benchmarks"`
	// The heartbeat phase: RouteN routes renewed at RenewRate renewals/s
	// while the spend load runs at RouteConc.
	RouteN    int `json:"heartbeat_routes"`
	RenewRate int `json:"heartbeat_renewals_per_sec"`
	RouteConc int `json:"heartbeat_spend_concurrency"`
	// The status-poller phase: the leader's status asked StatusRate
	// times a second while the spend load runs at StatusConc.
	StatusRate int `json:"status_polls_per_sec"`
	StatusConc int `json:"status_spend_concurrency"`
}

func params(quick bool) Params {
	if quick {
		return Params{Mode: "quick", Conc: []int{1, 64, 256}, N: map[int]int{1: 100, 64: 2000, 256: 2000},
			Payload: 256, Limit: 20 * time.Second, Cycles: 500, CycleConc: 64, PubEvents: 5000,
			AuditEvents: 300_000, MemGrants: 200_000, RouteN: 2000, RenewRate: 500, RouteConc: 64,
			StatusRate: 10, StatusConc: 64}
	}
	return Params{Mode: "full", Conc: []int{1, 64, 256}, N: map[int]int{1: 500, 64: 10000, 256: 10000},
		Payload: 256, Limit: 60 * time.Second, Cycles: 3000, CycleConc: 64, PubEvents: 20000,
		AuditEvents: 1_000_000, MemGrants: 1_000_000, Micro: true, RouteN: 10_000, RenewRate: 1000, RouteConc: 64,
		StatusRate: 10, StatusConc: 64}
}

func main() {
	var (
		quick    = flag.Bool("quick", false, "small N for a run under 2 minutes")
		out      = flag.String("out", "results", "directory for JSON, CSV and PNG")
		issuer   = flag.String("issuer", "", "issuer binary (default: build ../cmd/issuer)")
		root     = flag.String("root", "..", "the writ module's directory")
		writMode = flag.String("writ-mode", "processes", "processes (3 issuer processes) or inproc (3 nodes in this process)")
		systems  = flag.String("systems", "etcd,kv,writ", "systems to run")
		skip     = flag.String("skip", "", "comma-separated phases to skip: publish,audit,memory,micro,cycle,routes,status")
		routes   = flag.Int("routes", 0, "heartbeat phase: routes to acquire and renew (default 10000; -quick 2000)")
		rate     = flag.Int("renew-rate", 0, "heartbeat phase: renewals per second during the spend load (default 1000; -quick 500)")
		polls    = flag.Int("status-rate", 0, "status phase: status requests per second to the leader during the spend load (default 10)")
		profDir  = flag.String("profile", "", "write CPU/heap profiles here (writ spend path needs -writ-mode inproc)")
		phase    = flag.String("phase", "", "internal: run one subprocess phase (audit|memory) and print JSON")
		n        = flag.Int("n", 0, "internal: size for -phase")
		name     = flag.String("name", "", "result file base name (default bench or bench-quick)")
		profConc = flag.Int("profile-conc", 256, "concurrency whose writ mint+spend is CPU-profiled (with -profile, -writ-mode inproc)")
		scale    = flag.Float64("scale", 1, "multiply every N (for trying the harness out)")
	)
	flag.Parse()
	if *phase != "" {
		os.Exit(runPhase(*phase, *n, *profDir))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	p := params(*quick)
	if *scale != 1 {
		for c, v := range p.N {
			p.N[c] = max(1, int(float64(v)**scale))
		}
		p.Cycles = max(1, int(float64(p.Cycles)**scale))
		p.PubEvents = max(1, int(float64(p.PubEvents)**scale))
		p.AuditEvents = max(1, int(float64(p.AuditEvents)**scale))
		p.MemGrants = max(1, int(float64(p.MemGrants)**scale))
	}
	if *routes > 0 {
		p.RouteN = *routes
	}
	if *rate > 0 {
		p.RenewRate = *rate
	}
	if *polls > 0 {
		p.StatusRate = *polls
	}
	if _, ok := p.N[p.StatusConc]; !ok {
		p.N[p.StatusConc] = p.N[p.Conc[len(p.Conc)-1]]
	}
	if _, ok := p.N[p.RouteConc]; !ok {
		p.N[p.RouteConc] = p.N[p.Conc[len(p.Conc)-1]]
	}
	base := *name
	if base == "" {
		base = "bench"
		if *quick {
			base = "bench-quick"
		}
	}
	r := &Runner{P: p, Root: *root, IssuerBin: *issuer, WritMode: *writMode, ProfDir: *profDir, ProfConc: *profConc,
		Systems: splitSet(*systems), Skip: splitSet(*skip)}
	r.Cmd = strings.TrimSpace("go run ./cmd/writbench " + strings.Join(os.Args[1:], " "))
	if os.Getenv("MAKELEVEL") != "" {
		r.Cmd = "make bench"
		if *quick {
			r.Cmd = "make bench-quick"
		}
		r.Cmd += " (" + strings.TrimSpace("cd bench && go run ./cmd/writbench "+strings.Join(os.Args[1:], " ")) + ")"
	}
	rep, err := r.Run(ctx)
	if rep != nil {
		if werr := rep.Write(*out, base); werr != nil {
			fmt.Fprintln(os.Stderr, "writing results:", werr)
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "writbench:", err)
		os.Exit(1)
	}
}

func splitSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			m[x] = true
		}
	}
	return m
}

// runPhase runs the in-process fsm phases in their own process so that heap
// and RSS readings see nothing but the state machine.
func runPhase(phase string, n int, profDir string) int {
	var v any
	var err error
	switch phase {
	case "audit":
		v, err = gen.Audit(n, profDir)
	case "memory":
		v, err = gen.Memory(n, profDir)
	default:
		err = fmt.Errorf("unknown phase %q", phase)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(v)
	return 0
}

// subphase re-executes this binary for an fsm phase, bounded by limit.
func subphase(ctx context.Context, phase string, n int, profDir string, limit time.Duration, v any) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	args := []string{"-phase", phase, "-n", fmt.Sprint(n)}
	if profDir != "" {
		abs, _ := filepath.Abs(profDir)
		args = append(args, "-profile", abs)
	}
	cmd := exec.CommandContext(cctx, exe, args...)
	cmd.Stderr = os.Stderr
	outb, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("phase %s: %w", phase, err)
	}
	return json.Unmarshal(outb, v)
}
