package policy

import (
	"strings"

	"github.com/writ-dev/writ/lanes"
)

// classify returns the boundary-crossing grounds of a call (none for work
// inside every boundary).
func (c *compiled) classify(f *facts) []string {
	var out []string
	if f.s.hasTarget {
		switch f.s.canon {
		case CanonPath:
			out = c.classifyPath(out, f.target.Path, f.res.Workspace)
		case CanonURL:
			out = c.classifyHost(out, f.target.Host)
		case CanonEmail:
			if !anyMatch(c.trust, f.target.Domain) {
				out = append(out, "boundary:trust_domain")
			}
		case CanonShell:
			out = c.classifyCommand(out, f)
		}
	}
	if c.crossing[f.s.class] {
		out = append(out, "boundary:class:"+f.s.consequence)
	}
	return out
}

// classifyPath adds the crossing of a path target: a protected path, or a
// path outside the lane's workspace (when the lane has one).
func (c *compiled) classifyPath(out []string, p, ws string) []string {
	for _, g := range c.protected {
		if g.Match(p) {
			return append(out, "boundary:protected:"+g.String())
		}
	}
	if ws != "" && !within(p, ws) {
		out = append(out, "boundary:workspace")
	}
	return out
}

// classifyHost adds the crossing of a URL target whose host is outside the
// egress allow-list.
func (c *compiled) classifyHost(out []string, host string) []string {
	if !anyMatch(c.egress, hostOnly(host)) {
		out = append(out, "boundary:egress")
	}
	return out
}

// classifyCommand looks at the paths and URLs a shell command mentions.
func (c *compiled) classifyCommand(out []string, f *facts) []string {
	protected, egress := false, false
	for _, w := range shellTokens(f.screen) {
		switch {
		case strings.Contains(w, "://"):
			if egress {
				continue
			}
			if _, host, _, err := canonURL(w); err != nil || !anyMatch(c.egress, hostOnly(host)) {
				egress = true
			}
		case strings.HasPrefix(w, "/") || strings.HasPrefix(w, "~") || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../"):
			if protected {
				continue
			}
			if p, err := canonPath(w, f.res); err == nil {
				for _, g := range c.protected {
					if g.Match(p) {
						protected = true
						out = append(out, "boundary:protected:"+g.String())
						break
					}
				}
			}
		}
	}
	if egress {
		out = append(out, "boundary:egress")
	}
	return out
}

// hostOnly strips a port from host[:port] (an IPv6 literal keeps its
// brackets).
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i > 0 && !strings.HasSuffix(h, "]") {
		return h[:i]
	}
	return h
}

// anyMatch reports whether any pattern matches s.
func anyMatch(gs []lanes.Glob, s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

// shapeMatches reports whether a shape rule matches the call's sinks or
// target (the canonical value of a path, URL, email, raw or digest target;
// a shell target is its sinks).
func (c *compiled) shapeMatches(sh *cShape, f *facts) bool {
	f.prepareFolded()
	if sh.sinks {
		for i, s := range f.sinks {
			if sh.pre.mayMatch(f.foldedSinks[i]) && sh.re.MatchString(s) {
				return true
			}
		}
	}
	if sh.args {
		for i, s := range f.args {
			if sh.pre.mayMatch(f.foldedArgs[i]) && sh.re.MatchString(s) {
				return true
			}
		}
	}
	if sh.target && f.targetValue != "" {
		if sh.pre.mayMatch(f.foldedTarget) && sh.re.MatchString(f.targetValue) {
			return true
		}
	}
	return false
}

// reviewOf returns the missing fact when the call needs a review, "" when
// it does not.
func (c *compiled) reviewOf(s *cSurface, f *facts) string {
	if c.reviewClass[s.class] {
		return "review of consequence class " + s.consequence
	}
	if f.target.Subject != "" {
		for _, g := range c.reviewTarget {
			if g.Match(f.target.Subject) {
				return "review of target " + g.String()
			}
		}
	}
	return ""
}
