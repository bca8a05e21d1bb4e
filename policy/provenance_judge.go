package policy

import (
	"sort"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
)

// MaxGrounds bounds Judgement.Grounds: when more lines would be written,
// the first MaxGrounds-1 are kept and the last line says how many were
// left out ("truncated=<n>").
const MaxGrounds = 64

// maxDetailSources bounds the source ids a refusal's detail names.
const maxDetailSources = 8

// provCheck is the provenance step's view of one call.
type provCheck struct {
	c       *compiled
	r       *Request
	origins map[string][]*FieldOrigin // by leaf pointer; built on first use
	checked map[string]bool           // leaf pointers the step examined
}

// originsOf returns the field origins the request gives for a leaf (more
// than one only if the request repeats a field; each counts).
func (pc *provCheck) originsOf(leaf string) []*FieldOrigin {
	if pc.origins == nil {
		pc.origins = make(map[string][]*FieldOrigin, len(pc.r.Provenance))
		for i := range pc.r.Provenance {
			o := &pc.r.Provenance[i]
			pc.origins[o.Field] = append(pc.origins[o.Field], o)
		}
	}
	return pc.origins[leaf]
}

// check records that the step examined a leaf.
func (pc *provCheck) check(leaf string) {
	if pc.checked == nil {
		pc.checked = map[string]bool{}
	}
	pc.checked[leaf] = true
}

// sourceLevel is the level a matched source lends: its registry level, or
// Evidence when the id is not registered.
func sourceLevel(s *SourceFact) authority.Level {
	if !s.Registered {
		return authority.Evidence
	}
	return authority.Lowest(s.Authority)
}

// leafLevel is the authority of one scalar leaf, the lowest over the
// origins the request gives for it (Evidence when it gives none). An
// origin in which one registered source contains the entire raw value
// (Whole) has the highest level among such sources: the value is exactly
// something that source said, and its also appearing in other content (a
// tool echoing the amount it was sent) takes nothing away. Otherwise an
// origin with no sources, or whose matches do not cover the whole value,
// is Evidence (part of the value is model-made), and a covered one has the
// lowest level of its sources (the value was pieced together from them).
// below collects the sources under want when the leaf falls short, and
// modelMade whether part of the value traced to nothing.
func (pc *provCheck) leafLevel(leaf string, want authority.Level, below map[string]bool) (level authority.Level, modelMade bool) {
	os := pc.originsOf(leaf)
	if len(os) == 0 {
		return authority.Evidence, true
	}
	level = authority.Policy
	for _, o := range os {
		ol, mm := pc.originLevel(o)
		level, modelMade = min(level, ol), modelMade || mm
	}
	if level < want {
		for _, o := range os {
			for i := range o.Sources {
				if l, _ := pc.factLevel(&o.Sources[i]); l < want {
					below[o.Sources[i].ID] = true
				}
			}
		}
	}
	return level, modelMade
}

// originLevel is the level of one field origin (see leafLevel). A whole
// source lends its registry level, raised by an attested result field the
// value equals whole (see factLevel).
func (pc *provCheck) originLevel(o *FieldOrigin) (authority.Level, bool) {
	best, whole := authority.Evidence, false
	for i := range o.Sources {
		if s := &o.Sources[i]; s.Whole && s.Registered {
			l, _ := pc.factLevel(s)
			whole, best = true, max(best, l)
		}
	}
	if whole {
		return best, false
	}
	if len(o.Sources) == 0 || !o.Covered {
		return authority.Evidence, true
	}
	level := authority.Policy
	for i := range o.Sources {
		level = min(level, sourceLevel(&o.Sources[i]))
	}
	return level, false
}

// factLevel is the level one matched source lends a value: its registry
// level (sourceLevel), raised to the level of an attested field of its
// structured result when the source is registered to the caller, came
// through tool_result from the tool the schema declares, contains the
// whole value (Whole), and the value equals that field whole. A value
// found only inside a field (a body quoting a name), in a field no schema
// attests, or in a derived source never takes an attested level. The
// pointer of the field that raised it is returned ("" when none did).
func (pc *provCheck) factLevel(s *SourceFact) (authority.Level, string) {
	level := sourceLevel(s)
	if !s.Registered || !s.Whole || len(s.Fields) == 0 || pc.c == nil {
		return level, ""
	}
	at := ""
	for _, f := range s.Fields {
		if !f.Whole {
			continue
		}
		if l, ok := pc.c.resultFieldLevel(s.Channel, s.Tool, f.Pointer); ok && l > level {
			level, at = l, f.Pointer
		}
	}
	return level, at
}

// surfaceFields are the fields an empty require rule and the transfer
// check read: the surface's sinks, then its target field when it is not
// also a sink.
func surfaceFields(s *cSurface) []string {
	out := append([]string(nil), s.sinks...)
	if s.hasTarget && !contains(out, s.targetPtr) {
		out = append(out, s.targetPtr)
	}
	for _, ptr := range s.x.also {
		if !contains(out, ptr) {
			out = append(out, ptr)
		}
	}
	return out
}

// authorityMiss is one require rule a call falls short of.
type authorityMiss struct {
	rule, field string
	level, want authority.Level
	sources     []string
	modelMade   bool
	noArgs      bool
}

// judgeProvenance is Judge's provenance step; it returns true with the
// refusal in j when the call is refused. The outcomes, strongest first:
// a protected source leaving through a boundary crossing (deny
// protected_transfer), a field below a require rule without approval
// (deny authority_too_low), a write to a memory path (approval_required
// memory_write_review), a field below a require rule with approval
// (approval_required authority_review). Grounds are set either way.
func (c *compiled) judgeProvenance(j *Judgement, r *Request, si int, f *facts, crossing []string) (Judgement, bool) {
	pv := &c.prov
	if !pv.active() {
		return Judgement{}, false
	}
	s := f.s
	pc := &provCheck{c: c, r: r}

	// a. Protected content leaving the declared domains.
	exit := leavesDomains(f, crossing)
	fields := surfaceFields(s)
	if r.Features&FeatureProtectedUndeclared != 0 {
		if exit == "" && !f.hasTargets() && (s.consequence == "remote_query" || s.consequence == "outbound_send") {
			exit = exitUndeclared
		}
		if (len(fields) == 0 || strings.HasPrefix(r.Tool, "mcp__")) && r.Args.Carried {
			// An MCP server is handed the whole argument object, and a
			// surface that names no field cannot say which ones carry
			// content: every argument can leave.
			fields = everyArgFields(r.Args)
		}
	}
	if exit != "" && pv.hasProtected() {
		var hitField, hitSource string
		for _, ptr := range fields {
			for _, leaf := range r.Args.Under(ptr) {
				pc.check(leaf.Path)
				if hitSource != "" {
					continue
				}
				for _, o := range pc.originsOf(leaf.Path) {
					for _, src := range sortedSources(o.Sources) {
						if c.protectedSource(src.Channel, src.Path, src.Tool) {
							hitField, hitSource = leaf.Path, src.ID
							break
						}
					}
					if hitSource != "" {
						break
					}
				}
			}
		}
		if hitSource != "" {
			j.Grounds = pc.grounds()
			return j.refuse(grants.Deny, grants.ReasonProtectedTransfer, hitField+" free of protected content",
				hitField+" carries protected source "+hitSource+" across "+exit, "provenance:protected"), true
		}
	}

	// c. Authority of the fields each require rule names.
	var applied []string
	var deny, review *authorityMiss
	for i := range pv.require {
		a := &pv.require[i]
		if !a.applies(si, s.class) {
			continue
		}
		applied = append(applied, "authority:"+a.id)
		fields := a.fields
		switch {
		case a.x.everyArg:
			fields = everyArgFields(r.Args)
			if !r.Args.Carried {
				fields = []string{"(every argument)"}
			}
		case len(fields) == 0:
			fields = surfaceFields(s)
		}
		if r.Features&FeatureAuthorityUncarried != 0 && !a.x.everyArg && r.Args.Carried && !carriesAny(r.Args, fields) {
			// None of the fields the rule reads is in the call: it names
			// its target some other way, so every argument must trace.
			fields = everyArgFields(r.Args)
		}
		for _, ptr := range fields {
			var m *authorityMiss
			if !r.Args.Carried {
				m = &authorityMiss{rule: a.id, field: ptr, want: a.level, noArgs: true}
			} else {
				leaves := r.Args.Under(ptr)
				if len(leaves) == 0 {
					continue // the call does not carry this field
				}
				below := map[string]bool{}
				level, modelMade := authority.Policy, false
				for _, leaf := range leaves {
					pc.check(leaf.Path)
					l, mm := pc.leafLevel(leaf.Path, a.level, below)
					level, modelMade = min(level, l), modelMade || mm
				}
				if level >= a.level {
					continue
				}
				m = &authorityMiss{rule: a.id, field: ptr, level: level, want: a.level, sources: sortedKeys(below), modelMade: modelMade}
			}
			if a.approval {
				if review == nil {
					review = m
				}
			} else if deny == nil {
				deny = m
			}
		}
	}
	j.Grounds = pc.grounds()
	if deny != nil {
		return j.refuse(grants.Deny, grants.ReasonAuthorityTooLow, deny.missing(), deny.detail(), "authority:"+deny.rule), true
	}

	// b. Writes to memory paths are held for the owner.
	if s.hasTarget && s.canon == CanonPath && isWrite(s) {
		for _, t := range f.targets() {
			for _, g := range pv.memory {
				if g.Match(t.Path) {
					return j.refuse(grants.ApprovalRequired, grants.ReasonMemoryWrite, "owner review of a write to memory path "+g.String(),
						"the write to "+t.Emit+" is recorded as a draft (target and argument digest) until the owner approves it",
						"memory:"+g.String()), true
				}
			}
		}
	}
	for _, p := range f.patchFiles {
		for _, g := range pv.memory {
			if g.Match(p) {
				return j.refuse(grants.ApprovalRequired, grants.ReasonMemoryWrite, "owner review of a write to memory path "+g.String(),
					"the patch writes "+p+"; it is recorded as a draft (argument digest) until the owner approves it",
					"memory:"+g.String()), true
			}
		}
	}
	if s.x.memory {
		return j.refuse(grants.ApprovalRequired, grants.ReasonMemoryWrite, "owner review of a write to agent memory by surface "+s.id,
			"this "+r.Tool+" call writes the agent's memory or history; it is recorded as a draft (argument digest) until the owner approves it",
			"memory:surface:"+s.id), true
	}
	if review != nil {
		return j.refuse(grants.ApprovalRequired, grants.ReasonAuthorityReview, review.missing(), review.detail(), "authority:"+review.rule), true
	}
	j.Rules = append(j.Rules, applied...)
	return Judgement{}, false
}

// carriesAny reports whether the call's arguments hold a value under any
// of fields.
func carriesAny(flat args.Flat, fields []string) bool {
	for _, ptr := range fields {
		if len(flat.Under(ptr)) > 0 {
			return true
		}
	}
	return false
}

// isWrite reports whether a surface's calls change what they target:
// anything but a read (operation "read" or consequence local_read).
func isWrite(s *cSurface) bool {
	return s.operation != "read" && s.consequence != "local_read"
}

func (m *authorityMiss) missing() string {
	return m.field + " traced to " + m.want.String()
}

func (m *authorityMiss) detail() string {
	if m.noArgs {
		return "rule " + m.rule + ": the call's arguments were not forwarded, so " + m.field + " cannot be traced"
	}
	var who []string
	for i, id := range m.sources {
		if i == maxDetailSources {
			who = append(who, "+"+strconv.Itoa(len(m.sources)-i)+" more")
			break
		}
		who = append(who, "source "+id)
	}
	if m.modelMade {
		who = append(who, "model-made")
	}
	return "rule " + m.rule + ": " + m.field + " is " + m.level.String() + " (" + strings.Join(who, ", ") + ")"
}

// sortedSources returns the sources ordered by id (stable for equal ids).
func sortedSources(ss []SourceFact) []SourceFact {
	if sort.SliceIsSorted(ss, func(a, b int) bool { return ss[a].ID < ss[b].ID }) {
		return ss
	}
	out := append([]SourceFact(nil), ss...)
	sort.SliceStable(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// grounds writes one line per source of every examined leaf, by leaf
// pointer and then source id:
//
//	field=<ptr> source=<id> authority=<level> counter=<key>=<n> transform=<t>[ part=<p>][ whole| partial][ from=<tool>:<result ptr>[ attested]]
//	field=<ptr> model_made authority=evidence
//
// from= names the field of the source's structured result the value came
// from (receipt format 10), "attested" when that field lent its level.
// The second form is a leaf the request traces to nothing (no origin, or
// an origin with no sources). "whole" marks a source that alone contains
// the entire raw value; "partial" sources of a value the matches do not
// wholly cover. An unregistered source writes counter=none; an empty
// transform is written raw. Values with blanks, quotes, '=' or control
// characters are quoted (Go syntax). At most MaxGrounds lines.
func (pc *provCheck) grounds() []string {
	if len(pc.checked) == 0 {
		return nil
	}
	leaves := sortedKeys(pc.checked)
	var out []string
	total := 0
	add := func(line string) {
		total++
		if len(out) < MaxGrounds {
			out = append(out, line)
		}
	}
	for _, leaf := range leaves {
		fv := "field=" + groundsValue(leaf)
		os := pc.originsOf(leaf)
		wrote := false
		for _, o := range os {
			for _, src := range sortedSources(o.Sources) {
				wrote = true
				var b strings.Builder
				b.WriteString(fv)
				b.WriteString(" source=" + groundsValue(src.ID))
				level, attested := pc.factLevel(&src)
				b.WriteString(" authority=" + level.String())
				if src.Counter.Key != "" {
					b.WriteString(" counter=" + groundsValue(src.Counter.Key) + "=" + strconv.FormatUint(src.Counter.Value, 10))
				} else {
					b.WriteString(" counter=none")
				}
				t := src.Transform
				if t == "" {
					t = "raw"
				}
				b.WriteString(" transform=" + groundsValue(t))
				if src.Part != "" {
					b.WriteString(" part=" + groundsValue(src.Part))
				}
				if src.Whole {
					b.WriteString(" whole")
				} else if !o.Covered {
					b.WriteString(" partial")
				}
				if ref := resultRefOf(&src, attested); ref != "" {
					b.WriteString(" from=" + groundsValue(src.Tool+":"+ref))
					if attested != "" {
						b.WriteString(" attested")
					}
				}
				add(b.String())
			}
		}
		if !wrote {
			add(fv + " model_made authority=evidence")
		}
	}
	if total > MaxGrounds {
		out = append(out[:MaxGrounds-1], "truncated="+strconv.Itoa(total-(MaxGrounds-1)))
	}
	return out
}

// resultRefOf is the result field a grounds line names for a source: the
// attested field that raised it, else the first field the value equals
// whole, else the first field containing it; "" when the source reported
// none.
func resultRefOf(s *SourceFact, attested string) string {
	if attested != "" {
		return attested
	}
	for _, f := range s.Fields {
		if f.Whole {
			return f.Pointer
		}
	}
	if len(s.Fields) > 0 {
		return s.Fields[0].Pointer
	}
	return ""
}

// groundsValue writes a value into a grounds line: as is when it is
// printable and has no blank, quote or '='; quoted otherwise.
func groundsValue(s string) string {
	if s == "" {
		return `""`
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == '"' || b == '=' || b >= 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}

// exitUndeclared is the exit of a remote call that names no destination
// (FeatureProtectedUndeclared): its arguments go to a service whose host
// the issuer cannot check.
const exitUndeclared = "a remote call with no destination to check"

// leavesDomains returns the crossing through which the call's material
// leaves the declared domains, or "" when it stays inside them: a URL host
// outside boundaries.egress_allow or a recipient outside
// boundaries.trust_domains leaves; so does a call of a crossing class
// whose destination cannot be placed in a domain (a raw, digest or shell
// target, or none). A crossing class with a URL or email destination
// inside the declared domains stays, as do protected-path and workspace
// crossings (the material stays on the host).
func leavesDomains(f *facts, crossing []string) string {
	class := ""
	for _, c := range crossing {
		switch {
		case c == "boundary:egress" || c == "boundary:trust_domain":
			return c
		case strings.HasPrefix(c, "boundary:class:") && class == "":
			class = c
		}
	}
	if class != "" && !(f.hasTargets() && (f.s.canon == CanonURL || f.s.canon == CanonEmail)) {
		return class
	}
	return ""
}
