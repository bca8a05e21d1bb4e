package gen

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// AuditResult is the auditor phase's measurements.
type AuditResult struct {
	Events           int     `json:"events"`
	Bytes            int64   `json:"bytes"`
	ApplyPerSec      float64 `json:"apply_events_per_sec"`          // fsm.Apply producing them (Decide+Seal+Evolve)
	VerifyPerSec     float64 `json:"verify_events_per_sec"`         // audit.Verifier.Add: decode+hash+checks+projection
	ChecksPerSec     float64 `json:"checks_events_per_sec"`         // audit.Verifier.Add with NoProjection
	ReplayPerSec     float64 `json:"replay_events_per_sec"`         // events.DecodeShared + fsm.EvolveRef into a fresh state, one goroutine
	ReplayCopyPerSec float64 `json:"replay_copying_events_per_sec"` // the same with events.DecodeInto (a copy of each event's strings)
	DecodePerSec     float64 `json:"decode_events_per_sec"`         // events.DecodeInto alone (hash check included)
	Tracked          int     `json:"tracked_at_end"`                // grants the verifier still tracked
	DigestMatches    bool    `json:"digest_matches"`                // verifier projection == issuer state digest
	ReplayMatches    bool    `json:"replay_matches"`                // replay digest == issuer state digest
	VerifySeconds    float64 `json:"verify_seconds"`
	ReplaySeconds    float64 `json:"replay_seconds"`
	GenerateSeconds  float64 `json:"generate_seconds"`

	// The verify and replay rows through audit.Pipeline: decoding and the
	// hash check on PipeWorkers (GOMAXPROCS) goroutines, the checks and
	// the fold in order on one more.
	VerifyPipePerSec  float64 `json:"verify_pipelined_events_per_sec"`
	ReplayPipePerSec  float64 `json:"replay_pipelined_events_per_sec"`
	VerifyPipeMatches bool    `json:"verify_pipelined_matches"` // digest == issuer's, every event folded
	ReplayPipeMatches bool    `json:"replay_pipelined_matches"`
	PipeWorkers       int     `json:"pipeline_workers"`

	// Process CPU time (user+system, all threads, GC included) per event
	// of the four rows above, in ns: less sensitive to other load than
	// events/s, and what a pipelined row pays for its speed.
	VerifyCPUNs     float64 `json:"verify_cpu_ns_per_event"`
	ReplayCPUNs     float64 `json:"replay_cpu_ns_per_event"`
	ReplayCopyCPUNs float64 `json:"replay_copying_cpu_ns_per_event"`
	VerifyPipeCPUNs float64 `json:"verify_pipelined_cpu_ns_per_event"`
	ReplayPipeCPUNs float64 `json:"replay_pipelined_cpu_ns_per_event"`
}

// cpuPerEvent is the process CPU time since c0 per event, in ns.
func cpuPerEvent(c0 time.Duration, n int) float64 {
	return float64(CPU(os.Getpid())-c0) / float64(n)
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }

func profile(dir, name string, f func()) {
	if dir == "" {
		f()
		return
	}
	pf, err := os.Create(dir + "/" + name + ".cpu.pprof")
	if err == nil && pprof.StartCPUProfile(pf) == nil {
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	f()
}

// Audit generates at least n receipts with fsm.Apply (64 tool calls per
// entry, one entry per control-plane second: about 27k grants live at a
// time, as in audit's BenchmarkVerify) and measures the auditor over them.
func Audit(n int, profDir string) (AuditResult, error) {
	t := time.Now()
	raw, st, applyDur := Stream(n, 64, time.Second)
	raw = Contiguous(raw) // the stream in one buffer, as a streaming auditor's heap holds none of it
	r := AuditResult{Events: len(raw), GenerateSeconds: time.Since(t).Seconds(), ApplyPerSec: rate(len(raw), applyDur)}
	for _, b := range raw {
		r.Bytes += int64(len(b))
	}
	want := st.Digest()
	st = nil
	ReadMem()

	var v *audit.Verifier
	var err error
	profile(profDir, "audit-verify", func() {
		v = audit.NewVerifier(audit.Options{})
		t = time.Now()
		c0 := CPU(os.Getpid())
		for i, b := range raw {
			if err = v.Add(b, uint64(i+1)); err != nil {
				return
			}
		}
		d := time.Since(t)
		r.VerifySeconds, r.VerifyPerSec = d.Seconds(), rate(len(raw), d)
		r.VerifyCPUNs = cpuPerEvent(c0, len(raw))
	})
	if err != nil {
		return r, fmt.Errorf("verifier: %w", err)
	}
	r.Tracked = v.Tracked()
	r.DigestMatches = v.Digest() == want
	v = nil
	ReadMem()

	v = audit.NewVerifier(audit.Options{NoProjection: true})
	t = time.Now()
	for i, b := range raw {
		if err := v.Add(b, uint64(i+1)); err != nil {
			return r, fmt.Errorf("verifier (checks only): %w", err)
		}
	}
	r.ChecksPerSec = rate(len(raw), time.Since(t))
	v = nil
	ReadMem()

	var s *fsm.State
	// replay folds the stream on this goroutine into a fresh state: one
	// caller-owned event, decoded into (decode: DecodeShared or DecodeInto)
	// and folded by reference, so no copy of the event and no list is
	// allocated per receipt.
	replay := func(decode func([]byte, *events.Event) error) (time.Duration, float64) {
		s = fsm.New()
		t := time.Now()
		c0 := CPU(os.Getpid())
		var e events.Event
		for _, b := range raw {
			if err = decode(b, &e); err != nil {
				break
			}
			if err = fsm.EvolveRef(s, &e); err != nil {
				break
			}
		}
		return time.Since(t), cpuPerEvent(c0, len(raw))
	}
	profile(profDir, "audit-replay", func() {
		// The stream's buffer is never written again: handed over.
		var d time.Duration
		d, r.ReplayCPUNs = replay(events.DecodeShared)
		r.ReplaySeconds, r.ReplayPerSec = d.Seconds(), rate(len(raw), d)
	})
	if err != nil {
		return r, fmt.Errorf("replay: %w", err)
	}
	r.ReplayMatches = s.Digest() == want
	s = nil
	ReadMem()
	d, cpu := replay(events.DecodeInto)
	if err != nil {
		return r, fmt.Errorf("replay (copying): %w", err)
	}
	if s.Digest() != want {
		return r, fmt.Errorf("replay (copying): digest differs from the issuer's")
	}
	r.ReplayCopyPerSec, r.ReplayCopyCPUNs = rate(len(raw), d), cpu
	s = nil
	ReadMem()

	r.PipeWorkers = runtime.GOMAXPROCS(0)
	profile(profDir, "audit-verify-pipelined", func() {
		v = audit.NewVerifier(audit.Options{})
		t = time.Now()
		c0 := CPU(os.Getpid())
		p := v.Pipeline(0)
		for i, b := range raw {
			if err = p.AddShared(b, uint64(i+1)); err != nil {
				break
			}
		}
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		r.VerifyPipePerSec = rate(len(raw), time.Since(t))
		r.VerifyPipeCPUNs = cpuPerEvent(c0, len(raw))
	})
	if err != nil {
		return r, fmt.Errorf("verifier (pipelined): %w", err)
	}
	r.VerifyPipeMatches = v.Digest() == want && v.Events() == uint64(len(raw))
	v = nil
	ReadMem()

	profile(profDir, "audit-replay-pipelined", func() {
		s = fsm.New()
		t = time.Now()
		c0 := CPU(os.Getpid())
		p := audit.NewPipeline(0, func(d *audit.Decoded) error {
			if d.Err != nil {
				return d.Err
			}
			return fsm.EvolveRef(s, d.Event)
		})
		for _, b := range raw {
			if err = p.AddShared(b, 0); err != nil {
				break
			}
		}
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		r.ReplayPipePerSec = rate(len(raw), time.Since(t))
		r.ReplayPipeCPUNs = cpuPerEvent(c0, len(raw))
	})
	if err != nil {
		return r, fmt.Errorf("replay (pipelined): %w", err)
	}
	r.ReplayPipeMatches = s.Digest() == want && s.Chain().Seq == uint64(len(raw))
	s = nil
	ReadMem()

	t = time.Now()
	var e events.Event
	for _, b := range raw {
		if err := events.DecodeInto(b, &e); err != nil {
			return r, err
		}
	}
	r.DecodePerSec = rate(len(raw), time.Since(t))
	return r, nil
}

// MemoryResult is the memory phase's measurements.
type MemoryResult struct {
	Grants            int     `json:"grants"`
	Idle              Mem     `json:"idle"`
	Live              Mem     `json:"live"`
	Expired           Mem     `json:"after_expiry"`
	Compacted         Mem     `json:"after_expiry_snapshot_restore"`
	HeapPerGrant      float64 `json:"heap_bytes_per_live_grant"`
	ApplyPerSec       float64 `json:"apply_permits_per_sec"`
	SnapshotBytes     int     `json:"snapshot_bytes"`
	SnapshotSeconds   float64 `json:"snapshot_seconds"`
	RestoreSeconds    float64 `json:"restore_seconds"`
	RestoreMatches    bool    `json:"restore_digest_matches"`
	LiveAfterExpiry   int     `json:"grants_after_expiry"`
	IdemAfterExpiry   int     `json:"idem_records_after_expiry"`
	ExpiredSnapBytes  int     `json:"snapshot_bytes_after_expiry"`
	GrantsInLiveState int     `json:"grants_in_state"`
}

// Memory applies n permits (entries of 256 requests, all at one
// control-plane instant, each with its own idempotency record, the
// publication watermark confirmed every entry as a leader does) and
// measures the heap with them live, snapshot and restore, and the heap
// once the clock has moved past their expiry and retention.
func Memory(n int, profDir string) (MemoryResult, error) {
	r := MemoryResult{Grants: n}
	s := fsm.New()
	fsm.Apply(s, 1, PolicyBatch(T0))
	r.Idle = ReadMem()
	idx := uint64(2)
	var applyDur time.Duration
	const per = 256
	for i := 0; i < n; i += per {
		b := fsm.Batch{Time: T0 + int64(time.Second), Node: "n1", Commands: make([]fsm.Command, 0, per+1)}
		for j := i; j < min(i+per, n); j++ {
			b.Commands = append(b.Commands, Request(j))
		}
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "issuer:n1", Seq: ^uint64(0)})
		t := time.Now()
		fsm.Apply(s, idx, b)
		applyDur += time.Since(t)
		idx++
	}
	r.ApplyPerSec = rate(n, applyDur)
	st := s.Stats()
	r.GrantsInLiveState = st.Grants
	if st.Grants != n || st.Outbox != 0 {
		return r, fmt.Errorf("memory: state holds %d grants (want %d), outbox %d", st.Grants, n, st.Outbox)
	}
	r.Live = ReadMem()
	r.HeapPerGrant = float64(int64(r.Live.HeapAlloc)-int64(r.Idle.HeapAlloc)) / float64(n)
	if profDir != "" {
		if f, err := os.Create(profDir + "/memory-live.heap.pprof"); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}

	var snap []byte
	profile(profDir, "memory-snapshot", func() {
		t := time.Now()
		snap = s.Snapshot()
		r.SnapshotSeconds = time.Since(t).Seconds()
	})
	r.SnapshotBytes = len(snap)
	var s2 *fsm.State
	var err error
	profile(profDir, "memory-restore", func() {
		t := time.Now()
		s2, err = fsm.Restore(snap)
		r.RestoreSeconds = time.Since(t).Seconds()
	})
	if err != nil {
		return r, fmt.Errorf("restore: %w", err)
	}
	r.RestoreMatches = s2.Digest() == s.Digest()
	s2, snap = nil, nil
	_ = s2

	// One more permit, past every grant's expiry plus retention: the clock
	// moves and the state forgets them.
	late := T0 + int64(time.Second) + int64(2*time.Minute) + fsm.RetainMargin + int64(time.Second)
	fsm.Apply(s, idx, fsm.Batch{Time: late, Node: "n1", Commands: []fsm.Command{
		Request(n), {Op: fsm.OpPublished, Caller: "issuer:n1", Seq: ^uint64(0)}}})
	st = s.Stats()
	r.LiveAfterExpiry, r.IdemAfterExpiry = st.Grants, st.Idem
	r.Expired = ReadMem()

	snap = s.Snapshot()
	r.ExpiredSnapBytes = len(snap)
	s = nil
	s, err = fsm.Restore(snap)
	if err != nil {
		return r, err
	}
	snap = nil
	r.Compacted = ReadMem()
	runtimeKeepAlive(s)
	return r, nil
}

//go:noinline
func runtimeKeepAlive(*fsm.State) {}
