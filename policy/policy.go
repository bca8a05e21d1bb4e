// Package policy parses, validates and evaluates writ's policy document, the
// operator's trust root: which lanes exist, which tools each lane may call
// and for how long a grant lives.
package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
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
	// ErrVersion: the document's version is not SchemaVersion.
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

// Parse decodes and validates a JSON policy document. Unknown fields are
// rejected so that a misspelt key is not silently ignored.
func Parse(raw []byte) (*Policy, error) {
	if len(raw) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: document is %d bytes, limit %d", ErrInvalid, len(raw), MaxDocumentBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the document", ErrInvalid)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the document; errors name the offending field.
func (p *Policy) Validate() error {
	if p.Version != SchemaVersion {
		return fmt.Errorf("%w: version: got %d, this build reads %d", ErrVersion, p.Version, SchemaVersion)
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
		for i, t := range append(append([]string(nil), l.Tools...), l.Deny...) {
			if t == "" {
				return fmt.Errorf("%w: lanes.%s: tool pattern %d is empty", ErrInvalid, name, i)
			}
			if !validPattern(t) {
				return fmt.Errorf("%w: lanes.%s: bad tool pattern %q", ErrInvalid, name, t)
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

func checkTTL(field string, d Duration, zeroOK bool) error {
	if d == 0 && zeroOK {
		return nil
	}
	if time.Duration(d) < MinTTL || time.Duration(d) > MaxTTL {
		return fmt.Errorf("%w: %s: %s is outside [%s, %s]", ErrInvalid, field, time.Duration(d), MinTTL, MaxTTL)
	}
	return nil
}

func validPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
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
