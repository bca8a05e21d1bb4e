package policy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/lanes"
)

// This file compiles and applies the document fields that let a policy
// describe real tool surfaces: list-valued and optional targets, egress
// and recipient domains as DNS names (per surface and for the whole
// document), memory sinks, results that carry the resource they came
// from, path properties declared one by one, reviews named by tool or
// surface, and require rules over every argument or with exemptions. A
// document that uses none of them compiles to a zero cExt and zero
// surfaceExt values, and every check below is then a no-op: such a
// document judges exactly as it did before these fields existed.

// Limits on the fields of this file.
const (
	// MaxListTargets bounds the elements of a list target.
	MaxListTargets = 64
	maxAlso        = 8
	maxDNSName     = 253
)

// ResultFromTarget is the one value of a surface's result_from.
const ResultFromTarget = "target"

// surfaceExt are a surface's added fields, compiled.
type surfaceExt struct {
	list, optional   bool
	also             []string // JSON pointers of further target fields
	egressDomains    []string
	recipientDomains []string
	memory           bool
	resultFrom       bool
}

// cExt are the document's added fields, compiled.
type cExt struct {
	egressDomains    []string
	recipientDomains []string
	readCross        []lanes.Glob // boundaries.paths with read_crosses
	writeCross       []lanes.Glob // boundaries.paths with write_crosses
	reviewTools      []lanes.Glob
	reviewSurfaces   []bool // by surface index; nil when none
}

// authorityExt are a require rule's added fields, compiled.
type authorityExt struct {
	everyArg       bool
	exceptSurfaces []bool
	exceptClasses  [nClasses]bool
}

func (x *authorityExt) exempt(si, class int) bool {
	return x.exceptSurfaces != nil && x.exceptSurfaces[si] || x.exceptClasses[class]
}

// authorityExt compiles a require rule's every_arg and exemptions.
func (c *compiled) authorityExt(f string, r AuthorityRule, a *cAuthority) error {
	a.x.everyArg = r.EveryArg
	if r.EveryArg && len(r.Fields) > 0 {
		return invalid(f+".every_arg", "every_arg checks every argument; leave fields out")
	}
	if len(r.ExceptSurfaces) > 0 {
		set, err := c.surfaceSet(f+".except_surfaces", r.ExceptSurfaces)
		if err != nil {
			return err
		}
		a.x.exceptSurfaces = set
	}
	if len(r.ExceptConsequences) > maxEntries {
		return invalid(f+".except_consequences", "more than %d entries", maxEntries)
	}
	classes, err := classSet(f+".except_consequences", r.ExceptConsequences)
	if err != nil {
		return err
	}
	a.x.exceptClasses = classes
	return nil
}

// compileExt compiles the added fields. It runs last: it reads the
// compiled surfaces and adds to the compiled boundaries and provenance.
func (c *compiled) compileExt(p *Policy) error {
	var ps problems
	for i, s := range p.Surfaces {
		if i >= len(c.surfaces) {
			break
		}
		f := fmt.Sprintf("surfaces[%d]", i)
		x := surfaceExt{list: s.Target.List, optional: s.Target.Optional, memory: s.Memory}
		if (x.list || x.optional) && s.Target.Field == "" {
			ps.add(invalid(f+".target", "list and optional describe a target field; name it in field"))
		}
		if x.list && s.Target.Canon == CanonShell {
			ps.add(invalid(f+".target.list", "a shell target is one command; a list of commands is not a target"))
		}
		switch {
		case len(s.Target.Also) > 0 && !x.list:
			ps.add(invalid(f+".target.also", "further target fields make a set of targets; set list: true"))
		case len(s.Target.Also) > maxAlso:
			ps.add(invalid(f+".target.also", "at most %d further target fields", maxAlso))
		default:
			for j, a := range s.Target.Also {
				af := fmt.Sprintf("%s.target.also[%d]", f, j)
				if err := checkField(af, a); err != nil {
					ps.add(err)
					continue
				}
				ptr := args.FieldPointer(a)
				if ptr == args.FieldPointer(s.Target.Field) || contains(x.also, ptr) {
					ps.add(invalid(af, "%q is already a target field", a))
					continue
				}
				x.also = append(x.also, ptr)
			}
		}
		var err error
		if x.egressDomains, err = dnsNames(f+".egress_domains", s.EgressDomains); err != nil {
			ps.add(err)
		}
		if x.recipientDomains, err = dnsNames(f+".recipient_domains", s.RecipientDomains); err != nil {
			ps.add(err)
		}
		switch s.ResultFrom {
		case "":
		case ResultFromTarget:
			if s.Target.Field == "" {
				ps.add(invalid(f+".result_from", "a result can come from the target only when the surface names one"))
			} else if s.Target.List || s.Target.Canon == CanonShell {
				ps.add(invalid(f+".result_from", "a result comes from one resource: not a list or a shell target"))
			}
			x.resultFrom = true
		default:
			ps.add(invalid(f+".result_from", "want %q, got %q", ResultFromTarget, s.ResultFrom))
		}
		if x.memory {
			if c.surfaces[i].class == classIndex("local_read") || s.Operation == "read" {
				ps.add(invalid(f+".memory", "a memory sink writes; this surface reads (operation read or consequence local_read)"))
			}
			c.prov.memorySurfaces = true
		}
		c.surfaces[i].x = x
	}
	b := p.Boundaries
	var err error
	if c.ext.egressDomains, err = dnsNames("boundaries.egress_domains", b.EgressDomains); err != nil {
		ps.add(err)
	}
	if c.ext.recipientDomains, err = dnsNames("boundaries.recipient_domains", b.RecipientDomains); err != nil {
		ps.add(err)
	}
	if len(b.Paths) > maxEntries {
		ps.add(invalid("boundaries.paths", "more than %d entries", maxEntries))
	} else {
		for i, r := range b.Paths {
			f := fmt.Sprintf("boundaries.paths[%d]", i)
			gs, err := globs(f+".match", []string{r.Match}, pathPattern)
			if err != nil {
				ps.add(invalid(f+".match", "%v", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "+f+".match[0]: ")))
				continue
			}
			if !r.ReadCrosses && !r.WriteCrosses && !r.Secret && !r.Memory {
				ps.add(invalid(f, "set at least one of read_crosses, write_crosses, secret or memory"))
				continue
			}
			g := gs[0]
			if r.ReadCrosses {
				c.ext.readCross = append(c.ext.readCross, g)
			}
			if r.WriteCrosses {
				c.ext.writeCross = append(c.ext.writeCross, g)
			}
			if r.Secret {
				c.prov.protPaths = append(c.prov.protPaths, g)
			}
			if r.Memory {
				c.prov.memory = append(c.prov.memory, g)
			}
		}
	}
	if c.ext.reviewTools, err = globs("review.tools", p.Review.Tools, nil); err != nil {
		ps.add(err)
	}
	if len(p.Review.Surfaces) > 0 {
		if c.ext.reviewSurfaces, err = c.surfaceSet("review.surfaces", p.Review.Surfaces); err != nil {
			ps.add(err)
		}
	}
	if c.prov.resources, err = levelRules("provenance.resources", p.Provenance.Resources, resourcePattern); err != nil {
		ps.add(err)
	}
	return ps.err()
}

// resourcePattern checks a pattern over canonical resources: it starts
// with path:, url:, raw: or digest: (the forms a result_from target
// takes), or is "*".
func resourcePattern(s string) error {
	if s == "*" {
		return nil
	}
	for _, m := range []string{CanonPath, CanonURL, CanonEmail, CanonRaw, CanonDigest} {
		if strings.HasPrefix(s, m+":") {
			return nil
		}
	}
	return fmt.Errorf("%q must start with path:, url:, email:, raw: or digest: (or be *)", s)
}

// dnsNames checks a list of DNS names: lower-case letters, digits and
// hyphens in at least two dot-separated labels of 1-63 bytes, no leading
// or trailing hyphen or dot, a last label that is not all digits (an IP
// address is no domain), at most 253 bytes. No wildcards: a name covers
// its subdomains by itself.
func dnsNames(field string, names []string) ([]string, error) {
	if len(names) > maxEntries {
		return nil, invalid(field, "more than %d entries", maxEntries)
	}
	for i, n := range names {
		if err := checkDNSName(n); err != nil {
			return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	return names, nil
}

func checkDNSName(n string) error {
	if n == "" || len(n) > maxDNSName {
		return fmt.Errorf("want a DNS name of 1-%d bytes", maxDNSName)
	}
	if strings.Contains(n, "*") {
		return fmt.Errorf("%q: a DNS name covers its subdomains by itself; write it without *", n)
	}
	labels := strings.Split(n, ".")
	if len(labels) < 2 {
		return fmt.Errorf("%q is a single label; name a domain (example.com), not a top-level domain or a bare host", n)
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Errorf("%q ends in a numeric label: an IP address is not a DNS name (use egress_allow for an address)", n)
	}
	for _, label := range labels {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a DNS name (empty, over-long or hyphen-edged label)", n)
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
				return fmt.Errorf("%q is not a lower-case DNS name (byte %q)", n, b)
			}
		}
	}
	return nil
}

// underDNS reports whether host (lower-case; one trailing dot ignored) is
// one of names or a subdomain of one.
func underDNS(names []string, host string) bool {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return false
	}
	for _, n := range names {
		if host == n || strings.HasSuffix(host, "."+n) {
			return true
		}
	}
	return false
}

// egressInside reports whether a URL host is inside the egress domains of
// a call on surface s: the allow-list patterns, or the DNS names of the
// document and of the surface.
func (c *compiled) egressInside(s *cSurface, host string) bool {
	h := hostOnly(host)
	return anyMatch(c.egress, h) || underDNS(c.ext.egressDomains, h) || underDNS(s.x.egressDomains, h)
}

// recipientInside reports whether an email domain is inside the trust
// domains of a call on surface s.
func (c *compiled) recipientInside(s *cSurface, domain string) bool {
	return anyMatch(c.trust, domain) || underDNS(c.ext.recipientDomains, domain) || underDNS(s.x.recipientDomains, domain)
}

// pathCrossing returns the boundary:protected ground of a path under a
// boundaries.paths entry that makes this kind of access (read or write)
// a crossing, or "".
func (c *compiled) pathCrossing(s *cSurface, p string) string {
	gs := c.ext.readCross
	if isWrite(s) {
		gs = c.ext.writeCross
	}
	for _, g := range gs {
		if g.Match(p) {
			return "boundary:protected:" + g.String()
		}
	}
	return ""
}

// shellPathCrossing is pathCrossing for a path a shell command names,
// whose kind of access cannot be told: either property crosses.
func (c *compiled) shellPathCrossing(p string) string {
	for _, gs := range [][]lanes.Glob{c.ext.readCross, c.ext.writeCross} {
		for _, g := range gs {
			if g.Match(p) {
				return "boundary:protected:" + g.String()
			}
		}
	}
	return ""
}

// reviewNamed returns the review a call needs because review.tools or
// review.surfaces names it, or "".
func (c *compiled) reviewNamed(si int, tool string) string {
	if c.ext.reviewSurfaces != nil && c.ext.reviewSurfaces[si] {
		return "review of surface " + c.surfaces[si].id
	}
	for _, g := range c.ext.reviewTools {
		if g.Match(tool) {
			return "review of tool " + g.String()
		}
	}
	return ""
}

// targetLeaves returns the leaves of a surface's target fields: the target
// field's, then each of target.also's; isList reports whether they make a
// list target (more than one value, an array, or any further field).
//
// groups (the field of each value) is built only for a list surface.
func targetLeaves(s *cSurface, flat args.Flat) (vals []args.Leaf, groups []string, isList bool) {
	vals = flat.Under(s.targetPtr)
	if !s.x.list {
		return vals, nil, false
	}
	for range vals {
		groups = append(groups, s.targetPtr)
	}
	isList = len(vals) > 1 || len(vals) == 1 && vals[0].Path != s.targetPtr
	for _, ptr := range s.x.also {
		more := flat.Under(ptr)
		for range more {
			groups = append(groups, ptr)
		}
		vals = append(vals, more...)
		isList = isList || len(more) > 0
	}
	return vals, groups, isList
}

// listTarget canonicalizes the elements of a list target: each value
// under a target field (groups[i] is the field of vals[i]) must be a
// string, the field itself or directly an element of the array it holds.
// The elements are deduplicated and sorted by their emitted form; the
// grant binds the set as "list:" and the JSON array of those forms.
func listTarget(s *cSurface, vals []args.Leaf, groups []string, res Resolution) (elems []CanonTarget, whole CanonTarget, missing, detail string, ok bool) {
	if len(vals) > MaxListTargets {
		return nil, whole, "at most " + fmt.Sprint(MaxListTargets) + " targets at " + s.targetPtr, fmt.Sprintf("the target fields hold %d values", len(vals)), false
	}
	seen := map[string]bool{}
	res.Resolved = "" // a reported real path belongs to one target, not to a list
	for i, v := range vals {
		ptr := groups[i]
		if v.Path != ptr {
			idx, isElem := strings.CutPrefix(v.Path, ptr+"/")
			if !isElem || idx == "" || strings.Trim(idx, "0123456789") != "" {
				return nil, whole, "a list of strings at " + ptr, "the target list holds a nested value at " + v.Path, false
			}
		}
		switch v.Kind {
		case args.String:
		case args.Elided:
			return nil, whole, "a list of strings at " + ptr, "the target value at " + v.Path + " is too long", false
		default:
			return nil, whole, "a list of strings at " + ptr, "the target value at " + v.Path + " is not a string", false
		}
		t, err := Canonicalize(s.canon, v.Value, res)
		if err != nil {
			return nil, whole, "one canonical target at " + v.Path, err.Error(), false
		}
		if !seen[t.Emit] {
			seen[t.Emit] = true
			elems = append(elems, t)
		}
	}
	sort.Slice(elems, func(a, b int) bool { return elems[a].Emit < elems[b].Emit })
	emits := make([]string, len(elems))
	for i, t := range elems {
		emits[i] = t.Emit
	}
	b, _ := json.Marshal(emits) // strings only
	whole = CanonTarget{Emit: "list:" + string(b)}
	return elems, whole, "", "", true
}

// targets returns the call's canonical targets: the elements of a list
// target, the one target, or none (no target field, or an optional one
// left out).
func (f *facts) targets() []CanonTarget {
	if f.list {
		return f.elems
	}
	if !f.s.hasTarget || f.noTarget {
		return nil
	}
	f.one[0] = f.target // no allocation on the common path
	return f.one[:]
}

// hasTargets reports whether the call names a destination.
func (f *facts) hasTargets() bool { return f.s.hasTarget && !f.noTarget }

// coversAll reports whether a rule or preauthorization covers the call:
// its lanes, workers and tools, and, with target patterns, every target
// of the call (a list is covered only when each element is).
func (m *cMatch) coversAll(worker, lane, tool string, f *facts) bool {
	if !f.list {
		return m.matches(worker, lane, tool, f.target.Subject)
	}
	if len(m.targets) == 0 {
		return m.matches(worker, lane, tool, "")
	}
	for i := range f.elems {
		if !m.matches(worker, lane, tool, f.elems[i].Subject) {
			return false
		}
	}
	return len(f.elems) > 0
}

// hitsAny reports whether a denial applies to the call: to any target of
// a list.
func (m *cMatch) hitsAny(worker, lane, tool string, f *facts) bool {
	if !f.list {
		return m.matches(worker, lane, tool, f.target.Subject)
	}
	if len(m.targets) == 0 {
		return m.matches(worker, lane, tool, "")
	}
	for i := range f.elems {
		if m.matches(worker, lane, tool, f.elems[i].Subject) {
			return true
		}
	}
	return false
}

// everyArgFields are the leaves an every_arg rule checks: every string
// and number of the call (booleans and nulls carry no value a source
// could have supplied), each by its own pointer.
func everyArgFields(flat args.Flat) []string {
	var out []string
	for _, l := range flat.Leaves {
		switch l.Kind {
		case args.String, args.Number, args.Elided:
			out = append(out, l.Path)
		}
	}
	return out
}

// resourceOf reports whether a registered source is a result that carries
// the resource it came from: a tool result whose path is a canonical
// resource of a surface that declares result_from, and the canonical
// form.
func (c *compiled) resourceOf(channel, p, tool string) (string, bool) {
	if channel != authority.ChannelToolResult || p == "" || tool == "" {
		return "", false
	}
	si := c.surfaceOf(tool)
	if si < 0 || !c.surfaces[si].x.resultFrom {
		return "", false
	}
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
		return CanonPath + ":" + p, true // a path resource is registered as the plain path
	}
	return p, true
}

// sourceAuthority is the level of content from a source (see
// Policy.SourceAuthority): a result that carries its resource is raised
// by provenance.resources over the resource and, for a path resource, by
// provenance.paths over the path, as a file read is.
func (c *compiled) sourceAuthority(channel, p, tool string) authority.Level {
	level := c.prov.sourceAuthority(channel, p, tool)
	res, ok := c.resourceOf(channel, p, tool)
	if !ok {
		return level
	}
	for _, r := range c.prov.resources {
		if r.level > level && r.g.Match(res) {
			level = r.level
		}
	}
	if fp, isPath := strings.CutPrefix(res, CanonPath+":"); isPath {
		if cp, ok := cleanSourcePath(fp); ok {
			for _, r := range c.prov.paths {
				if r.level > level && r.g.Match(cp) {
					level = r.level
				}
			}
		}
	}
	return level
}

// protectedSource is Policy.ProtectedSource: a result that carries a path
// resource is protected by the protected path patterns as a file read is.
func (c *compiled) protectedSource(channel, p, tool string) bool {
	if c.prov.protectedSource(channel, p, tool) {
		return true
	}
	if res, ok := c.resourceOf(channel, p, tool); ok {
		if fp, isPath := strings.CutPrefix(res, CanonPath+":"); isPath {
			return c.prov.protectedSource(authority.ChannelFileRead, fp, "")
		}
	}
	return false
}
