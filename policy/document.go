package policy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/writ-dev/writ/events"
)

// Schema versions this build reads.
const (
	LegacyVersion = 1 // lanes with tool patterns only; judged by Evaluate
	SchemaVersion = 2 // the policy engine; judged by Judge
)

// Limits on a policy document.
const (
	MaxDocumentBytes = 1 << 20
	MaxTTL           = time.Hour
	MinTTL           = time.Second
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

// Timestamp is a point on the control-plane clock (unix nanoseconds),
// written as an RFC 3339 string in UTC.
type Timestamp int64

// ParseTimestamp reads an RFC 3339 time that fits in unix nanoseconds.
func ParseTimestamp(s string) (Timestamp, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("want an RFC 3339 time such as \"2026-01-01T00:00:00Z\": %v", err)
	}
	if t.Year() < 1678 || t.Year() > 2261 {
		return 0, fmt.Errorf("year %d is outside 1678-2261", t.Year())
	}
	return Timestamp(t.UnixNano()), nil
}

// String is the canonical RFC 3339 form.
func (t Timestamp) String() string { return time.Unix(0, int64(t)).UTC().Format(time.RFC3339Nano) }

// MarshalJSON writes the canonical RFC 3339 form.
func (t Timestamp) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// UnmarshalJSON reads an RFC 3339 string.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseTimestamp(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// Lane is one lane's declaration. Tools and Deny are version 1 fields;
// Surfaces, Consequences and Workspace are version 2 fields.
type Lane struct {
	Tools        []string `json:"tools"`          // v1: tool patterns allowed; "*" allows all
	Deny         []string `json:"deny,omitempty"` // v1: tool patterns denied (beat Tools)
	TTL          Duration `json:"ttl,omitempty"`  // grant lifetime; DefaultTTL when zero
	Surfaces     []string `json:"surfaces,omitempty"`
	Consequences []string `json:"consequences,omitempty"`
	Workspace    string   `json:"workspace,omitempty"`
}

// Target says which argument field names a call's target and how it is
// canonicalized: path, url, email, shell, raw or digest. List: the field
// may hold an array of values (recipients, paths), each canonicalized and
// judged on its own, the grant binding the whole set (see docs/policy.md,
// "List targets"); without it an array is target_ambiguous. Optional: the
// call may leave the field out, and then has no target. Also (with List)
// names further fields whose values are targets of the same call, judged
// with the field's as one set: a mail's cc and bcc.
type Target struct {
	Field    string   `json:"field"`
	Canon    string   `json:"canon"`
	List     bool     `json:"list,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Also     []string `json:"also,omitempty"`
}

// Surface declares a tool surface: the tools it covers (names or
// patterns), its operation and consequence class, its target, the argument
// fields that carry material to the effect (sinks), and the fields an
// amount and a byte count are read from.
type Surface struct {
	ID          string   `json:"id"`
	Tools       []string `json:"tools"`
	Operation   string   `json:"operation"`
	Consequence string   `json:"consequence"`
	Target      Target   `json:"target,omitzero"`
	Sinks       []string `json:"sinks,omitempty"`
	AmountField string   `json:"amount_field,omitempty"`
	BytesField  string   `json:"bytes_field,omitempty"`
	// EgressDomains and RecipientDomains are DNS names inside the
	// declared domains for calls on this surface only, in addition to
	// the boundaries' lists: a URL host (an email domain) that is one of
	// them or a subdomain of one stays inside.
	EgressDomains    []string `json:"egress_domains,omitempty"`
	RecipientDomains []string `json:"recipient_domains,omitempty"`
	// Memory: the surface writes the agent's memory or history (a
	// remember or history_append tool) without naming a path; every call
	// is held as a draft for the owner, as a write to a memory path is.
	Memory bool `json:"memory,omitempty"`
	// ResultFrom says where a call's result came from: "target" (the
	// resource the target names: a path, a URL, a message id). The
	// result's source registration then carries that resource, so path
	// and resource levels apply to it as to a file read.
	ResultFrom string `json:"result_from,omitempty"`
	// Verbs, when set, narrow the surface to the tools its patterns match
	// whose name's verb is one of these (verbs.go): the first word of the
	// tool's own name that any surface lists under verbs.
	Verbs []string `json:"verbs,omitempty"`
}

// Rule is an explicit allowance or denial: which lanes and workers (all
// when empty), tools (patterns) and canonical targets (patterns; any when
// empty). An allowance may bound the amount per call.
type Rule struct {
	ID        string   `json:"id"`
	Lanes     []string `json:"lanes,omitempty"`
	Workers   []string `json:"workers,omitempty"`
	Tools     []string `json:"tools"`
	Targets   []string `json:"targets,omitempty"`
	MaxAmount *uint64  `json:"max_amount,omitempty"`
}

// Preauth is a preauthorization: an operator's consumable instrument that
// covers matching calls until it expires, within its per-call amount,
// cumulative amount and use count.
type Preauth struct {
	ID         string    `json:"id"`
	Lanes      []string  `json:"lanes,omitempty"`
	Workers    []string  `json:"workers,omitempty"`
	Tools      []string  `json:"tools"`
	Targets    []string  `json:"targets,omitempty"`
	Expires    Timestamp `json:"expires"`
	PerCall    *uint64   `json:"per_call,omitempty"`
	Cumulative *uint64   `json:"cumulative,omitempty"`
	Uses       *uint64   `json:"uses,omitempty"`
}

// Boundaries declares what a call may not touch or leave without crossing
// a boundary: protected paths, the egress allow-list (URL hosts), the
// trust domains (recipient domains), and consequence classes that always
// cross.
//
// EgressDomains and RecipientDomains are DNS names: a URL host (an email
// domain) that is one of them or any subdomain of one stays inside. Paths
// declare, per path pattern, which of the separate properties a
// protected path has (see PathRule).
type Boundaries struct {
	ProtectedPaths   []string   `json:"protected_paths,omitempty"`
	EgressAllow      []string   `json:"egress_allow,omitempty"`
	TrustDomains     []string   `json:"trust_domains,omitempty"`
	CrossingClasses  []string   `json:"crossing_classes,omitempty"`
	EgressDomains    []string   `json:"egress_domains,omitempty"`
	RecipientDomains []string   `json:"recipient_domains,omitempty"`
	Paths            []PathRule `json:"paths,omitempty"`
}

// PathRule gives the paths matching Match the properties it sets, each
// on its own: ReadCrosses (reading one is a boundary crossing),
// WriteCrosses (changing one is), Secret (content read from one is a
// protected source: it never leaves the declared domains) and Memory
// (writes to one are drafts the owner approves). A protected_paths entry
// is ReadCrosses and WriteCrosses together.
type PathRule struct {
	Match        string `json:"match"`
	ReadCrosses  bool   `json:"read_crosses,omitempty"`
	WriteCrosses bool   `json:"write_crosses,omitempty"`
	Secret       bool   `json:"secret,omitempty"`
	Memory       bool   `json:"memory,omitempty"`
}

// Review declares the consequence classes and target patterns that need a
// review (approval_required) unless a preauthorization covers the call.
// Tools (tool patterns) and Surfaces (surface ids or patterns) name
// calls that need a review whatever their class or target.
type Review struct {
	Classes  []string `json:"classes,omitempty"`
	Targets  []string `json:"targets,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	Surfaces []string `json:"surfaces,omitempty"`
}

// Examples are strings a shape rule must match (Hit) and must not match
// (Miss); Parse checks them, so a rule carries its own tests.
type Examples struct {
	Hit  []string `json:"hit,omitempty"`
	Miss []string `json:"miss,omitempty"`
}

// ShapeRule recognizes a known-dangerous form of call by a regular
// expression (RE2 syntax) over the call's sink fields or its canonical
// target, and denies or escalates it.
type ShapeRule struct {
	ID          string   `json:"id"`
	Description string   `json:"description,omitempty"`
	Surfaces    []string `json:"surfaces,omitempty"` // surface ids or patterns; all when empty
	In          []string `json:"in,omitempty"`       // "sinks", "target"; both when empty
	Match       string   `json:"match"`
	Action      string   `json:"action"` // "deny" or "escalate"
	Examples    Examples `json:"examples,omitzero"`
}

// Quota bounds, per worker or per lane, the permits in a fixed window of
// the control-plane clock: their number, cumulative amount and bytes.
type Quota struct {
	ID       string   `json:"id"`
	Lanes    []string `json:"lanes,omitempty"`
	Workers  []string `json:"workers,omitempty"`
	Per      string   `json:"per"` // "worker" or "lane"
	Window   Duration `json:"window"`
	Requests *uint64  `json:"requests,omitempty"`
	Amount   *uint64  `json:"amount,omitempty"`
	Bytes    *uint64  `json:"bytes,omitempty"`
}

// Counts reports whether a call declaring amount and bytes counts against
// q: always when q limits requests, else when it declares some of what q
// limits.
func (q *Quota) Counts(amount, bytes uint64) bool {
	return quotaCounts(q.Requests, q.Amount, q.Bytes, amount, bytes)
}

func quotaCounts(requests, amountLimit, bytesLimit *uint64, amount, bytes uint64) bool {
	return requests != nil || amountLimit != nil && amount > 0 || bytesLimit != nil && bytes > 0
}

// Ledger configures the effect ledger: how long a permitted
// boundary-crossing effect is remembered, and whether its key is per
// worker, per lane or fleet-wide.
type Ledger struct {
	Window Duration `json:"window,omitempty"`
	Scope  string   `json:"scope,omitempty"`
}

// Provenance declares how much authority content carries by where it came
// from, what the sink fields of consequential calls must trace to, which
// sources may never leave the declared domains, and which paths are
// memory. Levels are evidence, preference, instruction and policy.
//
// Channels maps a channel (user_prompt, instruction_file, file_read,
// tool_result, web_fetch, peer_message, model_output) to its level; an
// unlisted channel is evidence, except user_prompt and instruction_file,
// which are instruction unless listed. Derived content always takes the
// lowest level of its origins and cannot be given a level. Paths and Tools
// raise file reads (file_read, instruction_file) under a path pattern, or
// results (tool_result) of a designated tool, to a level: the highest
// matching entry wins when it is above the channel's level; an entry never
// lowers it. See SourceAuthority, ProtectedSource and Judge.
type Provenance struct {
	Channels    map[string]string `json:"channels,omitempty"`
	Paths       []LevelRule       `json:"paths,omitempty"`
	Tools       []LevelRule       `json:"tools,omitempty"`
	Require     []AuthorityRule   `json:"require,omitempty"`
	Protected   ProtectedSources  `json:"protected,omitzero"`
	MemoryPaths []string          `json:"memory_paths,omitempty"`
	// Resources raise tool results whose registration carries the
	// resource they came from (a surface's result_from) to a level, by
	// a pattern over the canonical resource ("url:https://wiki.internal/*",
	// "raw:inbox/*", "path:/home/u/bills/*"); like Paths and Tools, an
	// entry never lowers the channel's level.
	Resources []LevelRule `json:"resources,omitempty"`
}

// IsZero reports whether the section is empty (no entry in any list or
// map), so that an empty section is left out of the canonical form.
func (p Provenance) IsZero() bool {
	return len(p.Channels) == 0 && len(p.Paths) == 0 && len(p.Tools) == 0 && len(p.Require) == 0 &&
		p.Protected.IsZero() && len(p.MemoryPaths) == 0 && len(p.Resources) == 0
}

// LevelRule gives content matching Match (a path or tool pattern) a level.
type LevelRule struct {
	Match     string `json:"match"`
	Authority string `json:"authority"`
}

// AuthorityRule requires the sink fields of matching calls to trace to
// content of at least Authority. It matches calls on Surfaces (ids or
// patterns) or Consequences (classes); both empty match every surface.
// Fields names the argument fields checked; empty means every sink field
// and the target field of the surface. EveryArg checks every argument of
// the call instead (strings and numbers; for tools whose schema is not
// known in advance). ExceptSurfaces and ExceptConsequences exempt calls
// the rule would otherwise cover. Approval lets the owner approve a call
// that falls short (approval_required) instead of denying it.
type AuthorityRule struct {
	ID                 string   `json:"id"`
	Surfaces           []string `json:"surfaces,omitempty"`
	Consequences       []string `json:"consequences,omitempty"`
	Fields             []string `json:"fields,omitempty"`
	Authority          string   `json:"authority"`
	Approval           bool     `json:"approval,omitempty"`
	EveryArg           bool     `json:"every_arg,omitempty"`
	ExceptSurfaces     []string `json:"except_surfaces,omitempty"`
	ExceptConsequences []string `json:"except_consequences,omitempty"`
}

// ResultSchema declares the shape of the structured results of one tool
// surface's tools (all of them, or those matching Tools): per field, by
// JSON pointer ("/messages/*/sender", where a "*" segment is any array
// index), whether the system producing the result attests it (class
// attested, with the level it lends: a value equal to the whole field
// takes that level) or it is content others write (class content, which
// keeps the channel's level). A field no schema names keeps the channel's
// level: declaring is how an operator widens authority, never the default.
// An attested field counts only for results of the tool it is declared
// for, through the tool_result channel, and only for a value equal to the
// whole field; see docs/provenance.md for the residual risk.
type ResultSchema struct {
	Surface string        `json:"surface"`
	Tools   []string      `json:"tools,omitempty"`
	Fields  []ResultField `json:"fields"`
}

// ResultField is one field of a result schema: Pointer, Class (attested or
// content) and, for an attested field, Authority (preference, instruction
// or policy).
type ResultField struct {
	Pointer   string `json:"pointer"`
	Class     string `json:"class"`
	Authority string `json:"authority,omitempty"`
}

// ProtectedSources are secret-bearing: content from them matched in a
// sink or target field of a call whose material leaves the declared
// domains (egress allow-list, trust domains; see docs/policy.md) is
// refused (protected_transfer). Channels, path patterns and tool patterns.
type ProtectedSources struct {
	Channels []string `json:"channels,omitempty"`
	Paths    []string `json:"paths,omitempty"`
	Tools    []string `json:"tools,omitempty"`
}

// IsZero reports whether no protected channel, path or tool is listed.
func (p ProtectedSources) IsZero() bool {
	return len(p.Channels) == 0 && len(p.Paths) == 0 && len(p.Tools) == 0
}

// Policy is a parsed, validated policy document. Fields after Workers
// belong to version 2.
type Policy struct {
	Version           int               `json:"version"`
	DefaultTTL        Duration          `json:"default_ttl"`
	Lanes             map[string]Lane   `json:"lanes"`
	Workers           map[string]string `json:"workers,omitempty"` // worker -> lane, when pinned
	Unpinned          string            `json:"unpinned,omitempty"`
	Workspace         string            `json:"workspace,omitempty"`
	Surfaces          []Surface         `json:"surfaces,omitempty"`
	Allow             []Rule            `json:"allow,omitempty"`
	Deny              []Rule            `json:"deny,omitempty"`
	Preauthorizations []Preauth         `json:"preauthorizations,omitempty"`
	Boundaries        Boundaries        `json:"boundaries,omitzero"`
	Review            Review            `json:"review,omitzero"`
	ShapeRules        []ShapeRule       `json:"shape_rules,omitempty"`
	Quotas            []Quota           `json:"quotas,omitempty"`
	Ledger            Ledger            `json:"ledger,omitzero"`
	Provenance        Provenance        `json:"provenance,omitzero"`
	Routes            []Route           `json:"routes,omitempty"`
	Results           []ResultSchema    `json:"results,omitempty"`

	c *compiled // version 2: built by Parse
}

// legacyDoc and legacyLane are the version 1 canonical form, field for
// field what version 1 of this package wrote: digests of version 1
// documents must not change.
type legacyDoc struct {
	Version    int                   `json:"version"`
	DefaultTTL Duration              `json:"default_ttl"`
	Lanes      map[string]legacyLane `json:"lanes"`
	Workers    map[string]string     `json:"workers,omitempty"`
}

type legacyLane struct {
	Tools []string `json:"tools"`
	Deny  []string `json:"deny,omitempty"`
	TTL   Duration `json:"ttl,omitempty"`
}

// laneV2 is a version 2 lane's canonical form.
type laneV2 struct {
	TTL          Duration `json:"ttl,omitempty"`
	Surfaces     []string `json:"surfaces,omitempty"`
	Consequences []string `json:"consequences,omitempty"`
	Workspace    string   `json:"workspace,omitempty"`
}

// docV2 is a version 2 document's canonical form.
type docV2 struct {
	Version           int               `json:"version"`
	DefaultTTL        Duration          `json:"default_ttl"`
	Lanes             map[string]laneV2 `json:"lanes"`
	Workers           map[string]string `json:"workers,omitempty"`
	Unpinned          string            `json:"unpinned,omitempty"`
	Workspace         string            `json:"workspace,omitempty"`
	Surfaces          []Surface         `json:"surfaces,omitempty"`
	Allow             []Rule            `json:"allow,omitempty"`
	Deny              []Rule            `json:"deny,omitempty"`
	Preauthorizations []Preauth         `json:"preauthorizations,omitempty"`
	Boundaries        Boundaries        `json:"boundaries,omitzero"`
	Review            Review            `json:"review,omitzero"`
	ShapeRules        []ShapeRule       `json:"shape_rules,omitempty"`
	Quotas            []Quota           `json:"quotas,omitempty"`
	Ledger            Ledger            `json:"ledger,omitzero"`
	Provenance        Provenance        `json:"provenance,omitzero"`
	Routes            []Route           `json:"routes,omitempty"`
	Results           []ResultSchema    `json:"results,omitempty"`
}

// Canonical returns the document's canonical JSON (encoding/json sorts map
// keys), the form that is committed to the log and carried by epoch events.
// Version 1 documents keep the exact form version 1 of writ wrote.
func (p *Policy) Canonical() []byte {
	var v any
	if p.Version == SchemaVersion {
		d := docV2{
			Version: p.Version, DefaultTTL: p.DefaultTTL, Workers: p.Workers, Unpinned: p.Unpinned,
			Workspace: p.Workspace, Surfaces: p.Surfaces, Allow: p.Allow, Deny: p.Deny,
			Preauthorizations: p.Preauthorizations, Boundaries: p.Boundaries, Review: p.Review,
			ShapeRules: p.ShapeRules, Quotas: p.Quotas, Ledger: p.Ledger, Provenance: p.Provenance,
			Routes: p.Routes, Results: p.Results,
		}
		if p.Lanes != nil {
			d.Lanes = make(map[string]laneV2, len(p.Lanes))
			for name, l := range p.Lanes {
				d.Lanes[name] = laneV2{TTL: l.TTL, Surfaces: l.Surfaces, Consequences: l.Consequences, Workspace: l.Workspace}
			}
		}
		v = d
	} else {
		d := legacyDoc{Version: p.Version, DefaultTTL: p.DefaultTTL, Workers: p.Workers}
		if p.Lanes != nil {
			d.Lanes = make(map[string]legacyLane, len(p.Lanes))
			for name, l := range p.Lanes {
				d.Lanes[name] = legacyLane{Tools: l.Tools, Deny: l.Deny, TTL: l.TTL}
			}
		}
		v = d
	}
	b, _ := json.Marshal(v) // cannot fail: strings, numbers, maps and slices only
	return b
}

// Digest is SHA-256 of the canonical document.
func (p *Policy) Digest() events.Hash { return events.Sum(p.Canonical()) }

// Parse decodes and validates a JSON policy document of either version. The
// document is read strictly, because it is the trust root and other tools
// will read it too: field names must match exactly (encoding/json alone
// would accept "Version" or "TTL"), unknown fields, duplicate keys, wrongly
// typed values and trailing data are rejected, and every error names the
// field. A version 2 document is compiled for Judge.
func Parse(raw []byte) (*Policy, error) {
	if len(raw) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: document is %d bytes, limit %d", ErrInvalid, len(raw), MaxDocumentBytes)
	}
	sh := documentShapeV1
	if probeVersion(raw) == SchemaVersion {
		sh = documentShapeV2
	}
	if err := checkShape(raw, sh); err != nil {
		return nil, err
	}
	var p Policy
	if err := json.Unmarshal(raw, &p); err != nil {
		// checkShape admits only documents that unmarshal.
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if p.Version == SchemaVersion {
		c, err := compile(&p)
		if err != nil {
			return nil, err
		}
		p.c = c
		return &p, nil
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the document; errors wrap ErrInvalid and name the
// offending field (for example lanes.isolated.ttl or workers.w1).
func (p *Policy) Validate() error {
	switch p.Version {
	case LegacyVersion:
		return p.validateLegacy()
	case SchemaVersion:
		_, err := compile(p)
		return err
	}
	return fmt.Errorf("%w: %w: version: got %d, this build reads %d and %d", ErrInvalid, ErrVersion, p.Version, LegacyVersion, SchemaVersion)
}
