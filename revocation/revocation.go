// Package revocation keeps writ's revocation counters: one monotonically
// increasing counter per worker, source, lane or destination. A grant binds
// the counters it was minted under; any counter that has moved since makes
// the grant (and everything derived from it) dead.
package revocation

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/writ-dev/writ/events"
)

// Scopes a counter key can name. The scope is the part of the key before
// the first '/'; the id is the rest.
const (
	ScopeWorker = "worker"
	ScopeSource = "source"
	ScopeLane   = "lane"
	ScopeDest   = "dest"
	// ScopeReviewer names a reviewer identity: revoking it unbinds every
	// approval the reviewer gave that is not used yet.
	ScopeReviewer = "reviewer"
	// ScopeIncarnation names a worker's incarnation: it moves when the
	// worker is restored from a checkpoint or respawned, and every grant
	// binds it, so no grant of an earlier incarnation can be spent. Only
	// the state machine moves it: it is not a scope an operator revokes.
	ScopeIncarnation = "incarnation"
)

// ErrBadKey is returned for keys that do not have the form scope/id with a
// known scope and a non-empty id.
var ErrBadKey = errors.New("revocation: bad counter key")

// Key builds the counter key for a scope and id.
func Key(scope, id string) string { return scope + "/" + id }

// ParseKey splits and validates a counter key.
func ParseKey(key string) (scope, id string, err error) {
	scope, id, ok := strings.Cut(key, "/")
	if !ok || id == "" {
		return "", "", fmt.Errorf("%w: %q (want scope/id)", ErrBadKey, key)
	}
	switch scope {
	case ScopeWorker, ScopeSource, ScopeLane, ScopeDest, ScopeReviewer, ScopeIncarnation:
		return scope, id, nil
	}
	return "", "", fmt.Errorf("%w: unknown scope %q in %q", ErrBadKey, scope, key)
}

// Counters maps counter keys to values. An absent key has value 0. The
// zero value is ready to use, and a nil *Counters reads as all zeros (only
// Set and Bump need a non-nil receiver).
type Counters struct {
	m map[string]uint64
}

// values returns the map, nil for a nil receiver (reads then see zeros).
func (c *Counters) values() map[string]uint64 {
	if c == nil {
		return nil
	}
	return c.m
}

// Get returns the current value of key.
func (c *Counters) Get(key string) uint64 { return c.values()[key] }

// Set sets key to v (used by restore and by replay of revoke events).
func (c *Counters) Set(key string, v uint64) {
	if c.m == nil {
		c.m = make(map[string]uint64)
	}
	if v == 0 {
		delete(c.m, key)
		return
	}
	c.m[key] = v
}

// Bump increments key and returns the new value.
func (c *Counters) Bump(key string) uint64 {
	v := c.m[key] + 1
	c.Set(key, v)
	return v
}

// Bind returns the current values of keys, sorted by key, for a grant to
// carry. Duplicate keys are bound once.
func (c *Counters) Bind(keys ...string) []events.Counter {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	out := make([]events.Counter, 0, len(sorted))
	for i, k := range sorted {
		if i > 0 && sorted[i-1] == k {
			continue
		}
		out = append(out, events.Counter{Key: k, Value: c.values()[k]})
	}
	return out
}

// Stale returns the first bound counter whose value has moved, if any.
func (c *Counters) Stale(bound []events.Counter) (events.Counter, bool) {
	m := c.values()
	for _, b := range bound {
		if m[b.Key] != b.Value {
			return b, true
		}
	}
	return events.Counter{}, false
}

// Len is the number of non-zero counters.
func (c *Counters) Len() int { return len(c.values()) }

// Clone returns an independent copy: setting a counter in either leaves
// the other unchanged.
func (c *Counters) Clone() Counters { return Counters{m: maps.Clone(c.values())} }

// Sorted returns every non-zero counter sorted by key, for snapshots and
// digests (never iterate the map directly into output).
func (c *Counters) Sorted() []events.Counter {
	m := c.values()
	out := make([]events.Counter, 0, len(m))
	for k, v := range m {
		out = append(out, events.Counter{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
