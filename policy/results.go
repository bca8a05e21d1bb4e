package policy

import (
	"fmt"
	"strings"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/lanes"
)

// Result schemas: which fields of a tool surface's structured results the
// system producing them attests (the sender of a message, the counterparty
// of a transaction) and which are content anyone able to write into that
// system controls (a message body). See ResultSchema and docs/provenance.md.

// Result field classes.
const (
	// ClassAttested: the producing system sets the field (an identity, an
	// id); a value equal to the whole field takes the field's level.
	ClassAttested = "attested"
	// ClassContent: the field is text others write; it keeps the level of
	// the channel the result came through.
	ClassContent = "content"
)

// Bounds on result schemas.
const (
	maxPointerSegments = 32
)

// cResults is the compiled results section.
type cResults struct {
	schemas []cResultSchema
}

type cResultSchema struct {
	surface int          // surface index
	tools   []lanes.Glob // empty: every tool of the surface
	fields  []cResultField
}

type cResultField struct {
	pointer  string
	segs     []string // unescaped segments; "*" matches an array index
	attested bool
	level    authority.Level // attested only
}

// match reports whether the concrete pointer p (as the worker reports it:
// RFC 6901, escaped) names a leaf this field pattern covers: the same
// number of segments, each equal, or an array index where the pattern
// has "*".
func (f *cResultField) match(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.Count(p, "/") != len(f.segs) {
		return false
	}
	rest := p[1:]
	for _, seg := range f.segs {
		tok := rest
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			tok, rest = rest[:j], rest[j+1:]
		}
		if seg == "*" {
			if !isIndex(tok) {
				return false
			}
		} else if unescapePointer(tok) != seg {
			return false
		}
	}
	return true
}

// isIndex: an array index as RFC 6901 writes one (0, or digits without a
// leading zero).
func isIndex(s string) bool {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func unescapePointer(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// parsePointerPattern reads a result field pattern: a JSON pointer (RFC
// 6901) to a leaf of the result, in which a segment "*" stands for any
// array index.
func parsePointerPattern(p string) ([]string, error) {
	if p == "" || p == "/" || len(p) > maxPattern || hasControl(p) || !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("want a JSON pointer to a field of the result, such as /messages/*/sender (1-%d bytes, starting with /)", maxPattern)
	}
	segs := strings.Split(p[1:], "/")
	if len(segs) > maxPointerSegments {
		return nil, fmt.Errorf("more than %d segments", maxPointerSegments)
	}
	for i, s := range segs {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 >= len(s) || s[j+1] != '0' && s[j+1] != '1') {
				return nil, fmt.Errorf("bad JSON pointer escape in %q", p)
			}
		}
		if strings.Contains(s, "*") && s != "*" {
			return nil, fmt.Errorf("segment %q: a wildcard stands alone for a whole segment (\"*\": any array index)", s)
		}
		segs[i] = unescapePointer(s)
	}
	return segs, nil
}

// overlaps reports whether two patterns can name the same leaf.
func overlaps(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(a[i] == "*" && isIndex(b[i])) && !(b[i] == "*" && isIndex(a[i])) {
			return false
		}
	}
	return true
}

// compileResults validates and compiles the results section. It runs
// after the surfaces are compiled (schemas name them).
func (c *compiled) compileResults(p *Policy) error {
	if len(p.Results) > maxEntries {
		return invalid("results", "more than %d entries", maxEntries)
	}
	var ps problems
	out := cResults{}
	for i, r := range p.Results {
		f := fmt.Sprintf("results[%d]", i)
		si := -1
		for k := range c.surfaces {
			if c.surfaces[k].id == r.Surface {
				si = k
				break
			}
		}
		if si < 0 {
			ps.add(invalid(f+".surface", "no surface has id %q; a result schema describes the results of one declared surface", r.Surface))
			continue
		}
		tools, err := globs(f+".tools", r.Tools, nil)
		if err != nil {
			ps.add(err)
			continue
		}
		if len(r.Fields) == 0 {
			ps.add(invalid(f+".fields", "a result schema declares at least one field"))
			continue
		}
		if len(r.Fields) > maxEntries {
			ps.add(invalid(f+".fields", "more than %d entries", maxEntries))
			continue
		}
		sc := cResultSchema{surface: si, tools: tools}
		ok := true
		for j, rf := range r.Fields {
			ff := fmt.Sprintf("%s.fields[%d]", f, j)
			segs, err := parsePointerPattern(rf.Pointer)
			if err != nil {
				ps.add(invalid(ff+".pointer", "%v", err))
				ok = false
				continue
			}
			cf := cResultField{pointer: rf.Pointer, segs: segs}
			switch rf.Class {
			case ClassAttested:
				l, err := parseLevel(rf.Authority)
				if err != nil {
					ps.add(invalid(ff+".authority", "an attested field needs the level it lends: %v", err))
					ok = false
					continue
				}
				if l == authority.Evidence {
					ps.add(invalid(ff+".authority", "evidence lends nothing above the channel's level; want preference, instruction or policy, or class content"))
					ok = false
					continue
				}
				cf.attested, cf.level = true, l
			case ClassContent:
				if rf.Authority != "" {
					ps.add(invalid(ff+".authority", "a content field keeps the channel's level; remove authority or make the field attested"))
					ok = false
					continue
				}
			default:
				ps.add(invalid(ff+".class", "want attested or content, got %q", rf.Class))
				ok = false
				continue
			}
			for _, prev := range sc.fields {
				if overlaps(prev.segs, segs) {
					ps.add(invalid(ff+".pointer", "%s overlaps %s declared before it; each leaf of a result has one class", rf.Pointer, prev.pointer))
					ok = false
				}
			}
			sc.fields = append(sc.fields, cf)
		}
		if ok {
			out.schemas = append(out.schemas, sc)
		}
	}
	if err := ps.err(); err != nil {
		return err
	}
	c.results = out
	return nil
}

// resultFieldLevel is the level a result field lends a value equal to it
// whole: the attested level of the field in the schemas of the tool's
// surface, when the result came through the tool_result channel from that
// tool. Where schemas disagree (two schemas name the leaf), content wins
// and otherwise the lowest attested level: declaring only ever widens
// where every declaration agrees. ok is false when no schema makes the
// field attested.
func (c *compiled) resultFieldLevel(channel, tool, pointer string) (authority.Level, bool) {
	if channel != authority.ChannelToolResult || tool == "" || len(c.results.schemas) == 0 {
		return authority.Evidence, false
	}
	si := c.surfaceOf(tool)
	if si < 0 {
		return authority.Evidence, false
	}
	level, found := authority.Policy, false
	for i := range c.results.schemas {
		sc := &c.results.schemas[i]
		if sc.surface != si || (len(sc.tools) > 0 && !anyMatch(sc.tools, tool)) {
			continue
		}
		for k := range sc.fields {
			f := &sc.fields[k]
			if !f.match(pointer) {
				continue
			}
			if !f.attested {
				return authority.Evidence, false
			}
			level, found = min(level, f.level), true
		}
	}
	if !found {
		return authority.Evidence, false
	}
	return level, true
}

// ResultFieldClass names the class a result field has for results of
// tool on channel under the policy ("attested", "content" or "" when no
// schema names it) and, for an attested field, its level. Tools and
// documentation use it; Judge applies the same rule. It is pure.
func (p *Policy) ResultFieldClass(channel, tool, pointer string) (class string, level authority.Level) {
	c := p.compiledOrNil()
	if c == nil || channel != authority.ChannelToolResult {
		return "", authority.Evidence
	}
	if l, ok := c.resultFieldLevel(channel, tool, pointer); ok {
		return ClassAttested, l
	}
	si := c.surfaceOf(tool)
	for i := range c.results.schemas {
		sc := &c.results.schemas[i]
		if sc.surface != si || (len(sc.tools) > 0 && !anyMatch(sc.tools, tool)) {
			continue
		}
		for k := range sc.fields {
			if sc.fields[k].match(pointer) {
				return ClassContent, authority.Evidence
			}
		}
	}
	return "", authority.Evidence
}
