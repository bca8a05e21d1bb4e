package fsm

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/revocation"
)

// The source registry: content sources workers registered (descriptors,
// never content), with the authority the issuer assigned each and the
// revocation counters each was built from. A grant request's field traces
// are looked up here; the issuer never takes a level from the worker.

// SourceRetention is how long a registered source stays in the registry,
// on the control-plane clock, from its registration. After that its id is
// unknown (a trace to it counts as evidence, a derivative of it takes
// evidence) and it may be registered again; its revocation counter is not
// forgotten, so a grant or derivative that bound it still dies when it is
// revoked. Like grants, the boundary is exact: from RegisteredAt +
// SourceRetention on, Decide treats the source as gone whether or not an
// event has pruned it yet.
const SourceRetention = int64(24 * time.Hour)

// MaxSourcesPerWorker caps the live sources one worker may hold. A
// registration beyond it is refused (quota_exhausted) until older sources
// expire.
const MaxSourcesPerWorker = 20_000

// MaxSourceCounters bounds the revocation counters one source records (its
// own and, transitively, its origins'). A derivation that would record
// more is refused (invalid_request): provenance that deep cannot be kept
// revocable at a bounded cost.
const MaxSourceCounters = 256

// MaxGrantCounters bounds the revocation counters one permit binds
// (worker, lane, named sources and the recorded counters of every traced
// source). A request whose provenance would bind more is refused
// (invalid_request).
const MaxGrantCounters = 1024

// sourceScopes are the scopes a source may name.
var sourceScopes = map[string]bool{"task": true, "session": true}

// traceTransforms and traceParts are the decodings and URL parts a trace
// match may name below ReceiptFormatTypedTraces.
var (
	traceTransforms = map[string]bool{"raw": true, "base64": true, "hex": true, "percent": true, "dns_labels": true, "dns_labels+hex": true}
	traceParts      = map[string]bool{"": true, "host": true, "path": true, "token": true}
)

// Typed traces (ReceiptFormatTypedTraces): a match may also name a typed
// match of the whole value ("number", "number:" and a three-letter
// currency code, "ident") or a chain of up to maxDecodeChain decodings
// joined by '+' (base64, hex, percent, json: "hex+base64").
const maxDecodeChain = 4

var decodeSteps = map[string]bool{"base64": true, "hex": true, "percent": true, "json": true}

// traceTransformAt reports whether a match may name transform t when typed
// traces are (typed) or are not accepted.
func traceTransformAt(t string, typed bool) bool {
	if traceTransforms[t] {
		return true
	}
	if !typed {
		return false
	}
	if valueTransform(t) {
		return true
	}
	steps := strings.Split(t, "+")
	if len(steps) > maxDecodeChain {
		return false
	}
	for _, s := range steps {
		if !decodeSteps[s] {
			return false
		}
	}
	return true
}

// valueTransform reports whether t is a typed match of the whole value.
func valueTransform(t string) bool {
	if t == "number" || t == "ident" {
		return true
	}
	code, ok := strings.CutPrefix(t, "number:")
	if !ok || len(code) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	return true
}

// wholeAt reports whether match m counts as its source holding the entire
// value: a whole raw match of the value itself and, when typed traces
// are accepted, a whole typed match.
func wholeAt(m TraceMatch, typed bool) bool {
	if !m.Whole || m.Part != "" {
		return false
	}
	return m.Transform == "raw" || typed && valueTransform(m.Transform)
}

// source is one registered source. Origins are sorted; Counters (sorted by
// key) are the source's own counter at registration and the union of its
// origins' recorded counters, the lowest value per key.
type source struct {
	ID        string
	Owner     string
	Session   string
	Channel   string
	Scope     string
	Path      string
	Tool      string
	Digest    events.Hash
	Origins   []string
	ModelMade bool
	Authority authority.Level
	Counters  []events.Counter
	At        int64  // registered at (control-plane time)
	Seq       uint64 // the source event
}

func (r *source) until() int64 { return AddSat(r.At, SourceRetention) }

func sourceKey(id string) string { return revocation.Key(revocation.ScopeSource, id) }

// SourceCount is the number of sources in the registry.
func (s *State) SourceCount() int { return len(s.sources) }

// liveSource returns the source id names if it is still registered at
// control-plane time now (see liveGrant).
func (s *State) liveSource(id string, now int64) (*source, bool) {
	r, ok := s.sources[id]
	if !ok || now >= r.until() {
		return nil, false
	}
	return r, true
}

// moved returns the first recorded counter whose current value differs.
func (s *State) moved(recorded []events.Counter) (events.Counter, bool) {
	return s.counters.Stale(recorded)
}

// liveSourcesOf counts owner's sources live at now. It counts exactly only
// near the cap, where it matters.
func (s *State) liveSourcesOf(owner string, now int64) int {
	m := s.srcByOwner[owner]
	if m.len() < MaxSourcesPerWorker {
		return m.len()
	}
	n := 0
	for id := range m.ids() {
		if _, ok := s.liveSource(id, now); ok {
			n++
		}
	}
	return n
}

// answer is the envelope the registration's source event gave, rebuilt
// for a repeated registration.
func (r *source) answer() grants.Envelope {
	e := events.Event{
		Kind: events.KindSource, Seq: r.Seq, Decision: string(grants.Permit),
		Counters: slices.Clone(r.Counters), Authority: r.Authority.String(),
	}
	if r.Path != "" {
		e.Target = events.SourcePathPrefix + r.Path
	}
	if r.ModelMade {
		e.Grounds = []string{events.GroundModelMade}
	}
	return grants.FromEvent(e)
}

// sameDescriptor reports whether a registration describes r again.
func (r *source) sameDescriptor(c Command, origins []string) bool {
	return r.Owner == c.Caller && r.Session == c.Session && r.Channel == c.Channel &&
		r.Scope == c.Scope && r.Path == c.Path && r.Tool == c.Tool && r.Digest == c.ContentDigest &&
		r.ModelMade == c.ModelMade && slices.Equal(r.Origins, origins)
}

// checkSource validates a registration; origins are sorted. It returns the
// field at fault and why, or "" for a well-formed descriptor.
func checkSource(c Command, origins []string) (field, detail string) {
	switch {
	case c.Caller == "":
		return "caller", "a source needs an owner"
	case !api.IsValidID(c.SourceID):
		return "id", "source id must be 1-64 of [A-Za-z0-9_-]"
	case !authority.KnownChannel(c.Channel):
		return "channel", fmt.Sprintf("unknown channel %q", c.Channel)
	case !sourceScopes[c.Scope]:
		return "scope", "scope must be task or session"
	case c.ContentDigest.IsZero():
		return "content_digest", "the content digest is required"
	case len(origins) > MaxSourceOrigins:
		return "origins", fmt.Sprintf("at most %d origins", MaxSourceOrigins)
	}
	for i, o := range origins {
		switch {
		case !api.IsValidID(o):
			return "origins", fmt.Sprintf("origin %q must be 1-64 of [A-Za-z0-9_-]", o)
		case o == c.SourceID:
			return "origins", "a source cannot be its own origin"
		case i > 0 && origins[i-1] == o:
			return "origins", "origin " + o + " is listed twice"
		}
	}
	return "", ""
}

// decideSource registers a source: validates the descriptor, answers a
// repeated registration with its original answer, refuses a different
// descriptor under a used id (source_conflict) and a derivation from a
// revoked origin (source_revoked), and assigns the authority: derived
// content takes the lowest level of its origins (evidence when model-made,
// originless, or an origin is unknown, expired or another worker's); any
// other channel takes the policy's level for its channel, path and tool.
func decideSource(s *State, now int64, node string, c *Command) verdict {
	origins := slices.Clone(c.Origins)
	slices.Sort(origins)
	if field, detail := checkSource(*c, origins); field != "" {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, field, detail))
	}
	e := base(events.KindSource, now, node, c)
	e.Worker, e.Session, e.Tool = c.Caller, c.Session, c.Tool
	// At ReceiptFormatFacts the descriptor goes in the source fields
	// (SourceID, Origins, SourcePath, ModelMade); at the legacy level it
	// is packed into Sources (id, then origins), Target ("path:<p>") and
	// Grounds ("model_made"), as every earlier build wrote it. The fold,
	// the auditor and every receipt reader read either form through
	// events.Event.SourceDescriptor.
	if s.writesFacts() {
		e.SourceID, e.Origins, e.SourcePath, e.ModelMade = c.SourceID, origins, c.Path, c.ModelMade
	} else {
		e.Sources = append([]string{c.SourceID}, origins...)
		if c.Path != "" {
			e.Target = events.SourcePathPrefix + c.Path
		}
		if c.ModelMade {
			e.Grounds = []string{events.GroundModelMade}
		}
	}
	e.Channel, e.Scope, e.ContentDigest = c.Channel, c.Scope, c.ContentDigest
	refuse := func(r grants.Reason, missing, detail string) verdict {
		e.Kind = events.KindDeny
		return record(deny(e, r, missing, detail))
	}
	if r, ok := s.liveSource(c.SourceID, now); ok {
		if !r.sameDescriptor(*c, origins) {
			return refuse(grants.ReasonSourceConflict, "unused source id",
				fmt.Sprintf("source %s was registered at seq %d with a different descriptor", r.ID, r.Seq))
		}
		if k, dead := s.moved(r.Counters); dead {
			return refuse(grants.ReasonSourceRevoked, k.Key, fmt.Sprintf(
				"source %s was revoked after it was registered (%s moved from %d to %d); register the content under a new id",
				r.ID, k.Key, k.Value, s.counters.Get(k.Key)))
		}
		return reply(r.answer())
	}
	recorded := map[string]uint64{sourceKey(c.SourceID): s.counters.Get(sourceKey(c.SourceID))}
	levels := make([]authority.Level, 0, len(origins))
	for _, o := range origins {
		r, ok := s.liveSource(o, now)
		if !ok {
			// Unknown or expired: evidence, revocable by its id.
			levels = append(levels, authority.Evidence)
			lowest(recorded, sourceKey(o), s.counters.Get(sourceKey(o)))
			continue
		}
		if k, dead := s.moved(r.Counters); dead {
			return refuse(grants.ReasonSourceRevoked, k.Key, fmt.Sprintf(
				"origin %s is revoked (%s moved from %d to %d); nothing derived from it is registered",
				o, k.Key, k.Value, s.counters.Get(k.Key)))
		}
		lvl := r.Authority
		if r.Owner != c.Caller {
			// Another worker's source grounds nothing for this one.
			lvl = authority.Evidence
		}
		levels = append(levels, lvl)
		for _, rc := range r.Counters {
			lowest(recorded, rc.Key, rc.Value)
		}
	}
	if len(recorded) > MaxSourceCounters {
		return refuse(grants.ReasonInvalidRequest, "origins", fmt.Sprintf(
			"the origins record %d revocation counters; a source may record at most %d", len(recorded), MaxSourceCounters))
	}
	if n := s.liveSourcesOf(c.Caller, now); n >= MaxSourcesPerWorker {
		return refuse(grants.ReasonQuotaExhausted, "fewer live sources", fmt.Sprintf(
			"worker %s holds %d live sources, the limit; sources expire %s after registration",
			c.Caller, n, time.Duration(SourceRetention)))
	}
	var lvl authority.Level
	switch {
	case c.Channel == authority.ChannelDerived:
		if c.ModelMade || len(origins) == 0 {
			lvl = authority.Evidence
		} else {
			lvl = authority.Lowest(levels...)
		}
	case s.policy == nil:
		lvl = authority.Evidence
	default:
		lvl = s.policy.SourceAuthority(c.Channel, c.Path, c.Tool)
		if !lvl.Valid() {
			lvl = authority.Evidence
		}
	}
	e.Decision = string(grants.Permit)
	e.Authority = lvl.String()
	e.Counters = sortedCounters(recorded)
	return record(e)
}

// lowest records key=v in m, keeping the lowest value per key.
func lowest(m map[string]uint64, key string, v uint64) {
	if cur, ok := m[key]; !ok || v < cur {
		m[key] = v
	}
}

func sortedCounters(m map[string]uint64) []events.Counter {
	out := make([]events.Counter, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, events.Counter{Key: k, Value: m[k]})
	}
	return out
}

// evolveSource records a source event, in either form (see
// events.Event.SourceDescriptor).
func (s *State) evolveSource(e events.Event, lvl authority.Level) {
	id, origins, path, modelMade := e.SourceDescriptor()
	r := &source{
		ID: id, Owner: e.Worker, Session: e.Session, Channel: e.Channel, Scope: e.Scope,
		Tool: e.Tool, Digest: e.ContentDigest, Authority: lvl, Counters: slices.Clone(e.Counters),
		At: e.Time, Seq: e.Seq, ModelMade: modelMade, Path: path,
	}
	if len(origins) > 0 {
		r.Origins = slices.Clone(origins)
	}
	s.addSource(r)
}

// checkSourceEvent is what Evolve needs of a source event before folding
// it: an id and a known authority level.
func checkSourceEvent(e events.Event) (authority.Level, error) {
	if id, _, _, _ := e.SourceDescriptor(); e.Decision != string(grants.Permit) || id == "" {
		return 0, fmt.Errorf("seq %d: a source event names no source or is not a permit", e.Seq)
	}
	lvl, err := authority.ParseLevel(e.Authority)
	if err != nil || lvl.String() != e.Authority {
		return 0, fmt.Errorf("seq %d: source authority %q", e.Seq, e.Authority)
	}
	return lvl, nil
}

// CheckSource validates an OpSource command as the state machine will:
// it returns the field at fault and why, or "" when the descriptor is
// well formed. The issuer refuses a malformed registration with it before
// proposing anything.
func CheckSource(c Command) (field, detail string) {
	origins := slices.Clone(c.Origins)
	slices.Sort(origins)
	return checkSource(c, origins)
}

// SourceInfo is a registered source as the registry holds it.
type SourceInfo struct {
	ID, Owner, Session, Channel, Scope, Path, Tool string
	ContentDigest                                  events.Hash
	Origins                                        []string
	ModelMade                                      bool
	Authority                                      authority.Level
	Counters                                       []events.Counter
	RegisteredAt, ExpiresAt                        int64
	Seq                                            uint64
}

// Source returns a copy of a registered source, if the registry still
// holds it at the clock.
func (s *State) Source(id string) (SourceInfo, bool) {
	r, ok := s.liveSource(id, s.clock)
	if !ok {
		return SourceInfo{}, false
	}
	return SourceInfo{
		ID: r.ID, Owner: r.Owner, Session: r.Session, Channel: r.Channel, Scope: r.Scope, Path: r.Path,
		Tool: r.Tool, ContentDigest: r.Digest, Origins: slices.Clone(r.Origins), ModelMade: r.ModelMade,
		Authority: r.Authority, Counters: slices.Clone(r.Counters), RegisteredAt: r.At, ExpiresAt: r.until(), Seq: r.Seq,
	}, true
}
