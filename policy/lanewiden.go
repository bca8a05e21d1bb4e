package policy

import (
	"fmt"
	"slices"

	"github.com/writ-dev/writ/lanes"
)

// LaneWidens reports whether lane child allows anything lane parent does
// not, as far as the lanes' own declarations say: version 1 tools and
// denials, version 2 surfaces, consequence classes and workspace. It
// returns the field that widens ("lanes.<child>.surfaces") and why, or ""
// when child is inside parent or either lane is not declared (a call in an
// undeclared lane is refused anyway). It is a check made before a spawn,
// to refuse a child whose lane is wider than its parent's up front; every
// call of a spawned child is still judged under each ancestor's lane.
func (p *Policy) LaneWidens(child, parent string) (field, detail string) {
	if p == nil || child == parent {
		return "", ""
	}
	c, ok1 := p.Lanes[child]
	pl, ok2 := p.Lanes[parent]
	if !ok1 || !ok2 {
		return "", ""
	}
	f := func(name string) string { return "lanes." + child + "." + name }
	if p.Version == SchemaVersion {
		for _, l := range []struct {
			name   string
			c, par []string
		}{{"surfaces", c.Surfaces, pl.Surfaces}, {"consequences", c.Consequences, pl.Consequences}} {
			if slices.Contains(l.par, "*") {
				continue
			}
			for _, v := range l.c {
				if !slices.Contains(l.par, v) {
					return f(l.name), fmt.Sprintf("lane %s has %s %q, which lane %s lacks", child, l.name, v, parent)
				}
			}
		}
		if pl.Workspace != "" && c.Workspace != pl.Workspace {
			return f("workspace"), fmt.Sprintf("lane %s's workspace %q is not lane %s's %q", child, c.Workspace, parent, pl.Workspace)
		}
		return "", ""
	}
	if _, err := lanes.Attenuate(pl.Tools, c.Tools); err != nil {
		return f("tools"), fmt.Sprintf("%v: lane %s allows %v", err, parent, pl.Tools)
	}
	for _, d := range pl.Deny {
		if !slices.Contains(c.Deny, d) {
			return f("deny"), fmt.Sprintf("lane %s denies %q, which lane %s does not", parent, d, child)
		}
	}
	return "", ""
}
