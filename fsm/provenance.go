package fsm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Grant requests with field traces.

// provenance is what the registry says about a request's traces: the
// field origins the policy engine judges, the matched source ids and the
// recorded counters a permit binds.
type provenance struct {
	fields   []policy.FieldOrigin
	ids      []string
	counters map[string]uint64
}

// provRefusal is a request refused for its provenance.
type provRefusal struct {
	reason          grants.Reason
	missing, detail string
	grounds         []string
	source          string // the source at fault
}

// maxResultPointer bounds a trace match's result field pointer.
const maxResultPointer = 1024

func hasControlByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// checkTraces validates a request's traces; it returns the field at fault
// and why, or "".
func checkTraces(traces []Trace) (field, detail string) {
	if len(traces) > MaxTraces {
		return "provenance", fmt.Sprintf("at most %d field traces", MaxTraces)
	}
	seen := make(map[string]bool, len(traces))
	for _, t := range traces {
		switch {
		case t.Field == "":
			return "provenance", "a field trace names no field"
		case seen[t.Field]:
			return "provenance", "field " + t.Field + " is traced twice"
		case len(t.Matches) > MaxTraceMatches:
			return "provenance", fmt.Sprintf("field %s: at most %d matches", t.Field, MaxTraceMatches)
		}
		seen[t.Field] = true
		for _, m := range t.Matches {
			switch {
			case !api.IsValidID(m.Source):
				return "provenance", fmt.Sprintf("field %s: source %q must be 1-64 of [A-Za-z0-9_-]", t.Field, m.Source)
			case !traceTransforms[m.Transform]:
				return "provenance", fmt.Sprintf("field %s: unknown transform %q", t.Field, m.Transform)
			case !traceParts[m.Part]:
				return "provenance", fmt.Sprintf("field %s: unknown part %q", t.Field, m.Part)
			case m.Field != "" && (len(m.Field) > maxResultPointer || !strings.HasPrefix(m.Field, "/") || hasControlByte(m.Field)):
				return "provenance", fmt.Sprintf("field %s: result field %q must be a JSON pointer of at most %d bytes", t.Field, m.Field, maxResultPointer)
			case m.FieldWhole && m.Field == "":
				return "provenance", fmt.Sprintf("field %s: field_whole names no result field", t.Field)
			}
		}
	}
	return "", ""
}

// groundLine is one Grounds line for a field's source.
func groundLine(field string, f policy.SourceFact, counter events.Counter) string {
	return "field=" + field + " source=" + f.ID + " authority=" + f.Authority.String() +
		" counter=" + counter.Key + "=" + strconv.FormatUint(counter.Value, 10) + " transform=" + f.Transform
}

// traceProvenance looks every traced source up at control-plane time now.
// Fields are taken in order of their pointer and matches in the order the
// worker gave; a source matched twice in one field keeps its first match.
// A registered source one of whose recorded counters moved refuses the
// request (source_revoked). An unknown or expired id is evidence and binds
// its own counter; another worker's source is evidence too (it grounds
// nothing for this caller) but its recorded counters are still checked
// and bound.
func (s *State) traceProvenance(caller string, traces []Trace, now int64) (provenance, *provRefusal) {
	var p provenance
	if len(traces) == 0 {
		return p, nil
	}
	p.counters = map[string]uint64{}
	order := make([]int, len(traces))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case traces[a].Field < traces[b].Field:
			return -1
		case traces[a].Field > traces[b].Field:
			return 1
		}
		return 0
	})
	ids := map[string]bool{}
	// Result fields are read from receipt format 10 on (format.go).
	fields := s.JudgesResultFields()
	for _, i := range order {
		t := &traces[i]
		fo := policy.FieldOrigin{Field: t.Field, Covered: t.Covered}
		seen := map[string]int{} // source id -> index in fo.Sources
		for _, m := range t.Matches {
			// Whole counts only for the raw value itself, never a decoding
			// or a URL part of it.
			whole := m.Whole && m.Transform == "raw" && m.Part == ""
			if i, ok := seen[m.Source]; ok {
				// A later whole match of the same source is the one the
				// grounds should name.
				if f := &fo.Sources[i]; whole && !f.Whole {
					f.Whole, f.Transform, f.Part = true, m.Transform, m.Part
				}
				if fields {
					fo.Sources[i].Fields = addResultRef(fo.Sources[i].Fields, m, whole)
				}
				continue
			}
			key := s.intern.counterKey(revocation.ScopeSource, m.Source)
			f := policy.SourceFact{ID: m.Source, Authority: authority.Evidence, Transform: m.Transform, Part: m.Part,
				Whole: whole, Counter: events.Counter{Key: key, Value: s.counters.Get(key)}}
			if r, ok := s.liveSource(m.Source, now); ok {
				if k, dead := s.moved(r.Counters); dead {
					f.Authority = r.Authority
					return p, &provRefusal{
						reason:  grants.ReasonSourceRevoked,
						missing: "field " + t.Field + " traced to a live source",
						detail: fmt.Sprintf("field %s traces to source %s, which is revoked (%s moved from %d to %d)",
							t.Field, m.Source, k.Key, k.Value, s.counters.Get(k.Key)),
						grounds: []string{groundLine(t.Field, f, k)},
						source:  m.Source,
					}
				}
				if r.Owner == caller {
					f.Registered, f.Authority = true, r.Authority
					f.Channel, f.Path, f.Tool = r.Channel, r.Path, r.Tool
				}
				for _, rc := range r.Counters {
					lowest(p.counters, rc.Key, rc.Value)
				}
			} else {
				lowest(p.counters, key, f.Counter.Value)
			}
			if fields {
				f.Fields = addResultRef(nil, m, whole)
			}
			seen[m.Source] = len(fo.Sources)
			fo.Sources = append(fo.Sources, f)
			ids[m.Source] = true
		}
		slices.SortFunc(fo.Sources, func(a, b policy.SourceFact) int {
			switch {
			case a.ID < b.ID:
				return -1
			case a.ID > b.ID:
				return 1
			}
			return 0
		})
		p.fields = append(p.fields, fo)
	}
	p.ids = sortedKeys(ids)
	return p, nil
}

// addResultRef adds the result field a match names to refs: whole only
// when the match is a whole raw match of the value and the value equals
// the field whole. A field named twice keeps its whole form.
func addResultRef(refs []policy.ResultRef, m TraceMatch, whole bool) []policy.ResultRef {
	if m.Field == "" {
		return refs
	}
	r := policy.ResultRef{Pointer: m.Field, Whole: whole && m.FieldWhole}
	for i := range refs {
		if refs[i].Pointer == r.Pointer {
			refs[i].Whole = refs[i].Whole || r.Whole
			return refs
		}
	}
	return append(refs, r)
}

// withSources is the request's named sources followed by the traced ones
// it did not name, in order.
func withSources(named, traced []string) []string {
	if len(traced) == 0 {
		return named
	}
	out := slices.Clone(named)
	for _, id := range traced {
		if !slices.Contains(named, id) {
			out = append(out, id)
		}
	}
	return out
}

// bindCounters binds the current values of keys and the recorded counters
// of the traced sources (the lowest value per key), sorted by key, each
// key once. It sorts keys in place (the caller's scratch).
func (s *State) bindCounters(keys []string, recorded map[string]uint64) []events.Counter {
	slices.Sort(keys)
	keys = slices.Compact(keys)
	bound := make([]events.Counter, len(keys), len(keys)+len(recorded))
	for i, k := range keys {
		bound[i] = events.Counter{Key: k, Value: s.counters.Get(k)}
	}
	if len(recorded) == 0 {
		return bound
	}
	for k, v := range recorded {
		if i, ok := slices.BinarySearchFunc(bound[:len(keys)], k, counterKeyCmp); ok {
			bound[i].Value = min(bound[i].Value, v)
			continue
		}
		bound = append(bound, events.Counter{Key: k, Value: v})
	}
	// recorded was walked in map order: sorting makes the result a
	// function of its contents alone.
	slices.SortFunc(bound, func(a, b events.Counter) int { return strings.Compare(a.Key, b.Key) })
	return bound
}

// counterKeyCmp orders a counter against a key, for binary search.
func counterKeyCmp(c events.Counter, key string) int { return strings.Compare(c.Key, key) }

func validTraces(traces []Trace) bool {
	field, _ := checkTraces(traces)
	return field == ""
}

// CheckTraces validates a request's field traces as the state machine
// will (ids, transforms, parts, bounds, one trace per field).
func CheckTraces(traces []Trace) (field, detail string) { return checkTraces(traces) }
