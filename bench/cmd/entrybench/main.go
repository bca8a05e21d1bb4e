// Command entrybench measures what the NATS server a worker enters at
// costs: the same grant and spend load on a 3-process writ cluster, with
// the worker connections pinned to a follower's server (each request and
// answer crosses a NATS route to and from the leader), pinned to the
// leader's server, and given every server with leader affinity (as
// worker-agent is by default). It reports, per entry and concurrency,
// the spend p50/p99, throughput and CPU per spend (user+sys of this
// process and the three issuers, divided by spends). Runs are bounded in
// count and time: seconds each.
//
//	cd bench && go run ./cmd/entrybench
//	cd bench && go run ./cmd/entrybench -advertise-off   # issuers that name no server on their answers
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/bench/gen"
	"github.com/writ-dev/writ/bench/load"
	"github.com/writ-dev/writ/bench/systems"
)

type result struct {
	mode       string
	conc       int
	mint       load.Result
	spend      load.Result
	cpuUsSpend float64
	spent      int
	double     int
}

func main() {
	var (
		issuer   = flag.String("issuer", "", "issuer binary (default: build ../cmd/issuer)")
		root     = flag.String("root", "..", "the writ module's directory")
		n1       = flag.Int("n1", 150, "grants per run at c=1 (each spent twice)")
		n64      = flag.Int("n64", 1500, "grants per run at c=64 (each spent twice)")
		rounds   = flag.Int("rounds", 2, "rounds; each runs every entry at every concurrency, rotating the order")
		limit    = flag.Duration("limit", 15*time.Second, "time bound of each mint or spend run")
		advOff   = flag.Bool("advertise-off", false, "start the issuers with --nats-advertise off (no leader header on answers)")
		modesArg = flag.String("modes", "follower,leader,affinity", "entries to measure")
		concArg  = flag.String("conc", "1,64", "concurrencies to measure (c=1 runs -n1 grants, every other -n64)")
	)
	flag.Parse()
	var concs []int
	for _, f := range strings.Split(*concArg, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 1 {
			fmt.Fprintf(os.Stderr, "entrybench: bad -conc %q\n", *concArg)
			os.Exit(2)
		}
		concs = append(concs, c)
	}
	if err := run(*issuer, *root, *n1, *n64, *rounds, *limit, *advOff, strings.Split(*modesArg, ","), concs); err != nil {
		fmt.Fprintln(os.Stderr, "entrybench:", err)
		os.Exit(1)
	}
}

func run(bin, root string, n1, n64, rounds int, limit time.Duration, advOff bool, modes []string, concs []int) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "entrybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		if bin, err = systems.BuildIssuer(root, dir); err != nil {
			return err
		}
	}
	var extra []string
	if advOff {
		extra = append(extra, "--nats-advertise", "off")
	}
	w, err := systems.StartWritProcesses(ctx, bin, dir, 256, extra...)
	if err != nil {
		return err
	}
	defer w.Close()
	leader, err := w.Leader()
	if err != nil {
		return err
	}
	follower := (leader + 1) % len(w.Nodes)
	var all []string
	all = append(all, w.Nodes[follower].URL())
	for i, n := range w.Nodes {
		if i != follower {
			all = append(all, n.URL())
		}
	}
	fmt.Printf("leader %s, follower %s; advertise off: %v\n", w.Nodes[leader].ID, w.Nodes[follower].ID, advOff)

	enter := func(mode string) error {
		switch mode {
		case "follower":
			return w.Reenter([]string{w.Nodes[follower].URL()}, false)
		case "leader":
			return w.Reenter([]string{w.Nodes[leader].URL()}, false)
		case "affinity":
			if err := w.Reenter(all, true); err != nil {
				return err
			}
			// A few requests bring both connections to the leader's server.
			w.NewRound("warm", 64)
			deadline := time.Now().Add(10 * time.Second)
			for k := 0; ; k++ {
				_, _ = w.Mint(ctx, k%64)
				at := w.ConnectedTo()
				if at[0] == leader && at[1] == leader {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("affinity: connections at %v after 10s, leader %d (advertise off?)", at, leader)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		return fmt.Errorf("unknown mode %q", mode)
	}
	pids := w.Pids()
	cpu := func() time.Duration {
		t := gen.CPU(os.Getpid())
		for _, p := range pids {
			t += gen.CPU(p)
		}
		return t
	}
	var results []result
	for r := range rounds {
		for ci, c := range concs {
			n := n64
			if c == 1 {
				n = n1
			}
			for k := range modes {
				mode := modes[(k+r+ci)%len(modes)]
				if err := enter(mode); err != nil {
					return err
				}
				w.NewRound(fmt.Sprintf("r%d-%s-c%d", r, mode, c), n)
				res := result{mode: mode, conc: c}
				res.mint = load.Run(ctx, n, c, limit, 30*time.Second, w.Mint)
				succ := make([]atomic.Int32, n)
				c0 := cpu()
				res.spend = load.Run(ctx, 2*n, c, limit, 30*time.Second, func(ctx context.Context, k int) (bool, error) {
					i := k / 2
					ok, err := w.Spend(ctx, i, (i+k%2)%2)
					if ok {
						succ[i].Add(1)
					}
					return ok, err
				})
				res.cpuUsSpend = float64(cpu()-c0) / 1e3 / float64(max(1, res.spend.Ops))
				for i := range succ {
					if v := succ[i].Load(); v > 0 {
						res.spent++
						if v > 1 {
							res.double++
						}
					}
				}
				fmt.Printf("round %d %-8s c=%-3d at %v: spend %s; CPU %.0fus/spend; spent %d of %d, double %d\n",
					r, mode, c, w.ConnectedTo(), res.spend, res.cpuUsSpend, res.spent, n, res.double)
				results = append(results, res)
				if _, err := w.WaitPublished(ctx, 60*time.Second); err != nil {
					return fmt.Errorf("waiting for the stream: %w", err)
				}
			}
		}
	}
	fmt.Println()
	fmt.Println("| entry | c | spend p50 ms | spend p99 ms | spends/s | CPU us/spend | mint p50 ms | double spends |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range concs {
		for _, mode := range modes {
			var p50, p99, rate, cpuUs, mp50 []float64
			double := 0
			for _, r := range results {
				if r.mode == mode && r.conc == c {
					p50 = append(p50, r.spend.P50Ms)
					p99 = append(p99, r.spend.P99Ms)
					rate = append(rate, r.spend.PerSec)
					cpuUs = append(cpuUs, r.cpuUsSpend)
					mp50 = append(mp50, r.mint.P50Ms)
					double += r.double
				}
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %d |\n", mode, c, span(p50, "%.2f"), span(p99, "%.2f"), span(rate, "%.0f"), span(cpuUs, "%.0f"), span(mp50, "%.2f"), double)
		}
	}
	return nil
}

// span is the median of xs, with the range when several.
func span(xs []float64, f string) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf(f, med)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", med, s[0], s[len(s)-1])
}
