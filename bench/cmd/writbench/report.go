package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/bench/gen"
	"github.com/writ-dev/writ/bench/systems"
)

// Row is one figure of the table: a value per system (nil: not measured or
// not applicable) and the ratios writ/etcd and writ/kv.
type Row struct {
	Section  string   `json:"section"`
	Metric   string   `json:"metric"`
	Unit     string   `json:"unit"`
	Writ     *float64 `json:"writ"`
	Etcd     *float64 `json:"etcd"`
	KV       *float64 `json:"kv"`
	WritEtcd *float64 `json:"writ_over_etcd"`
	WritKV   *float64 `json:"writ_over_kv"`
	Note     string   `json:"note,omitempty"`
}

// Report is everything one run measured.
type Report struct {
	Command      string              `json:"command"`
	Started      string              `json:"started"`
	Seconds      float64             `json:"seconds"`
	Machine      Machine             `json:"machine"`
	Params       Params              `json:"params"`
	WritMode     string              `json:"writ_mode"`
	WritLeader   string              `json:"writ_leader,omitempty"`
	Rows         []Row               `json:"rows"`
	Runs         []SpendRun          `json:"runs"`
	Cycle        *CycleRun           `json:"cycle,omitempty"`
	Routes       *RouteRun           `json:"heartbeat_routes,omitempty"`
	Status       *StatusRun          `json:"status_poller,omitempty"`
	Publication  *PublicationRun     `json:"publication,omitempty"`
	Audit        *gen.AuditResult    `json:"audit,omitempty"`
	Memory       *gen.MemoryResult   `json:"memory,omitempty"`
	Micro        *MicroReport        `json:"micro,omitempty"`
	WritDisk     []systems.DiskUsage `json:"writ_disk,omitempty"`
	WritRSS      []uint64            `json:"writ_issuer_rss_bytes,omitempty"`
	WritStatus   *api.Status         `json:"writ_leader_status,omitempty"`
	WritRefusals map[string]int      `json:"writ_refusals,omitempty"`
	Notes        []string            `json:"notes,omitempty"`
	Errors       []string            `json:"errors,omitempty"`
}

func f(v float64) *float64 { return &v }

func (r *Report) run(sys string, c int) *SpendRun {
	for i := range r.Runs {
		if r.Runs[i].System == sys && r.Runs[i].Conc == c {
			return &r.Runs[i]
		}
	}
	return nil
}

func (r *Report) add(row Row) {
	if row.Writ != nil && row.Etcd != nil && *row.Etcd != 0 {
		row.WritEtcd = f(*row.Writ / *row.Etcd)
	}
	if row.Writ != nil && row.KV != nil && *row.KV != 0 {
		row.WritKV = f(*row.Writ / *row.KV)
	}
	r.Rows = append(r.Rows, row)
}

// perSys builds a row from a getter over the three systems' runs at c.
func (r *Report) perSys(section, metric, unit string, c int, get func(*SpendRun) float64) {
	row := Row{Section: section, Metric: metric, Unit: unit}
	any := false
	for sys, dst := range map[string]**float64{"writ": &row.Writ, "etcd": &row.Etcd, "kv": &row.KV} {
		if run := r.run(sys, c); run != nil {
			*dst = f(get(run))
			any = true
		}
	}
	if any {
		r.add(row)
	}
}

// stageRows lays out where one level's spends spent their time: the
// client's mean round trip, then the leader's own histograms from the
// outside in (request to answer, proposal to answer, raft's stages), and
// the followers' log append. Means, not medians: a histogram's sum over
// its count is exact where its quantiles are not.
func (r *Report) stageRows(run *SpendRun) {
	if len(run.Stages) == 0 || run.StagesLeader < 0 || run.StagesLeader >= len(run.Stages) {
		return
	}
	s := "1b. where a spend's time goes, writ only (means over each spend level; the leader's histograms unless named)"
	c := run.Conc
	lead := func(key string) *float64 { return f(leaderStage(run, key)) }
	var spend, follower systems.Timing
	for i, st := range run.Stages {
		spend = spend.Add(st["spend"])
		if i != run.StagesLeader {
			follower = follower.Add(st["raft/follower_append"])
		}
	}
	entries := run.Stages[run.StagesLeader]["raft/leader_append"].Count
	if run.Spend.Ops > 0 {
		r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d client round trip (c x wall / spends)", c), Unit: "ms",
			Writ: f(float64(c) * run.Spend.Seconds * 1e3 / float64(run.Spend.Ops))})
	}
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d issuer: request in -> answer out", c), Unit: "ms", Writ: f(spend.Mean() * 1e3),
		Note: fmt.Sprintf("%.0f spends answered", spend.Count)})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d issuer: proposed -> answer committed", c), Unit: "ms", Writ: lead("commit/spend")})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d raft: leader append -> commit", c), Unit: "ms", Writ: lead("raft/commit")})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d raft: leader log append", c), Unit: "ms", Writ: lead("raft/leader_append"),
		Note: fmt.Sprintf("%.0f entries, %.1f spends per entry", entries, float64(run.Spend.Ops)/max(1, entries))})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d raft: AppendEntries round trip", c), Unit: "ms", Writ: lead("raft/append_rpc")})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d raft: follower log append (both followers)", c), Unit: "ms", Writ: f(follower.Mean() * 1e3)})
	r.add(Row{Section: s, Metric: fmt.Sprintf("c=%d raft: state machine apply, per entry", c), Unit: "ms", Writ: lead("raft/fsm_apply")})
}

func (r *Report) build() {
	r.Rows = nil
	for _, c := range r.Params.Conc {
		n := r.Params.N[c]
		s := "1. spend (N grants per concurrency, each spent twice by two clients racing)"
		r.perSys(s, fmt.Sprintf("spend c=%d throughput", c), "spends/s", c, func(x *SpendRun) float64 { return x.Spend.PerSec })
		r.perSys(s, fmt.Sprintf("spend c=%d p50", c), "ms", c, func(x *SpendRun) float64 { return x.Spend.P50Ms })
		r.perSys(s, fmt.Sprintf("spend c=%d p99", c), "ms", c, func(x *SpendRun) float64 { return x.Spend.P99Ms })
		r.perSys(s, fmt.Sprintf("spend c=%d successes (must = N = %d)", c, n), "count", c, func(x *SpendRun) float64 { return float64(x.Spend.OK) })
		r.perSys(s, fmt.Sprintf("spend c=%d double spends", c), "count", c, func(x *SpendRun) float64 { return float64(x.DoubleSpends) })
		r.perSys(s, fmt.Sprintf("spend c=%d errors", c), "count", c, func(x *SpendRun) float64 { return float64(x.Spend.Errors) })
		r.perSys(s, fmt.Sprintf("spend c=%d CPU per spend, all processes", c), "us", c, func(x *SpendRun) float64 { return x.SpendCPUus })
	}
	for _, c := range r.Params.Conc {
		if run := r.run("writ", c); run != nil {
			r.stageRows(run)
		}
	}
	for _, c := range r.Params.Conc {
		s := "2. mint (request -> permit; etcd/KV: create-if-absent)"
		r.perSys(s, fmt.Sprintf("mint c=%d throughput", c), "mints/s", c, func(x *SpendRun) float64 { return x.Mint.PerSec })
		r.perSys(s, fmt.Sprintf("mint c=%d p50", c), "ms", c, func(x *SpendRun) float64 { return x.Mint.P50Ms })
		r.perSys(s, fmt.Sprintf("mint c=%d p99", c), "ms", c, func(x *SpendRun) float64 { return x.Mint.P99Ms })
		r.perSys(s, fmt.Sprintf("mint c=%d CPU per mint, all processes", c), "us", c, func(x *SpendRun) float64 { return x.MintCPUus })
		r.perSys(s, fmt.Sprintf("mint c=%d minted (must = N = %d)", c, r.Params.N[c]), "count", c, func(x *SpendRun) float64 { return float64(x.Mint.OK) })
	}
	if cy := r.Cycle; cy != nil {
		s := fmt.Sprintf("3. tool-call cycle, writ only (permit -> attempt -> effect, c=%d, %d cycles)", cy.Cycles.Conc, cy.Cycles.Wanted)
		r.add(Row{Section: s, Metric: "cycles answered", Unit: "cycles/s", Writ: f(cy.Cycles.PerSec)})
		r.add(Row{Section: s, Metric: "cycle p50 (3 round trips)", Unit: "ms", Writ: f(cy.Cycles.P50Ms)})
		r.add(Row{Section: s, Metric: "cycle p99", Unit: "ms", Writ: f(cy.Cycles.P99Ms)})
		r.add(Row{Section: s, Metric: "cycles with every receipt in the R3 stream", Unit: "cycles/s", Writ: f(cy.DurablePerSec)})
		r.add(Row{Section: s, Metric: "stream catch-up after the last answer", Unit: "s", Writ: f(cy.DrainSeconds)})
	}
	if rr := r.Routes; rr != nil {
		s := fmt.Sprintf("3b. heartbeat routes, writ only (%d route leases renewed at %d renewals/s during the spend load, c=%d, N=%d)", rr.Routes, rr.Rate, rr.Conc, rr.Loaded.N)
		quiet := (rr.Before.Spend.PerSec + rr.After.Spend.PerSec) / 2
		r.add(Row{Section: s, Metric: "route leases acquired", Unit: "count", Writ: f(float64(rr.Acquire.OK)), Note: fmt.Sprintf("%.0f acquisitions/s", rr.Acquire.PerSec)})
		r.add(Row{Section: s, Metric: "spend throughput without renewals (mean of before and after)", Unit: "spends/s", Writ: f(quiet),
			Note: fmt.Sprintf("before %.0f, after %.0f", rr.Before.Spend.PerSec, rr.After.Spend.PerSec)})
		r.add(Row{Section: s, Metric: "spend throughput with renewals", Unit: "spends/s", Writ: f(rr.Loaded.Spend.PerSec)})
		r.add(Row{Section: s, Metric: "spend throughput drop (target < 10)", Unit: "%", Writ: f(rr.DropPct)})
		r.add(Row{Section: s, Metric: "spend p99 with renewals", Unit: "ms", Writ: f(rr.Loaded.Spend.P99Ms),
			Note: fmt.Sprintf("without: %.1f (before), %.1f (after)", rr.Before.Spend.P99Ms, rr.After.Spend.P99Ms)})
		r.add(Row{Section: s, Metric: "renewals answered", Unit: "renewals/s", Writ: f(rr.Renewals.PerSec),
			Note: fmt.Sprintf("target %d/s; sent %d, ok %d, refused %d, errors %d, late %d", rr.Rate, rr.Renewals.Sent, rr.Renewals.OK, rr.Renewals.Refused, rr.Renewals.Errors, rr.Renewals.Late)})
		r.add(Row{Section: s, Metric: "renewal p50", Unit: "ms", Writ: f(rr.Renewals.P50Ms)})
		r.add(Row{Section: s, Metric: "renewal p99", Unit: "ms", Writ: f(rr.Renewals.P99Ms)})
	}
	if sr := r.Status; sr != nil {
		s := fmt.Sprintf("3c. status poller, writ only (the leader's status asked %d times/s during the spend load, c=%d, N=%d; %d grants live at the start)", sr.Rate, sr.Conc, sr.Polled.N, sr.Grants)
		quiet := func(get func(*SpendRun) float64) (float64, string) {
			b, a := get(&sr.Before), get(&sr.After)
			return (b + a) / 2, fmt.Sprintf("without a poller: %.3g (before), %.3g (after)", b, a)
		}
		apply := func(x *SpendRun) float64 { return leaderStage(x, "raft/fsm_apply") }
		commit := func(x *SpendRun) float64 { return leaderStage(x, "commit/spend") }
		if len(sr.Polled.Stages) > 0 {
			_, note := quiet(apply)
			r.add(Row{Section: s, Metric: "leader apply per entry, with the poller", Unit: "ms", Writ: f(apply(&sr.Polled)), Note: note})
			_, note = quiet(commit)
			r.add(Row{Section: s, Metric: "leader proposed -> answer committed, with the poller", Unit: "ms", Writ: f(commit(&sr.Polled)), Note: note})
		}
		q, note := quiet(func(x *SpendRun) float64 { return x.Spend.PerSec })
		r.add(Row{Section: s, Metric: "spend throughput with the poller", Unit: "spends/s", Writ: f(sr.Polled.Spend.PerSec),
			Note: fmt.Sprintf("%s; change %+.1f%%", note, (sr.Polled.Spend.PerSec/max(q, 1)-1)*100)})
		_, note = quiet(func(x *SpendRun) float64 { return x.Spend.P99Ms })
		r.add(Row{Section: s, Metric: "spend p99 with the poller", Unit: "ms", Writ: f(sr.Polled.Spend.P99Ms), Note: note})
		r.add(Row{Section: s, Metric: "status answered", Unit: "count", Writ: f(float64(sr.Polls.Sent - sr.Polls.Errors)),
			Note: strings.TrimSpace(fmt.Sprintf("sent %d, errors %d %s", sr.Polls.Sent, sr.Polls.Errors, sr.Polls.FirstErr))})
		r.add(Row{Section: s, Metric: "status p50", Unit: "ms", Writ: f(sr.Polls.P50Ms)})
		r.add(Row{Section: s, Metric: "status p99", Unit: "ms", Writ: f(sr.Polls.P99Ms), Note: fmt.Sprintf("max %.1f", sr.Polls.MaxMs)})
	}
	if p := r.Publication; p != nil {
		s := "4. receipt publication (natsbus.Publisher, R3 stream, sync always)"
		r.add(Row{Section: s, Metric: fmt.Sprintf("publish %d receipts, batches of %d", p.Events, p.Batch), Unit: "events/s", Writ: f(p.PerSec), Note: p.Error})
	}
	for _, c := range r.Params.Conc {
		if run := r.run("writ", c); run != nil && run.DrainSeconds > 0 {
			r.add(Row{Section: "4. receipt publication (natsbus.Publisher, R3 stream, sync always)",
				Metric: fmt.Sprintf("writ stream catch-up after spend c=%d", c), Unit: "s", Writ: f(run.DrainSeconds)})
		}
	}
	if a := r.Audit; a != nil {
		s := fmt.Sprintf("5. auditor over %d receipts (%.0f MB) from fsm.Apply", a.Events, float64(a.Bytes)/1e6)
		r.add(Row{Section: s, Metric: "verify (decode+hash+checks+projection)", Unit: "events/s", Writ: f(a.VerifyPerSec), Note: fmt.Sprintf("digest matches issuer: %v%s", a.DigestMatches, cpuNote(a.VerifyCPUNs))})
		r.add(Row{Section: s, Metric: "verify, checks only (no projection)", Unit: "events/s", Writ: f(a.ChecksPerSec)})
		r.add(Row{Section: s, Metric: "replay (events.DecodeShared + fsm.EvolveRef)", Unit: "events/s", Writ: f(a.ReplayPerSec), Note: fmt.Sprintf("digest matches issuer: %v%s; target 1,000,000, one goroutine", a.ReplayMatches, cpuNote(a.ReplayCPUNs))})
		if a.ReplayCopyPerSec > 0 {
			r.add(Row{Section: s, Metric: "replay, copying the strings (events.DecodeInto + fsm.EvolveRef)", Unit: "events/s", Writ: f(a.ReplayCopyPerSec), Note: cpuNote(a.ReplayCopyCPUNs)})
		}
		if a.PipeWorkers > 0 {
			r.add(Row{Section: s, Metric: "verify, pipelined (audit.Verifier.Pipeline, AddShared)", Unit: "events/s", Writ: f(a.VerifyPipePerSec),
				Note: fmt.Sprintf("digest matches issuer: %v%s; %d decoders + fold", a.VerifyPipeMatches, cpuNote(a.VerifyPipeCPUNs), a.PipeWorkers)})
			r.add(Row{Section: s, Metric: "replay, pipelined (audit.Pipeline.AddShared + fsm.EvolveRef)", Unit: "events/s", Writ: f(a.ReplayPipePerSec),
				Note: fmt.Sprintf("digest matches issuer: %v%s", a.ReplayPipeMatches, cpuNote(a.ReplayPipeCPUNs))})
		}
		r.add(Row{Section: s, Metric: "decode alone (hash verified)", Unit: "events/s", Writ: f(a.DecodePerSec)})
		r.add(Row{Section: s, Metric: "issuer fsm.Apply producing them", Unit: "events/s", Writ: f(a.ApplyPerSec)})
		r.add(Row{Section: s, Metric: "AGATE paper replay (reference, not measured here)", Unit: "events/s", Note: "about 21,000 events/s as reported by the paper"})
	}
	if m := r.Micro; m != nil {
		s := "6. policy evaluation and hooks (Go benchmarks of their owners)"
		for _, x := range m.Results {
			r.add(Row{Section: s, Metric: x.Package + " " + x.Name, Unit: "ns/op", Writ: f(x.NsPerOp), Note: x.Extra})
		}
		for _, n := range m.Notes {
			r.add(Row{Section: s, Metric: "note", Note: n})
		}
	}
	if m := r.Memory; m != nil {
		s := fmt.Sprintf("7. memory, %d live grants in fsm (in-process)", m.Grants)
		r.add(Row{Section: s, Metric: "heap per live grant (target <= 1024)", Unit: "bytes", Writ: f(m.HeapPerGrant)})
		r.add(Row{Section: s, Metric: "heap idle", Unit: "MB", Writ: f(float64(m.Idle.HeapAlloc) / 1e6)})
		r.add(Row{Section: s, Metric: "heap with grants live", Unit: "MB", Writ: f(float64(m.Live.HeapAlloc) / 1e6)})
		r.add(Row{Section: s, Metric: "heap after they expire (target: idle)", Unit: "MB", Writ: f(float64(m.Expired.HeapAlloc) / 1e6),
			Note: fmt.Sprintf("%d grants, %d idempotency records left", m.LiveAfterExpiry, m.IdemAfterExpiry)})
		r.add(Row{Section: s, Metric: "heap after expiry + snapshot/restore", Unit: "MB", Writ: f(float64(m.Compacted.HeapAlloc) / 1e6)})
		r.add(Row{Section: s, Metric: "RSS live / after expiry", Unit: "MB", Writ: f(float64(m.Live.RSS) / 1e6), Note: fmt.Sprintf("after expiry %.1f MB", float64(m.Expired.RSS)/1e6)})
		r.add(Row{Section: s, Metric: "snapshot size", Unit: "MB", Writ: f(float64(m.SnapshotBytes) / 1e6)})
		r.add(Row{Section: s, Metric: "snapshot time", Unit: "s", Writ: f(m.SnapshotSeconds)})
		r.add(Row{Section: s, Metric: "restore time", Unit: "s", Writ: f(m.RestoreSeconds), Note: fmt.Sprintf("digest matches: %v", m.RestoreMatches)})
		r.add(Row{Section: s, Metric: "fsm.Apply of permits", Unit: "permits/s", Writ: f(m.ApplyPerSec)})
	}
	if len(r.WritDisk) > 0 {
		s := "8. writ cluster on disk after this run (real raft nodes)"
		var entries float64
		if r.WritStatus != nil {
			entries = float64(r.WritStatus.CommitIndex)
		}
		for _, d := range r.WritDisk {
			note := ""
			if entries > 0 {
				note = fmt.Sprintf("%.0f bytes per raft index (%0.f indexes)", float64(d.RaftDB+d.RaftWAL)/entries, entries)
			}
			r.add(Row{Section: s, Metric: d.Node + " raft log (wal/ segments + raft.db)", Unit: "MB", Writ: f(float64(d.RaftDB+d.RaftWAL) / 1e6),
				Note: fmt.Sprintf("raft.db %.1f MB; %s", float64(d.RaftDB)/1e6, note)})
			r.add(Row{Section: s, Metric: d.Node + " raft snapshots / JetStream store", Unit: "MB", Writ: f(float64(d.Snapshots) / 1e6),
				Note: fmt.Sprintf("JetStream %.1f MB", float64(d.JetStream)/1e6)})
		}
		for i, rss := range r.WritRSS {
			r.add(Row{Section: s, Metric: fmt.Sprintf("issuer n%d RSS at end", i+1), Unit: "MB", Writ: f(float64(rss) / 1e6)})
		}
		if st := r.WritStatus; st != nil {
			r.add(Row{Section: s, Metric: "grants live on the leader at end", Unit: "count", Writ: f(float64(st.Grants)), Note: fmt.Sprintf("%d receipts, leader %s", st.Seq, st.Node)})
		}
	}
}

func num(v *float64, unit string) string {
	if v == nil {
		return "—"
	}
	x := *v
	switch {
	case unit == "count":
		return fmt.Sprintf("%.0f", x)
	case x == 0:
		return "0"
	case math.Abs(x) >= 1000:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return fmt.Sprintf("%.2f", x)
	}
}

func ratio(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.2fx", *v)
}

// Table renders the rows as a plain-text table grouped by section.
func (r *Report) Table() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "writ vs etcd vs JetStream KV — %s run, %s\n", r.Params.Mode, r.Started)
	fmt.Fprintf(&b, "machine: %s, %d cores, %.0f GB RAM, kernel %s, %s\n", r.Machine.CPU, r.Machine.Cores, r.Machine.MemGB, r.Machine.Kernel, r.Machine.Go)
	fmt.Fprintf(&b, "disk: 4 KiB write+fdatasync p50/p99 %.2f/%.2f ms overwriting, %.2f/%.2f ms appending; load avg %s at start, %s at end\n",
		r.Machine.FsyncP50Ms, r.Machine.FsyncP99Ms, r.Machine.AppendP50Ms, r.Machine.AppendP99Ms, r.Machine.LoadAvg, r.Machine.LoadAvgEnd)
	fmt.Fprintf(&b, "writ: 3 issuer nodes (%s), leader %s; payload %d B; command: %s\n", r.WritMode, r.WritLeader, r.Params.Payload, r.Command)
	cells := [][]string{}
	for _, row := range r.Rows {
		if row.Metric == "note" {
			continue
		}
		cells = append(cells, []string{row.Metric, row.Unit, num(row.Writ, row.Unit), num(row.Etcd, row.Unit), num(row.KV, row.Unit), ratio(row.WritEtcd), ratio(row.WritKV)})
	}
	head := []string{"metric", "unit", "writ", "etcd", "kv", "writ/etcd", "writ/kv"}
	width := make([]int, len(head))
	for _, c := range append(cells, head) {
		for i, x := range c {
			width[i] = max(width[i], len([]rune(x)))
		}
	}
	line := func(c []string, note string) {
		fmt.Fprintf(&b, "  %-*s  %-*s", width[0], c[0], width[1], c[1])
		for i := 2; i < len(c); i++ {
			fmt.Fprintf(&b, "  %*s", width[i]+(len(c[i])-len([]rune(c[i]))), c[i])
		}
		if note != "" {
			fmt.Fprintf(&b, "  %s", note)
		}
		b.WriteString("\n")
	}
	section := ""
	for _, row := range r.Rows {
		if row.Section != section {
			section = row.Section
			fmt.Fprintf(&b, "\n%s\n", section)
			line(head, "")
		}
		if row.Metric == "note" {
			fmt.Fprintf(&b, "  %s\n", row.Note)
			continue
		}
		line([]string{row.Metric, row.Unit, num(row.Writ, row.Unit), num(row.Etcd, row.Unit), num(row.KV, row.Unit), ratio(row.WritEtcd), ratio(row.WritKV)}, row.Note)
	}
	b.WriteString("\n")
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "ERROR: %s\n", e)
	}
	fmt.Fprintf(&b, "total %.0fs\n", r.Seconds)
	return b.String()
}

// Write writes <base>.json, <base>.csv, <base>.txt and <base>.png to dir.
func (r *Report) Write(dir, base string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".txt"), []byte(r.Table()), 0o644); err != nil {
		return err
	}
	var cb bytes.Buffer
	w := csv.NewWriter(&cb)
	_ = w.Write([]string{"section", "metric", "unit", "writ", "etcd", "kv", "writ_over_etcd", "writ_over_kv", "note"})
	cell := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", *v), "0"), ".")
	}
	for _, row := range r.Rows {
		_ = w.Write([]string{row.Section, row.Metric, row.Unit, cell(row.Writ), cell(row.Etcd), cell(row.KV), cell(row.WritEtcd), cell(row.WritKV), row.Note})
	}
	w.Flush()
	if err := os.WriteFile(filepath.Join(dir, base+".csv"), cb.Bytes(), 0o644); err != nil {
		return err
	}
	if len(r.Runs) > 0 {
		if err := r.chart(filepath.Join(dir, base+".png")); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
	}
	return nil
}

// cpuNote words an auditor row's process CPU time per event, if measured.
func cpuNote(ns float64) string {
	if ns <= 0 {
		return ""
	}
	return fmt.Sprintf("; %.0f ns CPU/event", ns)
}
