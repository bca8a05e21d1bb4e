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
	if len(f.patchFiles) > 0 || f.patchOverflow {
		// The files a patch names are written as a Write's target is.
		n := len(out)
		for _, p := range f.patchFiles {
			out = c.classifyPath(out, f.s, p, f.res.Workspace)
		}
		if f.patchOverflow {
			out = append(out, "boundary:patch_files")
		}
		added := append([]string(nil), out[n:]...)
		out = appendNew(out[:n], added)
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
// with FeatureShellHosts, the hosts its network tools name without a
// scheme. With FeatureShellWords it also reads relative paths and @file
// words (shellPathWord) and destinations given through expansions.
func (c *compiled) classifyCommand(out []string, f *facts) []string {
	protected, egress := false, false
	words := f.features&FeatureShellWords != 0
	bare := f.features&FeatureShellBareWords != 0
	for _, w := range shellTokens(f.screen) {
		if words && !protected {
			pw := shellPathWord(w)
			if pw == "" && bare && shellFileWord(w) {
				pw = w
			}
			if pw != "" {
				if g := c.shellPathGround(pw, f.res); g != "" {
					protected = true
					out = append(out, g)
				}
				continue
			}
		}
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
			if g := c.shellPathGround(w, f.res); g != "" {
				protected = true
				out = append(out, g)
			}
		}
	}
	if !egress && f.features&FeatureShellHosts != 0 {
		egress = c.anyHostOutside(f.s, shellHosts(f.command))
	}
	if !egress && words && strings.ContainsAny(f.command, "$`") {
		// Read again with expansions (without a $ or ` the two readings
		// are the same). Level 13's reading is kept as well, so that the
		// level only ever holds more: it can find a command after
		// "$(...)" that this reading, rightly, takes as an argument.
		egress = c.anyHostOutside(f.s, appendShellHosts(nil, f.command, 0, &hostReading{expand: true}))
	}
	if egress {
		out = append(out, "boundary:egress")
	}
	return out
}

// anyHostOutside reports whether any of hosts is outside the egress
// allow-list of a call on surface s.
func (c *compiled) anyHostOutside(s *cSurface, hosts []string) bool {
	for _, h := range hosts {
		if !c.egressInside(s, h) {
			return true
		}
	}
	return false
}

// shellPathGround returns the boundary:protected ground of a path a shell
// command names (a protected path, or one whose boundaries.paths entry
// makes some access cross), or "" for none or a path that cannot be
// resolved.
func (c *compiled) shellPathGround(w string, res Resolution) string {
	p, err := canonPath(w, res)
	if err != nil {
		return ""
	}
	for _, g := range c.protected {
		if g.Match(p) {
			return "boundary:protected:" + g.String()
		}
	}
	return c.shellPathCrossing(p)
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
