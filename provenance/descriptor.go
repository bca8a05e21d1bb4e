package provenance

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"

	"github.com/writ-dev/writ/authority"
)

// Channel names how content entered the session: one of
// authority.Channels.
type Channel string

// Scope is the lifetime of content. Task is narrower than Session.
type Scope uint8

const (
	// ScopeTask is content valid only within one task.
	ScopeTask Scope = iota
	// ScopeSession is content valid for the whole session.
	ScopeSession
)

// String returns "task" or "session".
func (s Scope) String() string {
	switch s {
	case ScopeTask:
		return "task"
	case ScopeSession:
		return "session"
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// OriginCounter records the revocation counter of a source at the time a
// descriptor was built from it.
type OriginCounter struct {
	Source  string `json:"source"`
	Counter uint64 `json:"counter"`
}

// Descriptor labels one piece of content.
type Descriptor struct {
	ID             string          `json:"id"`
	Channel        Channel         `json:"channel"`
	Owner          string          `json:"owner"`
	Scope          Scope           `json:"scope"`
	Authority      Level           `json:"authority"`
	ContentDigest  [32]byte        `json:"content_digest"`
	Origins        []string        `json:"origins"`         // sorted, deduplicated source ids
	OriginCounters []OriginCounter `json:"origin_counters"` // sorted by Source, one per source
}

// NewSource builds the descriptor of a freshly registered source: its only
// origin is itself, recorded at the given revocation counter.
func NewSource(id string, ch Channel, owner string, scope Scope, auth Level, counter uint64, content []byte) Descriptor {
	return Descriptor{
		ID:             id,
		Channel:        ch,
		Owner:          owner,
		Scope:          scope,
		Authority:      auth,
		ContentDigest:  sha256.Sum256(content),
		Origins:        []string{id},
		OriginCounters: []OriginCounter{{Source: id, Counter: counter}},
	}
}

// Derive describes content computed from inputs by deriver. The result has
// the lowest authority of the inputs (Evidence if there are none), the union
// of their origins, the narrowest of their scopes, and deriver as owner.
// Where two inputs recorded different counters for the same source, the
// lower (older) counter is kept, so the result is invalidated no later than
// its oldest input. Deriving never raises authority.
func Derive(id, deriver string, inputs ...Descriptor) Descriptor {
	d := Descriptor{ID: id, Channel: authority.ChannelDerived, Owner: deriver, Scope: ScopeSession, Authority: Evidence}
	if len(inputs) == 0 {
		d.Scope = ScopeTask
		return d
	}
	levels := make([]Level, 0, len(inputs))
	origins := map[string]struct{}{}
	counters := map[string]uint64{}
	for _, in := range inputs {
		levels = append(levels, in.Authority)
		if in.Scope < d.Scope {
			d.Scope = in.Scope
		}
		for _, o := range in.Origins {
			origins[o] = struct{}{}
		}
		for _, oc := range in.OriginCounters {
			if c, ok := counters[oc.Source]; !ok || oc.Counter < c {
				counters[oc.Source] = oc.Counter
			}
		}
	}
	d.Authority = Lowest(levels...)
	d.Origins = make([]string, 0, len(origins))
	for o := range origins {
		d.Origins = append(d.Origins, o)
	}
	sort.Strings(d.Origins)
	d.OriginCounters = make([]OriginCounter, 0, len(counters))
	for s, c := range counters {
		d.OriginCounters = append(d.OriginCounters, OriginCounter{Source: s, Counter: c})
	}
	sort.Slice(d.OriginCounters, func(i, j int) bool { return d.OriginCounters[i].Source < d.OriginCounters[j].Source })
	return d
}

// ErrNotOwner is returned by Raise when the caller is not the owner.
var ErrNotOwner = errors.New("provenance: only the descriptor's owner may raise authority")

// Raise returns a copy of d with authority raised to `to`. Only d's owner
// may do it (by == d.Owner, non-empty); lowering or keeping the level is
// also rejected so that Raise is never a silent no-op. The model is never an
// owner: callers must pass the authenticated principal, not a value taken
// from model output.
func Raise(d Descriptor, to Level, by string) (Descriptor, error) {
	if by == "" || by != d.Owner {
		return d, ErrNotOwner
	}
	if !to.Valid() {
		return d, fmt.Errorf("provenance: invalid authority level %d", uint8(to))
	}
	if to <= d.Authority {
		return d, fmt.Errorf("provenance: raise from %s to %s is not a raise", d.Authority, to)
	}
	out := d
	out.Origins = append([]string(nil), d.Origins...)
	out.OriginCounters = append([]OriginCounter(nil), d.OriginCounters...)
	out.Authority = to
	return out, nil
}

// Stale returns the origins whose current revocation counter differs from
// the one recorded in d (sorted). current reports a source's counter and
// whether the source is known; unknown sources are stale.
func (d Descriptor) Stale(current func(source string) (uint64, bool)) []string {
	var out []string
	for _, oc := range d.OriginCounters {
		if c, ok := current(oc.Source); !ok || c != oc.Counter {
			out = append(out, oc.Source)
		}
	}
	return out
}
