package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/writ-dev/writ/bench/gen"
	"github.com/writ-dev/writ/bench/load"
	"github.com/writ-dev/writ/bench/systems"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/natsbus"
)

// Runner runs every phase and fills a Report.
type Runner struct {
	P         Params
	Root      string
	IssuerBin string
	WritMode  string
	ProfDir   string
	ProfConc  int
	Systems   map[string]bool
	Skip      map[string]bool
	Cmd       string

	rep *Report
}

// SpendRun is one concurrency level of one system: N mints, then 2N spends
// (each grant spent twice, by different clients, the two attempts racing).
type SpendRun struct {
	System       string      `json:"system"`
	Conc         int         `json:"concurrency"`
	N            int         `json:"n"`
	Mint         load.Result `json:"mint"`
	Spend        load.Result `json:"spend"`
	Spent        int         `json:"grants_spent"`  // grants with at least one successful spend
	DoubleSpends int         `json:"double_spends"` // grants with more than one
	DrainSeconds float64     `json:"receipt_drain_seconds,omitempty"`
	// CPU per operation over the whole system, client included: this
	// process (driver, and the etcd members / NATS servers that run in it)
	// plus writ's issuer processes. Robust to other load on the machine.
	MintCPUus     float64 `json:"mint_cpu_us_per_op"`
	SpendCPUus    float64 `json:"spend_cpu_us_per_op"`
	LoadAvgBefore string  `json:"loadavg_before"`
	// Stages is what each writ node's latency histograms took in during
	// the spend phase (issuer processes only), and StagesLeader the index
	// of the node that led throughout it (-1 when leadership moved).
	Stages       []systems.Timings `json:"writ_stage_timings,omitempty"`
	StagesLeader int               `json:"writ_stage_leader"`
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (r *Runner) Run(ctx context.Context) (*Report, error) {
	start := time.Now()
	rep := &Report{Params: r.P, Command: r.Cmd, Started: start.UTC().Format(time.RFC3339), WritMode: r.WritMode}
	r.rep = rep
	tmp, err := os.MkdirTemp("", "writbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep.Machine = probeMachine(tmp)
	logf("machine: %s, %d cores, fsync p50 %.2fms, load %s", rep.Machine.CPU, rep.Machine.Cores, rep.Machine.FsyncP50Ms, rep.Machine.LoadAvg)
	if r.ProfDir != "" {
		_ = os.MkdirAll(r.ProfDir, 0o755)
	}

	var pubEvents [][]byte
	if !r.Skip["publish"] && r.Systems["kv"] {
		pubEvents, _, _ = gen.Stream(r.P.PubEvents, 64, time.Second)
		pubEvents = pubEvents[:r.P.PubEvents]
	}

	if err := r.runSystems(ctx, tmp, pubEvents); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		logf("%v", err)
	}
	if !r.Skip["audit"] && ctx.Err() == nil {
		logf("auditor: generating %d receipts with fsm.Apply and verifying them (subprocess)", r.P.AuditEvents)
		var a gen.AuditResult
		if err := subphase(ctx, "audit", r.P.AuditEvents, r.ProfDir, 4*time.Minute, &a); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			rep.Audit = &a
			logf("auditor: %d events: verify %.0f/s (pipelined %.0f/s), replay %.0f/s (pipelined %.0f/s), decode %.0f/s, apply %.0f/s", a.Events, a.VerifyPerSec, a.VerifyPipePerSec, a.ReplayPerSec, a.ReplayPipePerSec, a.DecodePerSec, a.ApplyPerSec)
		}
	}
	if !r.Skip["memory"] && ctx.Err() == nil {
		logf("memory: %d live grants in fsm (subprocess)", r.P.MemGrants)
		var m gen.MemoryResult
		if err := subphase(ctx, "memory", r.P.MemGrants, r.ProfDir, 4*time.Minute, &m); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		} else {
			rep.Memory = &m
			logf("memory: %.0f B/grant, heap idle %s live %s expired %s", m.HeapPerGrant, mb(m.Idle.HeapAlloc), mb(m.Live.HeapAlloc), mb(m.Expired.HeapAlloc))
		}
	}
	if r.P.Micro && !r.Skip["micro"] && ctx.Err() == nil {
		rep.Micro = microBenchmarks(ctx, r.Root)
	} else {
		rep.Notes = append(rep.Notes, "policy/hook Go benchmarks not run in this mode (make bench runs them when they exist)")
	}
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.Seconds = time.Since(start).Seconds()
	rep.build()
	fmt.Println(rep.Table())
	return rep, ctx.Err()
}

func mb(b uint64) string { return fmt.Sprintf("%.1fMB", float64(b)/1e6) }

func (r *Runner) start(ctx context.Context, name, dir string) (systems.System, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch name {
	case "etcd":
		return systems.StartEtcd(ctx, dir, r.P.Payload)
	case "kv":
		return systems.StartKV(ctx, dir, r.P.Payload)
	case "writ":
		if r.WritMode == "inproc" {
			return systems.StartWritInProcess(ctx, dir, r.P.Payload)
		}
		bin := r.IssuerBin
		if bin == "" {
			logf("writ: building ./cmd/issuer")
			var err error
			if bin, err = systems.BuildIssuer(r.Root, dir); err != nil {
				return nil, err
			}
		}
		return systems.StartWritProcesses(ctx, bin, dir, r.P.Payload)
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

// runSystems starts every system (one after the other, each waiting until
// it serves), then measures them interleaved: for each concurrency level,
// each system in turn (rotating who goes first), so that the three figures
// of one level are taken close together in time and share whatever else
// the machine is doing. A system not being measured is idle (a few percent
// of one core).
func (r *Runner) runSystems(ctx context.Context, tmp string, pubEvents [][]byte) error {
	var syss []systems.System
	defer func() {
		for _, s := range syss {
			t := time.Now()
			s.Close()
			logf("%s: stopped in %.1fs", s.Name(), time.Since(t).Seconds())
		}
	}()
	for _, name := range []string{"etcd", "kv", "writ"} {
		if !r.Systems[name] || ctx.Err() != nil {
			continue
		}
		t := time.Now()
		sys, err := r.start(ctx, name, filepath.Join(tmp, name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		syss = append(syss, sys)
		logf("%s: started in %.1fs", name, time.Since(t).Seconds())
		if w, ok := sys.(*systems.Writ); ok {
			r.rep.WritMode = w.Mode
			if st, err := w.LeaderStatus(); err == nil {
				r.rep.WritLeader = st.Node
			}
		}
	}
	for li, c := range r.P.Conc {
		for k := range syss {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			sys := syss[(li+k)%len(syss)]
			r.measure(ctx, sys, c)
		}
	}
	for _, sys := range syss {
		if w, ok := sys.(*systems.Writ); ok {
			if !r.Skip["cycle"] {
				r.cycle(ctx, w)
			}
			if !r.Skip["routes"] && ctx.Err() == nil {
				r.routes(ctx, w)
			}
			if !r.Skip["status"] && ctx.Err() == nil && w.Mode == "processes" {
				r.statusPoll(ctx, w)
			}
			r.rep.WritDisk = w.DiskUsage()
			if st, err := w.LeaderStatus(); err == nil {
				r.rep.WritStatus = &st
			}
			for _, pid := range w.Pids() {
				r.rep.WritRSS = append(r.rep.WritRSS, gen.RSS(pid))
			}
			r.rep.WritRefusals = w.Reasons
		}
	}
	for _, sys := range syss {
		if k, ok := sys.(*systems.KV); ok && len(pubEvents) > 0 {
			r.publication(ctx, k, pubEvents)
		}
	}
	return nil
}

// measure runs one concurrency level on one system.
func (r *Runner) measure(ctx context.Context, sys systems.System, c int) {
	name := sys.Name()
	w, _ := sys.(*systems.Writ)
	var prof *os.File
	var err error
	if w != nil && r.ProfDir != "" && w.Mode == "in-process" && c == r.ProfConc {
		if prof, err = os.Create(filepath.Join(r.ProfDir, fmt.Sprintf("writ-spend-c%d.cpu.pprof", c))); err == nil {
			_ = pprof.StartCPUProfile(prof)
		}
	}
	if prof != nil {
		writeHeap(filepath.Join(r.ProfDir, fmt.Sprintf("writ-spend-c%d.before.heap.pprof", c)))
	}
	run := r.spendRun(ctx, sys, c)
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
		// alloc_space of after minus before is what this level allocated:
		// go tool pprof -sample_index=alloc_space -base before after
		writeHeap(filepath.Join(r.ProfDir, fmt.Sprintf("writ-spend-c%d.after.heap.pprof", c)))
	}
	if w != nil {
		td := time.Now()
		if _, err := w.WaitPublished(ctx, 60*time.Second); err == nil {
			run.DrainSeconds = time.Since(td).Seconds()
		}
	}
	r.rep.Runs = append(r.rep.Runs, run)
	logf("%s c=%d mint:  %s", name, c, run.Mint)
	logf("%s c=%d spend: %s; grants spent %d of %d, double spends %d; CPU/op mint %.0fus spend %.0fus", name, c, run.Spend, run.Spent, run.N, run.DoubleSpends, run.MintCPUus, run.SpendCPUus)
}

func (r *Runner) spendRun(ctx context.Context, sys systems.System, c int) SpendRun {
	n := r.P.N[c]
	run := SpendRun{System: sys.Name(), Conc: c, N: n, LoadAvgBefore: loadAvg()}
	sys.NewRound(fmt.Sprintf("c%d", c), n)
	var pids []int
	if w, ok := sys.(*systems.Writ); ok {
		pids = w.Pids()
	}
	cpu := func() time.Duration {
		t := gen.CPU(os.Getpid())
		for _, p := range pids {
			t += gen.CPU(p)
		}
		return t
	}
	c0 := cpu()
	run.Mint = load.Run(ctx, n, c, r.P.Limit, 30*time.Second, sys.Mint)
	c1 := cpu()
	run.MintCPUus = float64(c1-c0) / 1e3 / float64(max(1, run.Mint.Ops))
	succ := make([]atomic.Int32, n)
	w, _ := sys.(*systems.Writ)
	before, leader := r.scrapeStages(ctx, w)
	run.Spend = load.Run(ctx, 2*n, c, r.P.Limit, 30*time.Second, func(ctx context.Context, k int) (bool, error) {
		i := k / 2
		client := (i + k%2) % 2 // the two attempts on grant i use different clients
		ok, err := sys.Spend(ctx, i, client)
		if ok {
			succ[i].Add(1)
		}
		return ok, err
	})
	run.SpendCPUus = float64(cpu()-c1) / 1e3 / float64(max(1, run.Spend.Ops))
	if after, leaderAfter := r.scrapeStages(ctx, w); before != nil && after != nil {
		for i := range after {
			run.Stages = append(run.Stages, after[i].Sub(before[i]))
		}
		run.StagesLeader = leader
		if leaderAfter != leader {
			run.StagesLeader = -1
		}
	}
	for i := range succ {
		switch v := succ[i].Load(); {
		case v > 1:
			run.DoubleSpends++
			run.Spent++
		case v == 1:
			run.Spent++
		}
	}
	return run
}

// scrapeStages reads every node's latency histograms and the leader's
// index, or nil when w is not a cluster of issuer processes or a node
// does not answer (the run goes on; its stage rows are left out).
func (r *Runner) scrapeStages(ctx context.Context, w *systems.Writ) ([]systems.Timings, int) {
	if w == nil || w.Mode != "processes" {
		return nil, -1
	}
	leader, err := w.Leader()
	if err != nil {
		logf("stage timings: %v", err)
		return nil, -1
	}
	out := make([]systems.Timings, len(w.Nodes))
	for i := range w.Nodes {
		if out[i], err = w.Scrape(ctx, i); err != nil {
			logf("stage timings: %v", err)
			return nil, -1
		}
	}
	return out, leader
}

// CycleRun is the full tool-call cycle through writ.
type CycleRun struct {
	Cycles        load.Result `json:"cycles"` // one op = grant + spend + effect
	DrainSeconds  float64     `json:"drain_seconds"`
	DurablePerSec float64     `json:"durable_cycles_per_sec"` // cycles / (run + drain until every receipt is in the stream)
	Receipts      uint64      `json:"stream_last_seq"`
}

func (r *Runner) cycle(ctx context.Context, w *systems.Writ) {
	w.NewRound("cycle", r.P.Cycles)
	t := time.Now()
	res := load.Run(ctx, r.P.Cycles, r.P.CycleConc, r.P.Limit, 30*time.Second, func(ctx context.Context, i int) (bool, error) {
		_, err := w.Cycle(ctx, i)
		return err == nil, err
	})
	td := time.Now()
	seq, err := w.WaitPublished(ctx, 60*time.Second)
	cr := CycleRun{Cycles: res, Receipts: seq}
	if err == nil {
		cr.DrainSeconds = time.Since(td).Seconds()
		cr.DurablePerSec = float64(res.OK) / time.Since(t).Seconds()
	}
	r.rep.Cycle = &cr
	logf("writ cycle c=%d: %s; every receipt in the R3 stream %.2fs after the last answer", r.P.CycleConc, res, cr.DrainSeconds)
}

// PublicationRun is natsbus.Publisher writing receipts into an R3 stream.
type PublicationRun struct {
	Events   int     `json:"events"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"per_sec"`
	LastSeq  uint64  `json:"stream_last_seq"`
	Batch    int     `json:"batch"`
	Error    string  `json:"error,omitempty"`
	TimedOut bool    `json:"timed_out"`
}

// publication publishes pre-encoded receipts (fsm.Apply output) into an R3
// WRIT_EVENTS stream on the KV run's 3-server cluster (same server settings
// as the issuers'), in batches of the issuer's PublishBatch, through the
// same natsbus.Publisher the issuer's publish loop uses.
func (r *Runner) publication(ctx context.Context, k *systems.KV, evs [][]byte) {
	nc, err := k.Cluster.Connect(0, "writ-bench-publisher")
	pr := PublicationRun{Batch: 1024}
	defer func() { r.rep.Publication = &pr }()
	if err != nil {
		pr.Error = err.Error()
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	_, err = natsbus.EnsureStream(sctx, js, 3)
	cancel()
	if err != nil {
		pr.Error = err.Error()
		return
	}
	msgs := make([]natsbus.Message, len(evs))
	for j, data := range evs {
		e, err := events.Decode(data)
		if err != nil {
			pr.Error = err.Error()
			return
		}
		msgs[j] = natsbus.Message{Seq: uint64(j + 1), Subject: events.Subject(e.Kind), Data: data}
	}
	pub := natsbus.NewPublisher(js)
	t := time.Now()
	deadline := t.Add(r.P.Limit)
	var last uint64
	for i := 0; i < len(evs); {
		if time.Now().After(deadline) {
			pr.TimedOut = true
			break
		}
		batch := msgs[i:min(i+pr.Batch, len(msgs))]
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		top, err := pub.Publish(pctx, batch)
		cancel()
		if err != nil {
			pr.Error = err.Error()
			break
		}
		last = top
		i = int(top)
	}
	pr.Seconds = time.Since(t).Seconds()
	pr.Events, pr.LastSeq = int(last), last
	pr.PerSec = float64(last) / pr.Seconds
	logf("receipt publication: %d events into the R3 stream in %.2fs: %.0f/s", last, pr.Seconds, pr.PerSec)
}

func sortedKeys(m map[string]int) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// writeHeap writes a heap profile (allocation counts since start included)
// to path; a failure only loses the profile.
func writeHeap(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}
