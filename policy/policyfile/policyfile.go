// Package policyfile reads policy documents as operators write them: YAML
// (YAML 1.1, as go.yaml.in/yaml/v2 reads it) or JSON. YAML is converted to
// JSON here and then parsed by policy.Parse, strictly, so both forms obey
// one schema and one set of error messages. It lives apart from package
// policy so that the state machine's import closure holds no YAML parser:
// the log and the receipts only ever carry the canonical JSON form.
package policyfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	yaml "go.yaml.in/yaml/v2"

	"github.com/writ-dev/writ/policy"
)

// ErrYAML wraps every error converting YAML (it also wraps
// policy.ErrInvalid, so callers can treat it as a validation error).
var ErrYAML = errors.New("policyfile: bad YAML")

// yamlError is a document that does not convert: it wraps both
// policy.ErrInvalid and ErrYAML, and reads "policy: invalid: " and the
// problem once, without a prefix per wrapped error.
type yamlError string

func (e yamlError) Error() string { return policy.ErrInvalid.Error() + ": " + string(e) }

func (e yamlError) Is(target error) bool { return target == policy.ErrInvalid || target == ErrYAML }

// maxDepth bounds nesting in a YAML document.
const maxDepth = 32

// ToJSON returns the document as JSON: a document whose first non-blank
// byte is '{' is JSON already and is returned as is; anything else is read
// as YAML. The conversion is strict and deterministic: duplicate keys,
// keys that are not strings (write `"1":`, not `1:`), non-finite numbers
// and documents over policy.MaxDocumentBytes are refused, with the path of
// the offending value.
func ToJSON(raw []byte) ([]byte, error) {
	if len(raw) > policy.MaxDocumentBytes {
		return nil, yamlError(fmt.Sprintf("document is %d bytes, limit %d", len(raw), policy.MaxDocumentBytes))
	}
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return raw, nil
	}
	var doc any
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
		// yaml's own messages start "yaml: line N: ...".
		return nil, yamlError(err.Error())
	}
	v, err := jsonable(doc, "", 0)
	if err != nil {
		return nil, yamlError("yaml: " + err.Error())
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, yamlError("yaml: " + err.Error())
	}
	return out, nil
}

// Parse reads a YAML or JSON document and parses it with policy.Parse.
func Parse(raw []byte) (*policy.Policy, error) {
	j, err := ToJSON(raw)
	if err != nil {
		return nil, err
	}
	return policy.Parse(j)
}

// jsonable converts a decoded YAML value into one encoding/json writes
// faithfully. field is the value's path, for errors.
func jsonable(v any, field string, depth int) (any, error) {
	name := field
	if name == "" {
		name = "document"
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d", name, maxDepth)
	}
	switch t := v.(type) {
	case map[any]any:
		// Keys in a fixed order, so that the error reported for a document
		// with several faults does not depend on map iteration order.
		keys := make([]string, 0, len(t))
		var bad []string
		for k := range t {
			if ks, ok := k.(string); ok {
				keys = append(keys, ks)
			} else {
				bad = append(bad, fmt.Sprintf("key %v is a %T, not a string (quote it)", k, k))
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			return nil, fmt.Errorf("%s: %s", name, bad[0])
		}
		sort.Strings(keys)
		out := make(map[string]any, len(t))
		for _, ks := range keys {
			child := ks
			if field != "" {
				child = field + "." + ks
			}
			c, err := jsonable(t[ks], child, depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			c, err := jsonable(val, field+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, fmt.Errorf("%s: %v is not a JSON number", name, t)
		}
		return t, nil
	case nil, string, bool, int, int64, uint64:
		return t, nil
	}
	return nil, fmt.Errorf("%s: a %T cannot be written as JSON (quote the value)", name, v)
}

// ToYAML writes a JSON policy document (normally a canonical form) as
// YAML that Parse reads back to the same canonical form: object keys keep
// their order, numbers stay numbers, and strings YAML 1.1 would read as
// something else ("yes", "1.0", "null") are quoted.
func ToYAML(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	v, err := yamlValue(dec)
	if err != nil {
		return nil, fmt.Errorf("policyfile: writing YAML: %w", err)
	}
	return yaml.Marshal(v)
}

// yamlValue reads the next JSON value from dec as a value yaml.Marshal
// writes faithfully: objects as ordered yaml.MapSlice, numbers as int64,
// uint64 or float64.
func yamlValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := yaml.MapSlice{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := yamlValue(dec)
				if err != nil {
					return nil, err
				}
				m = append(m, yaml.MapItem{Key: k, Value: v})
			}
			_, err := dec.Token() // '}'
			return m, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := yamlValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token() // ']'
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return u, nil
		}
		return t.Float64()
	}
	return tok, nil
}
