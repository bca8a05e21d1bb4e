package policy

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/writ-dev/writ/lanes"
)

// This file is the version 1 schema, unchanged in meaning: a log written
// under a version 1 document must replay to the same decisions forever.

// LegacyDefault returns the version 1 policy a fresh issuer used to start
// with: coordinators may call any tool, isolated workers only read,
// specialists read, write and run commands. It is kept byte for byte as it
// always was (its digest is in existing receipt streams, and clusters that
// started under it keep it in their log); a fresh issuer now starts with
// Default, the version 2 recommended policy.
func LegacyDefault() *Policy {
	return &Policy{
		Version:    LegacyVersion,
		DefaultTTL: Duration(time.Minute),
		Lanes: map[string]Lane{
			lanes.Coordinator: {Tools: []string{"*"}, TTL: Duration(2 * time.Minute)},
			lanes.Isolated:    {Tools: []string{"Read", "Grep", "Glob", "WebFetch", "WebSearch"}, TTL: Duration(30 * time.Second)},
			lanes.Specialist:  {Tools: []string{"Read", "Grep", "Glob", "Write", "Edit", "Bash"}, Deny: []string{"mcp__*"}},
		},
	}
}

// validateLegacy checks a version 1 document.
func (p *Policy) validateLegacy() error {
	if err := checkTTL("default_ttl", p.DefaultTTL, false); err != nil {
		return err
	}
	if len(p.Lanes) == 0 {
		return fmt.Errorf("%w: lanes: at least one lane is required", ErrInvalid)
	}
	for _, name := range sortedKeys(p.Lanes) {
		l := p.Lanes[name]
		if err := safeID(name); err != nil {
			return fmt.Errorf("%w: lanes.%s: %v", ErrInvalid, name, err)
		}
		if err := checkTTL("lanes."+name+".ttl", l.TTL, true); err != nil {
			return err
		}
		if len(l.Surfaces) > 0 || len(l.Consequences) > 0 || l.Workspace != "" {
			return fmt.Errorf("%w: lanes.%s: surfaces, consequences and workspace need version %d", ErrInvalid, name, SchemaVersion)
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
		if err := safeID(w); err != nil {
			return fmt.Errorf("%w: workers.%s: %v", ErrInvalid, w, err)
		}
		if _, ok := p.Lanes[l]; !ok {
			return fmt.Errorf("%w: workers.%s: lane %q is not declared in lanes", ErrInvalid, w, l)
		}
	}
	if p.hasV2Fields() {
		return fmt.Errorf("%w: version: the document uses version %d sections; set version: %d", ErrInvalid, SchemaVersion, SchemaVersion)
	}
	return nil
}

// hasV2Fields reports whether any version 2 top-level section is set.
func (p *Policy) hasV2Fields() bool {
	return p.Unpinned != "" || p.Workspace != "" || len(p.Surfaces) > 0 || len(p.Allow) > 0 || len(p.Deny) > 0 ||
		len(p.Preauthorizations) > 0 || len(p.ShapeRules) > 0 || len(p.Quotas) > 0 ||
		len(p.Boundaries.ProtectedPaths)+len(p.Boundaries.EgressAllow)+len(p.Boundaries.TrustDomains)+len(p.Boundaries.CrossingClasses) > 0 ||
		len(p.Review.Classes)+len(p.Review.Targets) > 0 || p.Ledger != (Ledger{}) || !p.Provenance.IsZero()
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

// safeID checks a lane, worker, surface or rule id: 1-64 characters of
// letters, digits, - and _ (usable as NATS tokens and counter keys).
func safeID(s string) error {
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

// Verdict is the result of evaluating one request under a version 1
// policy.
type Verdict struct {
	Allowed bool
	Reason  string // machine code when refused: "lane_mismatch", "denied_by_policy"
	Missing string
	Rule    string // the rule that decided, e.g. "lanes.isolated.tools"
	TTL     time.Duration
}

// Evaluate decides, under a version 1 policy, whether worker, in lane, may
// call tool. It is pure and deterministic. Version 2 policies are judged
// by Judge; Evaluate refuses for them.
func (p *Policy) Evaluate(worker, lane, tool string) Verdict {
	if p.Version != LegacyVersion {
		return Verdict{Reason: "denied_by_policy", Missing: "version 1 policy", Rule: "version"}
	}
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
