package worker

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/provenance"
)

// traceArgs traces a call's arguments (canonical JSON) against the
// session registry and returns the field traces of its grant request.
//
// Leaves are the scalars args.Flatten lists, under the same JSON
// pointers, so the issuer reads each trace against the leaf it judges.
// Every string leaf is traced (whole, even past args.MaxString, where
// Flatten keeps only a digest) and every number leaf as its canonical
// text; booleans and nulls are not. A leaf that matched nothing is left
// out: the issuer counts an untraced leaf as model-made, which is what it
// is. When more than api.MaxTraces leaves matched, the traces kept are the
// covered ones first, then the longest values (a long copied value is the
// likelier payload), then document order; the rest count as model-made,
// which can only lower authority.
//
// Each trace carries at most api.MaxTraceMatches matches. The issuer
// takes a leaf's authority as the lowest of its sources, so leaving out a
// match could raise it: when there are more, the lowest-authority matches
// (as the local registry knows them) are kept and the trace is marked not
// covered. Covered means raw matches cover the whole normalized value with
// nothing uncertain: no stop grams, no truncation. A match is Whole when
// its source alone contains the entire raw value (see wholeMatch); the
// issuer then gives the value that source's level.
func traceArgs(reg *provenance.Registry, call json.RawMessage) []api.FieldTrace {
	if reg == nil {
		return nil
	}
	flat, err := args.Flatten(call)
	if err != nil {
		return nil // the issuer refuses such arguments anyway
	}
	var doc any // for values Flatten elided
	type traced struct {
		at     int
		length int
		ft     api.FieldTrace
	}
	var out []traced
	for i, leaf := range flat.Leaves {
		value := leaf.Value
		switch leaf.Kind {
		case args.String, args.Number:
		case args.Elided:
			if doc == nil {
				dec := json.NewDecoder(bytes.NewReader(call))
				dec.UseNumber()
				if dec.Decode(&doc) != nil {
					continue
				}
			}
			s, ok := stringAt(doc, leaf.Path)
			if !ok {
				continue
			}
			value = s
		default:
			continue
		}
		tr := reg.Trace(leaf.Path, value)
		if len(tr.Matches) == 0 {
			continue
		}
		ft := api.FieldTrace{Field: leaf.Path}
		ms := tr.Matches
		truncated := false
		if len(ms) > api.MaxTraceMatches {
			ms = append([]provenance.Match(nil), ms...)
			sort.SliceStable(ms, func(a, b int) bool {
				if ms[a].Authority != ms[b].Authority {
					return ms[a].Authority < ms[b].Authority
				}
				return ms[a].Length > ms[b].Length
			})
			ms = ms[:api.MaxTraceMatches]
			sort.SliceStable(ms, func(a, b int) bool {
				if ms[a].Source != ms[b].Source {
					return ms[a].Source < ms[b].Source
				}
				if ms[a].Transform != ms[b].Transform {
					return ms[a].Transform < ms[b].Transform
				}
				return ms[a].Part < ms[b].Part
			})
			truncated = true
		}
		for _, m := range ms {
			tm := api.TraceMatch{Source: m.Source, Transform: string(m.Transform), Part: m.Part, Whole: wholeMatch(tr, m)}
			if len(m.Fields) > 0 {
				tm.Field, tm.FieldWhole = m.Fields[0].Pointer, m.Fields[0].Whole
			}
			ft.Matches = append(ft.Matches, tm)
		}
		// Further fields the value equals whole (a name that is the
		// sender of one message and the body of another) are further
		// matches of the same source, as room allows: one left out can
		// only lower the level the issuer gives.
		for _, m := range ms {
			for _, f := range m.Fields[min(1, len(m.Fields)):] {
				if len(ft.Matches) >= api.MaxTraceMatches {
					break
				}
				ft.Matches = append(ft.Matches, api.TraceMatch{Source: m.Source, Transform: string(m.Transform), Part: m.Part,
					Whole: wholeMatch(tr, m), Field: f.Pointer, FieldWhole: f.Whole})
			}
		}
		ft.Covered = !truncated && tr.Length > 0 && tr.Covered == tr.Length && tr.StopGrams == 0 && !tr.Truncated
		out = append(out, traced{at: i, length: tr.Length, ft: ft})
	}
	if len(out) > api.MaxTraces {
		sort.SliceStable(out, func(a, b int) bool {
			if out[a].ft.Covered != out[b].ft.Covered {
				return out[a].ft.Covered
			}
			if out[a].length != out[b].length {
				return out[a].length > out[b].length
			}
			return out[a].at < out[b].at
		})
		out = out[:api.MaxTraces]
		sort.SliceStable(out, func(a, b int) bool { return out[a].at < out[b].at })
	}
	if len(out) == 0 {
		return nil
	}
	fts := make([]api.FieldTrace, len(out))
	for i, t := range out {
		fts[i] = t.ft
	}
	return fts
}

// stringAt returns the string at JSON pointer ptr (RFC 6901) in doc.
func stringAt(doc any, ptr string) (string, bool) {
	if ptr == "" {
		s, ok := doc.(string)
		return s, ok
	}
	if !strings.HasPrefix(ptr, "/") {
		return "", false
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return "", false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return "", false
			}
			cur = v[i]
		default:
			return "", false
		}
	}
	s, ok := cur.(string)
	return s, ok
}

// sourceChannels names the channel of each source id the registry knows,
// for refusal texts.
func sourceChannels(reg *provenance.Registry) func(string) (string, bool) {
	if reg == nil {
		return nil
	}
	return func(id string) (string, bool) {
		d, ok := reg.Source(id)
		return string(d.Channel), ok
	}
}

// wholeMatch reports whether the source of m contains the entire raw
// value traced in tr: a raw match of the value itself (not a decoding or
// a URL part) that equals a whole token, occurs whole, or whose longest
// common run is the value's full normalized length.
func wholeMatch(tr provenance.Trace, m provenance.Match) bool {
	if m.Transform != provenance.TransformRaw || m.Part != "" || tr.Truncated || tr.Length == 0 {
		return false
	}
	return m.Mode == provenance.ModeToken || m.Mode == provenance.ModeWhole || m.Length >= tr.Length
}
