package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/lanes"
)

// FieldOrigin is what the issuer knows of one argument field's provenance
// when it judges a grant request: the registered sources the worker
// traced the value to and whether raw matches cover the whole value.
type FieldOrigin struct {
	Field   string
	Covered bool
	Sources []SourceFact // sorted by ID, one per source
}

// SourceFact is one source a field matched, as the issuer's replicated
// registry describes it. An unregistered id has Registered false and
// Authority Evidence. Counter is the source's revocation counter as the
// grant binds it; Transform and Part say how the value matched.
type SourceFact struct {
	ID         string
	Registered bool
	Authority  authority.Level
	Channel    string
	Path       string
	Tool       string
	Counter    events.Counter
	Transform  string
	Part       string
	// Whole: this source alone contains the entire raw value, so the
	// value is exactly something it said (see leaf levels in Judge).
	Whole bool
	// Fields are the fields of the source's structured result the value
	// was found in (receipt format 10 and later): with Whole set on the
	// ref, the value equals that field whole; otherwise the field
	// contains it. A whole ref to a field the policy's result schemas
	// make attested lends the field's level (see ResultSchema).
	Fields []ResultRef
}

// ResultRef names one field of a source's structured result by JSON
// pointer (RFC 6901, with concrete array indexes: /messages/3/sender).
type ResultRef struct {
	Pointer string
	Whole   bool
}

// provChannels are the channels a document may give a level or protect.
var provChannels = []string{
	authority.ChannelUserPrompt, authority.ChannelInstructionFile, authority.ChannelFileRead, authority.ChannelToolResult,
	authority.ChannelWebFetch, authority.ChannelPeerMessage, authority.ChannelModelOutput,
}

// defaultChannelLevel is a channel's level when the document does not list
// it: what the user typed and the instruction files the user keeps are
// instruction; everything else (tool results, pages, files read, peers,
// the model's own words) is evidence.
func defaultChannelLevel(channel string) authority.Level {
	switch channel {
	case authority.ChannelUserPrompt, authority.ChannelInstructionFile:
		return authority.Instruction
	}
	return authority.Evidence
}

// cProvenance is the compiled provenance section.
type cProvenance struct {
	channels  map[string]authority.Level // listed channels only
	paths     []cLevelRule
	tools     []cLevelRule
	require   []cAuthority
	protChan  map[string]bool
	protPaths []lanes.Glob
	protTools []lanes.Glob
	memory    []lanes.Glob
	// Added with surface memory sinks and resource levels (surfaces_ext.go).
	memorySurfaces bool
	resources      []cLevelRule
}

type cLevelRule struct {
	g     lanes.Glob
	level authority.Level
}

type cAuthority struct {
	id       string
	surfaces []bool // by surface index; nil or all false with classes: see applies
	classes  [nClasses]bool
	any      bool     // neither surfaces nor consequences given: every surface
	fields   []string // JSON pointers; empty: the surface's sinks and target
	level    authority.Level
	approval bool
	x        authorityExt
}

// applies reports whether the rule covers calls on surface si of class.
func (a *cAuthority) applies(si, class int) bool {
	return (a.any || a.surfaces != nil && a.surfaces[si] || a.classes[class]) && !a.x.exempt(si, class)
}

// active reports whether any provenance check can apply to a call: a
// policy without require rules, protected sources or memory paths judges
// exactly as if the section were absent.
func (pv *cProvenance) active() bool {
	return len(pv.require) > 0 || pv.hasProtected() || len(pv.memory) > 0 || pv.memorySurfaces
}

func (pv *cProvenance) hasProtected() bool {
	return len(pv.protChan) > 0 || len(pv.protPaths) > 0 || len(pv.protTools) > 0
}

// SourceAuthority is the level the policy gives content from a channel,
// a file path (file reads) or a tool (tool results): the channel's level
// from provenance.channels, raised by the highest matching paths entry
// (file_read and instruction_file with a path) or tools entry
// (tool_result with a tool); an entry never lowers the channel's level.
// A channel the document does not list is Evidence, except user_prompt
// and instruction_file, which are Instruction. Derived content (and any
// unknown channel) is Evidence here: the state machine gives derived
// content the lowest level of its origins. Under a version 1 policy, a
// nil policy or one that was not parsed, the defaults apply. A path is
// cleaned first; a relative path, or one with control characters, raises
// nothing. SourceAuthority is pure.
func (p *Policy) SourceAuthority(channel, path, tool string) authority.Level {
	c := p.compiledOrNil()
	if c == nil {
		return defaultChannelLevel(channel)
	}
	return c.sourceAuthority(channel, path, tool)
}

// ProtectedSource reports whether content from a source is secret-bearing
// under provenance.protected: its channel is listed, its path (raw or
// cleaned) matches a protected path pattern, or its tool matches a
// protected tool pattern. Under a version 1 policy, a nil policy or one
// that was not parsed, no source is protected. ProtectedSource is pure.
func (p *Policy) ProtectedSource(channel, path, tool string) bool {
	c := p.compiledOrNil()
	if c == nil {
		return false
	}
	return c.protectedSource(channel, path, tool)
}

// compiledOrNil returns the compiled version 2 document, or nil.
func (p *Policy) compiledOrNil() *compiled {
	if p == nil || p.Version != SchemaVersion {
		return nil
	}
	return p.c
}

func (pv *cProvenance) channelLevel(channel string) authority.Level {
	if channel == authority.ChannelDerived {
		return authority.Evidence
	}
	if l, ok := pv.channels[channel]; ok {
		return l
	}
	return defaultChannelLevel(channel)
}

func (pv *cProvenance) sourceAuthority(channel, p, tool string) authority.Level {
	level := pv.channelLevel(channel)
	switch channel {
	case authority.ChannelFileRead, authority.ChannelInstructionFile:
		if cp, ok := cleanSourcePath(p); ok {
			for _, r := range pv.paths {
				if r.level > level && r.g.Match(cp) {
					level = r.level
				}
			}
		}
	case authority.ChannelToolResult:
		if tool != "" {
			for _, r := range pv.tools {
				if r.level > level && r.g.Match(tool) {
					level = r.level
				}
			}
		}
	}
	return level
}

func (pv *cProvenance) protectedSource(channel, p, tool string) bool {
	if pv.protChan[channel] {
		return true
	}
	if p != "" {
		if anyMatch(pv.protPaths, p) {
			return true
		}
		if cp, ok := cleanSourcePath(p); ok && cp != p && anyMatch(pv.protPaths, cp) {
			return true
		}
	}
	return tool != "" && anyMatch(pv.protTools, tool)
}

// cleanSourcePath cleans an absolute or home-relative source path as
// canonical path targets are cleaned ("/a/../b" is "/b", "~/x/./y" is
// "~/x/y"), so that dot segments cannot make a path match a pattern it
// does not name. Anything else is not a path a pattern may raise.
func cleanSourcePath(p string) (string, bool) {
	if p == "" || hasControl(p) {
		return "", false
	}
	switch {
	case strings.HasPrefix(p, "/"):
		return path.Clean(p), true
	case p == "~" || strings.HasPrefix(p, "~/"):
		rest := path.Clean("/" + strings.TrimPrefix(p, "~"))
		if rest == "/" {
			return "~", true
		}
		return "~" + rest, true
	}
	return "", false
}

// parseLevel reads a level as a document writes it: exactly one of the
// lower-case names.
func parseLevel(s string) (authority.Level, error) {
	l, err := authority.ParseLevel(s)
	if err != nil || l.String() != s {
		return authority.Evidence, fmt.Errorf("want evidence, preference, instruction or policy, got %q", s)
	}
	return l, nil
}

// knownChannel checks a channel name a document gives a level or
// protects.
func knownChannel(ch string) error {
	if ch == authority.ChannelDerived {
		return fmt.Errorf("derived content takes the lowest level of its origins and its origins' protection; it cannot be listed")
	}
	if !contains(provChannels, ch) {
		return fmt.Errorf("unknown channel %q; want one of %s", ch, strings.Join(provChannels, ", "))
	}
	return nil
}

// compileProvenance validates and compiles the provenance section. It
// runs after the surfaces are compiled (require rules name them).
func (c *compiled) compileProvenance(p *Policy) error {
	pv := &p.Provenance
	out := cProvenance{}
	if len(pv.Channels) > 0 {
		out.channels = make(map[string]authority.Level, len(pv.Channels))
	}
	for _, ch := range sortedKeys(pv.Channels) {
		f := "provenance.channels." + ch
		if err := knownChannel(ch); err != nil {
			return invalid(f, "%v", err)
		}
		l, err := parseLevel(pv.Channels[ch])
		if err != nil {
			return invalid(f, "%v", err)
		}
		out.channels[ch] = l
	}
	var err error
	if out.paths, err = levelRules("provenance.paths", pv.Paths, pathPattern); err != nil {
		return err
	}
	if out.tools, err = levelRules("provenance.tools", pv.Tools, nil); err != nil {
		return err
	}
	if out.require, err = c.authorityRules(pv.Require); err != nil {
		return err
	}
	if len(pv.Protected.Channels) > maxEntries {
		return invalid("provenance.protected.channels", "more than %d entries", maxEntries)
	}
	for i, ch := range pv.Protected.Channels {
		if err := knownChannel(ch); err != nil {
			return invalid(fmt.Sprintf("provenance.protected.channels[%d]", i), "%v", err)
		}
		if out.protChan == nil {
			out.protChan = map[string]bool{}
		}
		out.protChan[ch] = true
	}
	if out.protPaths, err = globs("provenance.protected.paths", pv.Protected.Paths, pathPattern); err != nil {
		return err
	}
	if out.protTools, err = globs("provenance.protected.tools", pv.Protected.Tools, nil); err != nil {
		return err
	}
	if out.memory, err = globs("provenance.memory_paths", pv.MemoryPaths, pathPattern); err != nil {
		return err
	}
	c.prov = out
	return nil
}

func levelRules(field string, rules []LevelRule, check func(string) error) ([]cLevelRule, error) {
	if len(rules) > maxEntries {
		return nil, invalid(field, "more than %d entries", maxEntries)
	}
	out := make([]cLevelRule, 0, len(rules))
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		if r.Match == "" || len(r.Match) > maxPattern {
			return nil, invalid(f+".match", "pattern must be 1-%d bytes", maxPattern)
		}
		if check != nil {
			if err := check(r.Match); err != nil {
				return nil, invalid(f+".match", "%v", err)
			}
		}
		g, err := lanes.CompileGlob(r.Match)
		if err != nil {
			return nil, invalid(f+".match", "%v", err)
		}
		l, err := parseLevel(r.Authority)
		if err != nil {
			return nil, invalid(f+".authority", "%v", err)
		}
		out = append(out, cLevelRule{g: g, level: l})
	}
	return out, nil
}

func (c *compiled) authorityRules(rules []AuthorityRule) ([]cAuthority, error) {
	if len(rules) > maxEntries {
		return nil, invalid("provenance.require", "more than %d entries", maxEntries)
	}
	seen := map[string]bool{}
	out := make([]cAuthority, 0, len(rules))
	for i, r := range rules {
		f := fmt.Sprintf("provenance.require[%d]", i)
		if err := safeID(r.ID); err != nil {
			return nil, invalid(f+".id", "%v", err)
		}
		if seen[r.ID] {
			return nil, invalid(f+".id", "duplicate id %q", r.ID)
		}
		seen[r.ID] = true
		a := cAuthority{id: r.ID, approval: r.Approval, any: len(r.Surfaces) == 0 && len(r.Consequences) == 0}
		if len(r.Surfaces) > 0 {
			set, err := c.surfaceSet(f+".surfaces", r.Surfaces)
			if err != nil {
				return nil, err
			}
			a.surfaces = set
		}
		if len(r.Consequences) > maxEntries {
			return nil, invalid(f+".consequences", "more than %d entries", maxEntries)
		}
		classes, err := classSet(f+".consequences", r.Consequences)
		if err != nil {
			return nil, err
		}
		a.classes = classes
		if len(r.Fields) > maxEntries {
			return nil, invalid(f+".fields", "more than %d entries", maxEntries)
		}
		for j, fld := range r.Fields {
			if err := checkField(fmt.Sprintf("%s.fields[%d]", f, j), fld); err != nil {
				return nil, err
			}
			a.fields = append(a.fields, args.FieldPointer(fld))
		}
		l, err := parseLevel(r.Authority)
		if err != nil {
			return nil, invalid(f+".authority", "%v", err)
		}
		if l == authority.Evidence {
			return nil, invalid(f+".authority", "every value is at least evidence, so the rule would require nothing; want preference, instruction or policy")
		}
		a.level = l
		if err := c.authorityExt(f, r, &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
