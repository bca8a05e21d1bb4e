package fsm

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Sharing of what grants repeat. Every permit names its worker, lane,
// tool, session and sources, the rules that grounded it, and binds the
// revocation counters of its worker, lane and sources: a few distinct
// strings ("w1", "coordinator", "worker/w1") and, until a revocation moves
// a counter, the same few lists, a million times over. A grant keeps a
// shared copy of each instead of its own.
//
// Sharing is invisible: a grant's strings and lists are never modified
// once the grant is recorded (spends, effects and revocations change its
// status, never its bindings; every envelope and event built from a grant
// clones its lists), and the values are the same whichever copy is kept.
// So the tables below may forget entries at any time without changing any
// answer, digest or snapshot; each is reset when it reaches internMax
// entries, which bounds its memory whatever the workload. Strings are
// copied when they enter a table, so a shared string never pins the
// buffer it was decoded from.

// internMax bounds each table.
const internMax = 4096

type interner struct {
	strs     map[string]string           // short repeated strings
	lists    map[string][]string         // string lists, by their encoding
	counters map[string][]events.Counter // counter lists, by their encoding
	scratch  []byte
	// recent is a direct-mapped cache in front of strs: most strings
	// interned are the same few (a node, a lane, a tool, a worker of a
	// few dozen), found here with one comparison instead of a map lookup.
	// It holds only copies strs handed out.
	recent [64]string

	// Restore decodes a grant's lists here before sharing them.
	decoded                      []events.Counter
	decodedSources, decodedRules []string
}

// str returns the shared copy of s.
func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	slot := &in.recent[recentSlot(s)]
	if *slot == s {
		return *slot
	}
	if v, ok := in.strs[s]; ok {
		*slot = v
		return v
	}
	if in.strs == nil || len(in.strs) >= internMax {
		in.strs = make(map[string]string)
	}
	s = strings.Clone(s)
	in.strs[s] = s
	*slot = s
	return s
}

// counterKey returns revocation.Key(scope, id), as the shared copy when
// the table holds it, without allocating. Every key a permit binds enters
// the table when the permit is recorded (counterList), so the keys of a
// worker, lane or source seen before are found. It only reads the
// interner: Decide, which must not modify the state, may call it.
func (in *interner) counterKey(scope, id string) string {
	var buf [64]byte
	b := append(append(append(buf[:0], scope...), '/'), id...)
	if v, ok := in.strs[string(b)]; ok {
		return v
	}
	return string(b)
}

// recentSlot picks s's slot in a 64-slot direct-mapped string cache
// (interner.recent, strCache): FNV-1a of its bytes. The strings cached
// are short, so hashing all of them costs little and keeps "w1", "w10"
// and "w11" apart.
func recentSlot[T string | []byte](s T) int {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return int(h & 63)
}

// strBytes returns the shared copy of the string b holds; a string is
// allocated only when it is not in the table.
func (in *interner) strBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if v, ok := in.strs[string(b)]; ok {
		return v
	}
	if in.strs == nil || len(in.strs) >= internMax {
		in.strs = make(map[string]string)
	}
	s := string(b)
	in.strs[s] = s
	return s
}

// list returns a shared list equal to ss, never ss itself. An empty list
// is returned as slices.Clone returns it.
func (in *interner) list(ss []string) []string {
	if len(ss) == 0 {
		return slices.Clone(ss)
	}
	b := in.scratch[:0]
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	in.scratch = b
	if v, ok := in.lists[string(b)]; ok {
		return v
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = in.str(s)
	}
	if in.lists == nil || len(in.lists) >= internMax {
		in.lists = make(map[string][]string)
	}
	in.lists[string(b)] = out
	return out
}

// counterList returns a shared list equal to cs, never cs itself (the
// caller's slice may be reused: events.DecodeInto recycles its backing
// arrays). An empty list is returned as slices.Clone returns it.
func (in *interner) counterList(cs []events.Counter) []events.Counter {
	if len(cs) == 0 {
		return slices.Clone(cs)
	}
	b := in.scratch[:0]
	for _, c := range cs {
		b = binary.AppendUvarint(b, uint64(len(c.Key)))
		b = append(b, c.Key...)
		b = binary.AppendUvarint(b, c.Value)
	}
	in.scratch = b
	if v, ok := in.counters[string(b)]; ok {
		return v
	}
	out := make([]events.Counter, len(cs))
	for i, c := range cs {
		out[i] = events.Counter{Key: in.str(c.Key), Value: c.Value}
	}
	if in.counters == nil || len(in.counters) >= internMax {
		in.counters = make(map[string][]events.Counter)
	}
	in.counters[string(b)] = out
	return out
}

// share replaces g's repeated strings and lists with shared copies. Ids,
// keys, targets and paths, which are rarely repeated, are left alone.
func (in *interner) share(g *grants.Grant) {
	g.Node, g.Worker, g.Lane, g.Session, g.Tool = in.str(g.Node), in.str(g.Worker), in.str(g.Lane), in.str(g.Session), in.str(g.Tool)
	g.Surface, g.Operation, g.Consequence, g.Instrument = in.str(g.Surface), in.str(g.Operation), in.str(g.Consequence), in.str(g.Instrument)
	g.Outcome, g.Verifier = in.str(g.Outcome), in.str(g.Verifier)
	g.Counters, g.Sources, g.Rules = in.counterList(g.Counters), in.list(g.Sources), in.list(g.Rules)
}
