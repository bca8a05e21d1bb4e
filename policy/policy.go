// Package policy parses, validates and evaluates writ's policy document, the
// operator's trust root: which lanes exist, which tools each lane may call
// and for how long a grant lives.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/lanes"
)

// SchemaVersion is the policy document version this build reads.
const SchemaVersion = 1

// Limits on a policy document.
const (
	MaxDocumentBytes = 1 << 20
	MaxTTL           = time.Hour
	MinTTL           = time.Second
)

// Errors. Validation errors wrap ErrInvalid and name the field.
var (
	// ErrInvalid: the document does not validate; the message names the field.
	ErrInvalid = errors.New("policy: invalid")
	// ErrVersion: the document's version is not SchemaVersion (such an
	// error wraps ErrInvalid too).
	ErrVersion = errors.New("policy: unsupported version")
)

// Duration is a time.Duration written as a Go duration string ("90s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"60s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Lane is one lane's allowance.
type Lane struct {
	Tools []string `json:"tools"`          // exact names or globs; "*" allows all
	Deny  []string `json:"deny,omitempty"` // explicit denials beat Tools
	TTL   Duration `json:"ttl,omitempty"`  // grant lifetime; DefaultTTL when zero
}

// Policy is a parsed, validated policy document.
type Policy struct {
	Version    int               `json:"version"`
	DefaultTTL Duration          `json:"default_ttl"`
	Lanes      map[string]Lane   `json:"lanes"`
	Workers    map[string]string `json:"workers,omitempty"` // worker -> lane, when pinned
}

// Default returns the policy a fresh issuer starts with: coordinators may
// call any tool, isolated workers only read, specialists read, write and run
// commands inside their workspace.
func Default() *Policy {
	return &Policy{
		Version:    SchemaVersion,
		DefaultTTL: Duration(time.Minute),
		Lanes: map[string]Lane{
			lanes.Coordinator: {Tools: []string{"*"}, TTL: Duration(2 * time.Minute)},
			lanes.Isolated:    {Tools: []string{"Read", "Grep", "Glob", "WebFetch", "WebSearch"}, TTL: Duration(30 * time.Second)},
			lanes.Specialist:  {Tools: []string{"Read", "Grep", "Glob", "Write", "Edit", "Bash"}, Deny: []string{"mcp__*"}},
		},
	}
}

// Parse decodes and validates a JSON policy document. The document is read
// strictly, because it is the trust root and other tools will read it too:
// field names must match exactly (encoding/json alone would accept
// "Version" or "TTL"), unknown fields, duplicate keys, wrongly typed values
// and trailing data are rejected, and every error names the field.
func Parse(raw []byte) (*Policy, error) {
	if len(raw) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: document is %d bytes, limit %d", ErrInvalid, len(raw), MaxDocumentBytes)
	}
	if err := checkShape(raw); err != nil {
		return nil, err
	}
	var p Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		// checkShape admits only documents that unmarshal.
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the document; errors wrap ErrInvalid and name the
// offending field (for example lanes.isolated.ttl or workers.w1).
func (p *Policy) Validate() error {
	if p.Version != SchemaVersion {
		return fmt.Errorf("%w: %w: version: got %d, this build reads %d", ErrInvalid, ErrVersion, p.Version, SchemaVersion)
	}
	if err := checkTTL("default_ttl", p.DefaultTTL, false); err != nil {
		return err
	}
	if len(p.Lanes) == 0 {
		return fmt.Errorf("%w: lanes: at least one lane is required", ErrInvalid)
	}
	for _, name := range sortedKeys(p.Lanes) {
		l := p.Lanes[name]
		if err := revocationSafeID(name); err != nil {
			return fmt.Errorf("%w: lanes.%s: %v", ErrInvalid, name, err)
		}
		if err := checkTTL("lanes."+name+".ttl", l.TTL, true); err != nil {
			return err
		}
		for _, list := range []struct {
			field    string
			patterns []string
		}{{"tools", l.Tools}, {"deny", l.Deny}} {
			for i, t := range list.patterns {
				field := fmt.Sprintf("lanes.%s.%s[%d]", name, list.field, i)
				if t == "" {
					return fmt.Errorf("%w: %s: tool pattern is empty", ErrInvalid, field)
				}
				if err := lanes.ValidPattern(t); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
				}
			}
		}
	}
	for _, w := range sortedKeys(p.Workers) {
		l := p.Workers[w]
		if err := revocationSafeID(w); err != nil {
			return fmt.Errorf("%w: workers.%s: %v", ErrInvalid, w, err)
		}
		if _, ok := p.Lanes[l]; !ok {
			return fmt.Errorf("%w: workers.%s: lane %q is not declared in lanes", ErrInvalid, w, l)
		}
	}
	return nil
}

// shape describes what a JSON value in a policy document must look like.
type shape struct {
	kind   shapeKind
	fields map[string]*shape // kindStruct: the exact field names
	elem   *shape            // kindMap, kindList: the element shape
}

type shapeKind uint8

const (
	kindStruct shapeKind = iota
	kindMap
	kindList
	kindString
	kindInt
	kindDuration
)

var (
	laneShape = &shape{kind: kindStruct, fields: map[string]*shape{
		"tools": {kind: kindList, elem: &shape{kind: kindString}},
		"deny":  {kind: kindList, elem: &shape{kind: kindString}},
		"ttl":   {kind: kindDuration},
	}}
	documentShape = &shape{kind: kindStruct, fields: map[string]*shape{
		"version":     {kind: kindInt},
		"default_ttl": {kind: kindDuration},
		"lanes":       {kind: kindMap, elem: laneShape},
		"workers":     {kind: kindMap, elem: &shape{kind: kindString}},
	}}
)

// checkShape walks the document's tokens and checks it against
// documentShape, so that json.Unmarshal afterwards cannot fail or guess.
// Lists and maps may be null (Canonical writes a lane without tools as
// "tools":null); scalars may not.
func checkShape(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := walkShape(dec, documentShape, ""); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the document", ErrInvalid)
	}
	return nil
}

func walkShape(dec *json.Decoder, sh *shape, field string) error {
	name := field
	if name == "" {
		name = "document"
	}
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
	}
	bad := func(want string) error {
		return fmt.Errorf("%w: %s: want %s, got %s", ErrInvalid, name, want, describe(tok))
	}
	switch sh.kind {
	case kindString:
		if _, ok := tok.(string); !ok {
			return bad("a string")
		}
	case kindInt:
		n, ok := tok.(json.Number)
		if !ok {
			return bad("an integer")
		}
		if _, err := strconv.Atoi(string(n)); err != nil {
			return bad("an integer")
		}
	case kindDuration:
		s, ok := tok.(string)
		if !ok {
			return bad(`a duration string such as "60s"`)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
	case kindList:
		if tok == nil {
			return nil
		}
		if tok != json.Delim('[') {
			return bad("an array")
		}
		for i := 0; dec.More(); i++ {
			if err := walkShape(dec, sh.elem, fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	case kindMap, kindStruct:
		if tok == nil && sh.kind == kindMap {
			return nil
		}
		if tok != json.Delim('{') {
			return bad("an object")
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
			}
			k := kt.(string) // object keys are always strings
			child := k
			if field != "" {
				child = field + "." + k
			}
			if seen[k] {
				return fmt.Errorf("%w: %s: duplicate key", ErrInvalid, child)
			}
			seen[k] = true
			elem := sh.elem
			if sh.kind == kindStruct {
				var ok bool
				if elem, ok = sh.fields[k]; !ok {
					return fmt.Errorf("%w: %s: unknown field", ErrInvalid, child)
				}
			}
			if err := walkShape(dec, elem, child); err != nil {
				return err
			}
		}
		_, err = dec.Token()
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, name, unexpectedEOF(err))
	}
	return nil
}

// unexpectedEOF reports running out of input inside the document as such.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return string(t)
	case string:
		return strconv.Quote(t)
	}
	return fmt.Sprint(tok)
}

func checkTTL(field string, d Duration, zeroOK bool) error {
	if d == 0 && zeroOK {
		return nil
	}
	if time.Duration(d) < MinTTL || time.Duration(d) > MaxTTL {
		return fmt.Errorf("%w: %s: %s is outside [%s, %s]", ErrInvalid, field, time.Duration(d), MinTTL, MaxTTL)
	}
	return nil
}

func revocationSafeID(s string) error {
	if s == "" || len(s) > 64 {
		return errors.New("must be 1-64 characters")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("character %q not allowed (use letters, digits, - and _)", r)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Canonical returns the document's canonical JSON (encoding/json sorts map
// keys), the form that is committed to the log and carried by epoch events.
func (p *Policy) Canonical() []byte {
	b, _ := json.Marshal(p) // cannot fail: only strings, ints and maps
	return b
}

// Digest is SHA-256 of the canonical document.
func (p *Policy) Digest() events.Hash { return events.Sum(p.Canonical()) }

// Verdict is the result of evaluating one request.
type Verdict struct {
	Allowed bool
	Reason  string // machine code when refused: "lane_mismatch", "denied_by_policy"
	Missing string
	Rule    string // the rule that decided, e.g. "lanes.isolated.tools"
	TTL     time.Duration
}

// Evaluate decides whether worker, in lane, may call tool. It is pure and
// deterministic.
func (p *Policy) Evaluate(worker, lane, tool string) Verdict {
	if pinned, ok := p.Workers[worker]; ok && pinned != lane {
		return Verdict{Reason: "lane_mismatch", Missing: "lane=" + pinned, Rule: "workers." + worker}
	}
	l, ok := p.Lanes[lane]
	if !ok {
		return Verdict{Reason: "denied_by_policy", Missing: "lane " + lane + " declared", Rule: "lanes"}
	}
	for _, d := range l.Deny {
		if lanes.MatchTool(d, tool) {
			return Verdict{Reason: "denied_by_policy", Missing: "tool not denied", Rule: "lanes." + lane + ".deny:" + d}
		}
	}
	for _, a := range l.Tools {
		if lanes.MatchTool(a, tool) {
			ttl := time.Duration(l.TTL)
			if ttl == 0 {
				ttl = time.Duration(p.DefaultTTL)
			}
			return Verdict{Allowed: true, Rule: "lanes." + lane + ".tools:" + a, TTL: ttl}
		}
	}
	return Verdict{Reason: "denied_by_policy", Missing: "tool " + tool + " allowed in lane " + lane, Rule: "lanes." + lane + ".tools"}
}
