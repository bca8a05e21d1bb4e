// Package gen drives writ's state machine in-process (fsm.Apply, exactly
// what every raft replica runs on a committed entry) to produce receipt
// streams and live-grant populations for the auditor and memory phases.
package gen

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// PolicyDoc is a version-1 policy: the coordinator lane may call any tool
// for two minutes (the built-in policy's coordinator lane).
const PolicyDoc = `{"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"],"ttl":"2m0s"}},"version":1}`

// T0 is the control-plane time the generated runs start at.
const T0 = int64(1_700_000_000) * int64(time.Second)

// UUIDish returns a 36-byte id shaped like the issuer's grant ids and the
// client's idempotency keys (uuid.NewString), unique per (tag, i).
func UUIDish(tag byte, i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", i, int(tag), 0, 0, i)
}

// PolicyBatch applies PolicyDoc at time at.
func PolicyBatch(at int64) fsm.Batch {
	return fsm.Batch{Time: at, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:bench", Policy: []byte(PolicyDoc)}}}
}

// Request is an OpRequest for grant i by worker w%16 with sources.
func Request(i int) fsm.Command {
	w := "w" + strconv.Itoa(i%16)
	return fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "Bash",
		Digest: events.Sum([]byte("args-" + strconv.Itoa(i))), IdemKey: UUIDish('k', i),
		GrantID: UUIDish('g', i), Sources: []string{"web"}}
}

// Spend and Effect complete grant i's tool call.
func Spend(i int) fsm.Command {
	r := Request(i)
	return fsm.Command{Op: fsm.OpSpend, Caller: r.Caller, GrantID: r.GrantID, Digest: r.Digest, IdemKey: UUIDish('a', i)}
}

func Effect(i int) fsm.Command {
	r := Request(i)
	return fsm.Command{Op: fsm.OpEffect, Caller: r.Caller, GrantID: r.GrantID, Outcome: "confirmed", Verifier: "exit-code"}
}

// Stream applies entries of perEntry full tool calls (request, spend,
// effect: three receipts each) until at least n receipts exist, the clock
// moving step per entry, and returns the encoded receipts in sequence
// order (index i holds seq i+1), the final state, and the time spent in
// fsm.Apply. Published watermarks are committed as a leader would, so the
// outbox stays small.
func Stream(n, perEntry int, step time.Duration) ([][]byte, *fsm.State, time.Duration) {
	s := fsm.New()
	raw := make([][]byte, 0, n+3*perEntry)
	var applyDur time.Duration
	apply := func(idx uint64, b fsm.Batch) {
		t := time.Now()
		fsm.Apply(s, idx, b)
		applyDur += time.Since(t)
		for _, p := range s.Outbox(uint64(len(raw)), 0) {
			raw = append(raw, p.Data)
		}
	}
	// The receipt form today's issuer writes: it raises the level to the
	// highest its build knows before anything else is decided.
	apply(1, fsm.Batch{Time: T0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.MaxReceiptFormat}}})
	apply(2, PolicyBatch(T0))
	g := 0
	for e := 0; len(raw) < n; e++ {
		b := fsm.Batch{Time: T0 + int64(e+1)*int64(step), Node: "n1", Commands: make([]fsm.Command, 0, 3*perEntry+1)}
		b.Commands = append(b.Commands, fsm.Command{Op: fsm.OpPublished, Caller: "issuer:n1", Seq: uint64(len(raw))})
		for range perEntry {
			b.Commands = append(b.Commands, Request(g), Spend(g), Effect(g))
			g++
		}
		apply(uint64(e+3), b)
	}
	return raw, s, applyDur
}

// Contiguous returns raw copied into one buffer, each receipt a slice of
// it, in the same order. An auditor streaming from JetStream holds only the
// receipts in flight; a benchmark holding a whole stream as a million
// separately allocated buffers makes every garbage collection mark them
// all, a cost (100-150 ns per event in the replay rows) no streaming
// auditor pays. Holding them in one buffer leaves the collector one
// object to mark, as a streaming auditor's live heap is its state.
func Contiguous(raw [][]byte) [][]byte {
	total := 0
	for _, b := range raw {
		total += len(b)
	}
	buf := make([]byte, 0, total)
	out := make([][]byte, len(raw))
	for i, b := range raw {
		off := len(buf)
		buf = append(buf, b...)
		out[i] = buf[off:len(buf):len(buf)]
	}
	return out
}

// Mem is one memory reading after two GCs.
type Mem struct {
	HeapAlloc uint64 `json:"heap_alloc_bytes"`
	HeapInuse uint64 `json:"heap_inuse_bytes"`
	RSS       uint64 `json:"rss_bytes"`
}

// ReadMem collects garbage twice, returns freed memory to the OS and reads
// the heap and the resident set.
func ReadMem() Mem {
	runtime.GC()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Mem{HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, RSS: RSS(os.Getpid())}
}

// CPU returns a process's user+system CPU time so far, from /proc (0 if
// unreadable).
func CPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// RSS reads a process's resident set from /proc (0 if unreadable).
func RSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseUint(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
