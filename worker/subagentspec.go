package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/lanes"
)

// subagentSpec is what the worker config declares for one subagent type:
// the lane its child worker runs in and, optionally, a narrower spawn
// scope for that child. In the config it is either the lane alone
//
//	"Explore": "isolated"
//
// or an object
//
//	"reviewer": {"lane": "specialist", "tools": ["Read", "Grep", "Glob"],
//	             "classes": ["local_read"], "targets": ["/repo/**"], "ttl": "30m"}
//
// Tools, classes and targets can only narrow: the spawn request carries
// them and the issuer refuses a child scope that is not inside its
// parent's (scope_widens naming the field); the child's calls are judged
// under its lane and every ancestor's as well. What can be seen to widen
// without the policy is refused when the config is loaded: a coordinator
// lane (a spawned worker never is one), a ttl beyond the longest spawn,
// and entries that are not patterns, classes or targets.
type subagentSpec struct {
	Lane    string   `json:"lane"`
	Tools   []string `json:"tools,omitempty"`
	Classes []string `json:"classes,omitempty"`
	Targets []string `json:"targets,omitempty"`
	// TTL is the child's lifetime, a Go duration ("30m"); absent:
	// SubagentTTL, or what is left of this worker's when that is less.
	TTL string `json:"ttl,omitempty"`
}

// UnmarshalJSON reads a lane string or a declaration object, whose keys
// must be exactly the declared ones.
func (s *subagentSpec) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*s = subagentSpec{}
		return json.Unmarshal(b, &s.Lane)
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("want a lane name or an object with \"lane\"")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if err := onlyKeys(m, "", "lane", "tools", "classes", "targets", "ttl"); err != nil {
		return err
	}
	type plain subagentSpec
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*s = subagentSpec(p)
	for _, l := range []*[]string{&s.Tools, &s.Classes, &s.Targets} {
		if len(*l) == 0 {
			*l = nil // an empty list declares nothing, as one left out
		}
	}
	return nil
}

// MarshalJSON writes a lane alone as a string.
func (s subagentSpec) MarshalJSON() ([]byte, error) {
	if s.narrowed() {
		type plain subagentSpec
		return json.Marshal(plain(s))
	}
	return json.Marshal(s.Lane)
}

// narrowed reports whether the declaration narrows more than the lane.
func (s subagentSpec) narrowed() bool {
	return len(s.Tools) > 0 || len(s.Classes) > 0 || len(s.Targets) > 0 || s.TTL != ""
}

// ttl is the declared lifetime (0: none declared). validate has checked
// it parses.
func (s subagentSpec) ttl() time.Duration {
	d, _ := time.ParseDuration(s.TTL)
	return d
}

// validate checks the declaration, naming the field (prefix is
// "subagents.<type>").
func (s subagentSpec) validate(prefix string) error {
	lf := prefix
	if s.narrowed() {
		lf = prefix + ".lane"
	}
	if err := api.ValidID(s.Lane); err != nil {
		return fmt.Errorf("%s: %v", lf, err)
	}
	if s.Lane == "coordinator" {
		return fmt.Errorf("%s: %q would widen: a subagent is a spawned worker, and a spawned worker never runs as a coordinator", lf, s.Lane)
	}
	for _, l := range []struct {
		field string
		v     []string
		check func(string) error
	}{
		{"tools", s.Tools, lanes.ValidPattern},
		{"classes", s.Classes, func(c string) error {
			if !lanes.IsClass(c) {
				return fmt.Errorf("%q is not a consequence class (one of %v)", c, lanes.Classes())
			}
			return nil
		}},
		{"targets", s.Targets, nil},
	} {
		f := prefix + "." + l.field
		if len(l.v) > api.MaxSpawnScope {
			return fmt.Errorf("%s: at most %d entries", f, api.MaxSpawnScope)
		}
		for i, v := range l.v {
			if v == "" || len(v) > api.MaxScopeEntryLen {
				return fmt.Errorf("%s[%d]: an entry is 1-%d bytes", f, i, api.MaxScopeEntryLen)
			}
			if v == "*" || v == "**" {
				return fmt.Errorf("%s[%d]: %q would widen the scope to everything its parent has: leave %s out instead", f, i, v, l.field)
			}
			if slices.Contains(l.v[:i], v) {
				return fmt.Errorf("%s[%d]: %q is listed twice", f, i, v)
			}
			if l.check != nil {
				if err := l.check(v); err != nil {
					return fmt.Errorf("%s[%d]: %v", f, i, err)
				}
			}
		}
	}
	if s.TTL != "" {
		d, err := time.ParseDuration(s.TTL)
		switch {
		case err != nil:
			return fmt.Errorf("%s.ttl: %v", prefix, err)
		case d < time.Second:
			return fmt.Errorf("%s.ttl: %v is less than a second", prefix, d)
		case d > SubagentTTL:
			return fmt.Errorf("%s.ttl: %v would widen: a subagent's child lives at most %v", prefix, d, SubagentTTL)
		}
	}
	return nil
}

// spawnRequest is the spawn of child for a subagent of this declaration,
// parentLane being the main session's lane.
func (s subagentSpec) spawnRequest(child, parentLane string) api.SpawnRequest {
	ttl := SubagentTTL
	if d := s.ttl(); d > 0 {
		ttl = d
	}
	return api.SpawnRequest{Child: child, Lane: s.Lane, ParentLane: parentLane,
		Tools: slices.Clone(s.Tools), Classes: slices.Clone(s.Classes), Targets: slices.Clone(s.Targets),
		TTLMillis: ttl.Milliseconds()}
}
