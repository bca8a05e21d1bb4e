package provenance

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// Structured results. A tool result that is JSON is registered as one
// source whose leaves are also kept by field (RegisterResult): each string
// and number leaf under its JSON pointer, normalized. Trace then says, for
// a value found in such a source, which field it came from (Match.Fields):
// the fields the whole value equals (Whole), or else the first field that
// contains it. The issuer's policy decides what a field is worth (an
// attested sender, a content body); the registry only reports where the
// value stands. A value equal to a field whole is reported even when its
// JSON escaping kept it from matching the registered text.

// Bounds on the fields kept for structured results.
const (
	// MaxResultLeaves bounds the leaves kept per source.
	MaxResultLeaves = 4096
	// MaxLeafBytes: longer leaves (bodies, documents) are not kept by
	// field; their text is still matched through the windows.
	MaxLeafBytes = 4096
	// maxResultFieldBytes bounds the normalized leaf bytes kept per source.
	maxResultFieldBytes = 256 << 10
	// maxFieldsPerMatch bounds the field refs one match reports.
	maxFieldsPerMatch = 4
	// maxContainScan bounds the leaf bytes one Trace scans to say which
	// field contains a value.
	maxContainScan = 1 << 20
	maxResultDepth = 64
)

// ResultLeaf is one string or number leaf of a structured result, under
// its JSON pointer (RFC 6901).
type ResultLeaf struct {
	Pointer string
	Value   string
}

// FieldRef names the field of a structured result a value was found in.
// Whole: the value equals the field's whole (normalized) content.
type FieldRef struct {
	Pointer string `json:"pointer"`
	Whole   bool   `json:"whole"`
}

// fieldLeaf is a kept leaf: its pointer and normalized value.
type fieldLeaf struct {
	ptr  string
	norm []byte
}

// fieldKey is one leaf by value: its source and index in the source's
// leaves.
type fieldKey struct {
	src *source
	i   int32
}

// ResultLeaves returns the string and number leaves of a JSON tool result
// in document order, at most MaxResultLeaves, each at most MaxLeafBytes
// (longer ones are skipped); ok is false when raw is not a JSON object or
// array. A result in the form of MCP content — an object with
// structuredContent, or content blocks ({"content": [...]} or a bare
// array) holding exactly one text block — is read as the structure it
// carries: structuredContent, or the JSON object or array the text holds.
// Pointers are relative to that structure, which is what a result schema
// names.
func ResultLeaves(raw []byte) ([]ResultLeaf, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil || dec.More() {
		return nil, false
	}
	doc = unwrapMCP(doc)
	switch doc.(type) {
	case map[string]any, []any:
	default:
		return nil, false
	}
	var out []ResultLeaf
	walkLeaves(doc, "", 0, &out)
	return out, true
}

// unwrapMCP returns the structure MCP-shaped content carries, or doc.
func unwrapMCP(doc any) any {
	var blocks []any
	switch v := doc.(type) {
	case map[string]any:
		if sc, ok := v["structuredContent"]; ok {
			switch sc.(type) {
			case map[string]any, []any:
				return sc
			}
		}
		c, ok := v["content"].([]any)
		if !ok {
			return doc
		}
		blocks = c
	case []any:
		blocks = v
	default:
		return doc
	}
	if len(blocks) != 1 {
		return doc
	}
	b, ok := blocks[0].(map[string]any)
	if !ok || b["type"] != "text" {
		return doc
	}
	text, ok := b["text"].(string)
	if !ok {
		return doc
	}
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return doc
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var inner any
	if dec.Decode(&inner) != nil || dec.More() {
		return doc
	}
	return inner
}

func walkLeaves(v any, ptr string, depth int, out *[]ResultLeaf) {
	if len(*out) >= MaxResultLeaves || depth > maxResultDepth {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys) // encoding/json keeps no order; sorted is stable
		for _, k := range keys {
			walkLeaves(t[k], ptr+"/"+escapePointer(k), depth+1, out)
		}
	case []any:
		for i, e := range t {
			walkLeaves(e, ptr+"/"+strconv.Itoa(i), depth+1, out)
		}
	case string:
		if len(t) <= MaxLeafBytes {
			*out = append(*out, ResultLeaf{Pointer: ptr, Value: t})
		}
	case json.Number:
		*out = append(*out, ResultLeaf{Pointer: ptr, Value: string(t)})
	}
}

func escapePointer(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// RegisterResult registers content as Register does and keeps leaves (a
// structured result's fields, see ResultLeaves) by field for the source,
// so that Trace can say which field a value came from. Leaves beyond the
// bounds (MaxResultLeaves, MaxLeafBytes, 256 KB per source) are not kept;
// fields of the oldest structured sources are dropped first when the
// registry's field bytes pass a quarter of MaxBytes. A source registered
// again keeps the leaves it already has.
func (r *Registry) RegisterResult(desc Descriptor, content []byte, leaves []ResultLeaf) error {
	if err := r.Register(desc, content); err != nil {
		return err
	}
	if len(leaves) == 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sources[desc.ID]
	if s == nil || s.leaves != nil {
		return nil
	}
	var kept []fieldLeaf
	n := 0
	for _, l := range leaves {
		if len(kept) >= MaxResultLeaves || len(l.Value) > MaxLeafBytes || l.Pointer == "" || len(l.Pointer) > maxIDLen {
			continue
		}
		norm := Normalize([]byte(l.Value))
		if len(norm) == 0 || n+len(norm) > maxResultFieldBytes {
			continue
		}
		n += len(norm)
		kept = append(kept, fieldLeaf{ptr: l.Pointer, norm: norm})
	}
	r.addLeavesLocked(s, kept)
	return nil
}

// addLeavesLocked gives s its leaves and indexes them by value, then drops
// the fields of the oldest structured sources while over the bound.
func (r *Registry) addLeavesLocked(s *source, kept []fieldLeaf) {
	if len(kept) == 0 {
		return
	}
	s.leaves = kept
	if r.byValue == nil {
		r.byValue = map[string][]fieldKey{}
	}
	for i, l := range kept {
		s.leafBytes += int64(len(l.norm))
		k := string(l.norm)
		r.byValue[k] = append(r.byValue[k], fieldKey{s, int32(i)})
	}
	r.fieldBytes += s.leafBytes
	r.fieldOrder = append(r.fieldOrder, s)
	for r.fieldBytes > r.opt.MaxBytes/4 && len(r.fieldOrder) > 0 {
		r.dropLeavesLocked(r.fieldOrder[0])
	}
}

// dropLeavesLocked forgets the fields of s (its windows stay).
func (r *Registry) dropLeavesLocked(s *source) {
	for _, l := range s.leaves {
		k := string(l.norm)
		ks := slices.DeleteFunc(r.byValue[k], func(fk fieldKey) bool { return fk.src == s })
		if len(ks) == 0 {
			delete(r.byValue, k)
		} else {
			r.byValue[k] = ks
		}
	}
	r.fieldBytes -= s.leafBytes
	s.leaves, s.leafBytes = nil, 0
	if i := slices.Index(r.fieldOrder, s); i >= 0 {
		r.fieldOrder = slices.Delete(r.fieldOrder, i, i+1)
	}
}

// fieldMatchesLocked adds field refs to tr for the raw normalized value v:
// every source with a field equal to v (a whole match of that source,
// added when the windows did not find it, which covers the value), and for
// other raw matches of structured sources the first field containing v.
// It sorts tr.Matches and tr.Sources again when it adds to them.
func (r *Registry) fieldMatchesLocked(tr *Trace, v []byte) bool {
	if len(v) == 0 || len(r.fieldOrder) == 0 {
		return false
	}
	added := false
	for _, fk := range r.byValue[string(v)] {
		s := fk.src
		ref := FieldRef{Pointer: s.leaves[fk.i].ptr, Whole: true}
		i := slices.IndexFunc(tr.Matches, func(m Match) bool {
			return m.Source == s.desc.ID && m.Transform == TransformRaw && m.Part == ""
		})
		if i < 0 {
			tr.Matches = append(tr.Matches, Match{
				Source: s.desc.ID, Channel: s.desc.Channel, Authority: s.desc.Authority,
				Transform: TransformRaw, Mode: ModeWhole, Length: len(v), UnderPressure: s.evicted > 0,
			})
			i = len(tr.Matches) - 1
			added = true
			if !slices.Contains(tr.Sources, s.desc.ID) {
				tr.Sources = append(tr.Sources, s.desc.ID)
			}
		} else if m := &tr.Matches[i]; m.Mode != ModeWhole && m.Mode != ModeToken {
			// The value is the field whole, so this source holds all of it.
			m.Mode, m.Length = ModeWhole, len(v)
		}
		if m := &tr.Matches[i]; len(m.Fields) < maxFieldsPerMatch && !slices.Contains(m.Fields, ref) {
			m.Fields = append(m.Fields, ref)
		}
		tr.Covered = tr.Length
	}
	budget := maxContainScan
	for i := range tr.Matches {
		m := &tr.Matches[i]
		if m.Transform != TransformRaw || m.Part != "" || len(m.Fields) > 0 {
			continue
		}
		s := r.sources[m.Source]
		if s == nil || len(s.leaves) == 0 {
			continue
		}
		for _, l := range s.leaves {
			if budget -= len(l.norm); budget < 0 {
				break
			}
			if len(l.norm) > len(v) && bytes.Contains(l.norm, v) {
				m.Fields = append(m.Fields, FieldRef{Pointer: l.ptr})
				break
			}
		}
	}
	if added {
		slices.Sort(tr.Sources)
		sortMatches(tr.Matches)
	}
	return added
}

// sortMatches orders matches by source, transform and part.
func sortMatches(ms []Match) {
	slices.SortStableFunc(ms, func(a, b Match) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Transform), string(b.Transform)); c != 0 {
			return c
		}
		return strings.Compare(a.Part, b.Part)
	})
}
