package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Change is one difference between two policy documents, at a field path
// such as lanes.isolated.ttl or surfaces[id=shell].sinks. Old is empty for
// an addition, New for a removal; both are compact JSON.
type Change struct {
	Field string
	Old   string
	New   string
}

// String renders the change as one line: "+ field: new", "- field: old" or
// "~ field: old -> new".
func (c Change) String() string {
	switch {
	case c.Old == "":
		return "+ " + c.Field + ": " + c.New
	case c.New == "":
		return "- " + c.Field + ": " + c.Old
	}
	return "~ " + c.Field + ": " + c.Old + " -> " + c.New
}

// Diff compares two documents' canonical forms field by field, in a
// deterministic order. Entries of lists whose elements carry an "id" are
// matched by id, so inserting a rule shows as one addition rather than a
// shifted list. A version change shows as a change of every section.
func Diff(a, b *Policy) []Change {
	var va, vb any
	decode := func(p *Policy, v *any) {
		if p == nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(p.Canonical()))
		dec.UseNumber()
		_ = dec.Decode(v) // the canonical form always decodes
	}
	decode(a, &va)
	decode(b, &vb)
	var out []Change
	diffValue(&out, "", va, vb)
	return out
}

// compact is v as compact JSON, written for a person to read: '<', '>'
// and '&' stay as they are rather than becoming \u003c escapes.
func compact(v any) string {
	if v == nil {
		return ""
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // decoded JSON always encodes
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func diffValue(out *[]Change, field string, a, b any) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil || b == nil:
		*out = append(*out, Change{Field: orString(field, "document"), Old: compact(a), New: compact(b)})
		return
	}
	switch ta := a.(type) {
	case map[string]any:
		tb, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range ta {
			keys[k] = true
		}
		for k := range tb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffValue(out, join(field, k), ta[k], tb[k])
		}
		return
	case []any:
		tb, ok := b.([]any)
		if !ok {
			break
		}
		if ida, idb := byID(ta), byID(tb); ida != nil && idb != nil {
			diffByID(out, field, ta, tb, ida, idb)
			return
		}
		if compact(ta) != compact(tb) {
			*out = append(*out, Change{Field: field, Old: compact(ta), New: compact(tb)})
		}
		return
	}
	if ca, cb := compact(a), compact(b); ca != cb {
		*out = append(*out, Change{Field: field, Old: ca, New: cb})
	}
}

// byID returns the ids of a list whose elements are objects with distinct
// string ids, or nil.
func byID(list []any) []string {
	ids := make([]string, 0, len(list))
	seen := map[string]bool{}
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil
		}
		id, ok := m["id"].(string)
		if !ok || seen[id] {
			return nil
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids
}

func diffByID(out *[]Change, field string, a, b []any, ida, idb []string) {
	ib := map[string]int{}
	for i, id := range idb {
		ib[id] = i
	}
	ia := map[string]int{}
	for i, id := range ida {
		ia[id] = i
		f := fmt.Sprintf("%s[id=%s]", field, id)
		if j, ok := ib[id]; ok {
			diffValue(out, f, a[i], b[j])
			if i != j {
				*out = append(*out, Change{Field: f + ".position", Old: fmt.Sprint(i), New: fmt.Sprint(j)})
			}
		} else {
			*out = append(*out, Change{Field: f, Old: compact(a[i])})
		}
	}
	for j, id := range idb {
		if _, ok := ia[id]; !ok {
			*out = append(*out, Change{Field: fmt.Sprintf("%s[id=%s]", field, id), New: compact(b[j])})
		}
	}
}
