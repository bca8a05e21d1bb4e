package policy

import (
	"strings"

	"github.com/writ-dev/writ/lanes"
)

// classify returns the boundary-crossing grounds of a call (none for work
// inside every boundary).
func (c *compiled) classify(f *facts) []string {
	var out []string
	for i, t := range f.targets() {
		n := len(out)
		switch f.s.canon {
		case CanonPath:
			out = c.classifyPath(out, f.s, t.Path, f.res.Workspace)
		case CanonURL:
			out = c.classifyHost(out, f.s, t.Host)
		case CanonEmail:
			if !c.recipientInside(f.s, t.Domain) {
				out = append(out, "boundary:trust_domain")
			}
		case CanonShell:
			out = c.classifyCommand(out, f)
		}
		if i > 0 {
			// A list crosses where any element does; each ground once.
			added := append([]string(nil), out[n:]...)
			out = appendNew(out[:n], added)
		}
	}
	if c.crossing[f.s.class] {
		out = append(out, "boundary:class:"+f.s.consequence)
	}
	return out
}

// classifyPath adds the crossing of a path target: a protected path, or a
// path outside the lane's workspace (when the lane has one).
func (c *compiled) classifyPath(out []string, s *cSurface, p, ws string) []string {
	for _, g := range c.protected {
		if g.Match(p) {
			return append(out, "boundary:protected:"+g.String())
		}
	}
	if g := c.pathCrossing(s, p); g != "" {
		return append(out, g)
	}
	if ws != "" && !within(p, ws) {
		out = append(out, "boundary:workspace")
	}
	return out
}

// classifyHost adds the crossing of a URL target whose host is outside the
// egress allow-list.
func (c *compiled) classifyHost(out []string, s *cSurface, host string) []string {
	if !c.egressInside(s, host) {
		out = append(out, "boundary:egress")
	}
	return out
}

// classifyCommand looks at the paths and URLs a shell command mentions and,
// with FeatureShellHosts, the hosts its network tools name without a scheme.
func (c *compiled) classifyCommand(out []string, f *facts) []string {
	protected, egress := false, false
	for _, w := range shellTokens(f.screen) {
		switch {
		case strings.Contains(w, "://"):
			if egress {
				continue
			}
			if _, host, _, err := canonURL(w); err != nil || !c.egressInside(f.s, host) {
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
				if g := c.shellPathCrossing(p); !protected && g != "" {
					protected = true
					out = append(out, g)
				}
			}
		}
	}
	if !egress && f.features&FeatureShellHosts != 0 {
		for _, h := range shellHosts(f.command) {
			if !c.egressInside(f.s, h) {
				egress = true
				break
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
	if sh.target && f.list {
		for i := range f.elems {
			_, v, _ := strings.Cut(f.elems[i].Subject, ":")
			if v != "" && sh.pre.mayMatch(fold(v)) && sh.re.MatchString(v) {
				return true
			}
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
	for _, t := range f.targets() {
		if t.Subject == "" {
			continue
		}
		for _, g := range c.reviewTarget {
			if g.Match(t.Subject) {
				return "review of target " + g.String()
			}
		}
	}
	return ""
}

// appendNew appends the strings of add that out does not hold yet.
func appendNew(out, add []string) []string {
	for _, a := range add {
		if !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
