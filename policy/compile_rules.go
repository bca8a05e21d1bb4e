package policy

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// compileMatch compiles the lanes, workers, tools and targets of a rule,
// preauthorization or quota.
func (c *compiled) compileMatch(f string, ls, ws, tools, targets []string, needTools bool) (cMatch, error) {
	var m cMatch
	for i, l := range ls {
		if _, ok := c.lanes[l]; !ok {
			return m, invalid(fmt.Sprintf("%s.lanes[%d]", f, i), "lane %q is not declared in lanes", l)
		}
	}
	for i, w := range ws {
		if err := safeID(w); err != nil {
			return m, invalid(fmt.Sprintf("%s.workers[%d]", f, i), "%v", err)
		}
	}
	if len(ls) > maxEntries || len(ws) > maxEntries {
		return m, invalid(f, "more than %d lanes or workers", maxEntries)
	}
	if needTools && len(tools) == 0 {
		return m, invalid(f+".tools", "at least one tool name or pattern is required")
	}
	var err error
	if m.tools, err = globs(f+".tools", tools, nil); err != nil {
		return m, err
	}
	if m.targets, err = globs(f+".targets", targets, targetPattern); err != nil {
		return m, err
	}
	m.lanes, m.workers = ls, ws
	return m, nil
}

func checkLimit(field string, v *uint64) error {
	if v != nil && *v == 0 {
		return invalid(field, "must be at least 1 (leave it out for no limit)")
	}
	return nil
}

func (c *compiled) compileRules(p *Policy) error {
	var ps problems
	for _, sec := range []struct {
		name  string
		rules []Rule
		dst   *[]cRule
	}{{"allow", p.Allow, &c.allow}, {"deny", p.Deny, &c.deny}} {
		if len(sec.rules) > maxEntries {
			return invalid(sec.name, "more than %d entries", maxEntries)
		}
		seen := map[string]bool{}
		for i, r := range sec.rules {
			ps.add(func() error {
				f := fmt.Sprintf("%s[%d]", sec.name, i)
				if err := safeID(r.ID); err != nil {
					return invalid(f+".id", "%v", err)
				}
				if seen[r.ID] {
					return invalid(f+".id", "duplicate id %q", r.ID)
				}
				seen[r.ID] = true
				m, err := c.compileMatch(f, r.Lanes, r.Workers, r.Tools, r.Targets, true)
				if err != nil {
					return err
				}
				if r.MaxAmount != nil && sec.name == "deny" {
					return invalid(f+".max_amount", "only an allowance bounds the amount")
				}
				if err := checkLimit(f+".max_amount", r.MaxAmount); err != nil {
					return err
				}
				*sec.dst = append(*sec.dst, cRule{id: r.ID, m: m, maxAmount: r.MaxAmount})
				return nil
			}())
		}
	}
	return ps.err()
}

func (c *compiled) compilePreauths(p *Policy) error {
	if len(p.Preauthorizations) > maxEntries {
		return invalid("preauthorizations", "more than %d entries", maxEntries)
	}
	var ps problems
	for i, a := range p.Preauthorizations {
		ps.add(func() error {
			f := fmt.Sprintf("preauthorizations[%d]", i)
			if err := safeID(a.ID); err != nil {
				return invalid(f+".id", "%v", err)
			}
			if _, dup := c.preauthByID[a.ID]; dup {
				return invalid(f+".id", "duplicate id %q", a.ID)
			}
			m, err := c.compileMatch(f, a.Lanes, a.Workers, a.Tools, a.Targets, true)
			if err != nil {
				return err
			}
			if a.Expires == 0 {
				return invalid(f+".expires", "required: every preauthorization expires")
			}
			for _, l := range []struct {
				name string
				v    *uint64
			}{{"per_call", a.PerCall}, {"cumulative", a.Cumulative}, {"uses", a.Uses}} {
				if err := checkLimit(f+"."+l.name, l.v); err != nil {
					return err
				}
			}
			c.preauthByID[a.ID] = len(c.preauths)
			c.preauths = append(c.preauths, cPreauth{id: a.ID, m: m, expires: int64(a.Expires),
				perCall: a.PerCall, cumulative: a.Cumulative, uses: a.Uses})
			return nil
		}())
	}
	return ps.err()
}

func (c *compiled) compileBoundaries(p *Policy) error {
	b := p.Boundaries
	var err error
	if c.protected, err = globs("boundaries.protected_paths", b.ProtectedPaths, pathPattern); err != nil {
		return err
	}
	if c.egress, err = globs("boundaries.egress_allow", b.EgressAllow, lowerPattern); err != nil {
		return err
	}
	if c.trust, err = globs("boundaries.trust_domains", b.TrustDomains, lowerPattern); err != nil {
		return err
	}
	c.crossing, err = classSet("boundaries.crossing_classes", b.CrossingClasses)
	return err
}

// pathPattern checks a pattern over canonical paths: it starts with /, ~
// or *, so that it can match an absolute or home-relative path.
func pathPattern(s string) error {
	if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "~") && !strings.HasPrefix(s, "*") {
		return fmt.Errorf("%q must start with /, ~ or *", s)
	}
	return nil
}

func (c *compiled) compileReview(p *Policy) error {
	var err error
	if c.reviewClass, err = classSet("review.classes", p.Review.Classes); err != nil {
		return err
	}
	c.reviewTarget, err = globs("review.targets", p.Review.Targets, targetPattern)
	return err
}

func (c *compiled) compileShapes(p *Policy) error {
	if len(p.ShapeRules) > maxEntries {
		return invalid("shape_rules", "more than %d entries", maxEntries)
	}
	seen := map[string]bool{}
	var ps problems
	for i, r := range p.ShapeRules {
		ps.add(func() error {
			f := fmt.Sprintf("shape_rules[%d]", i)
			if err := safeID(r.ID); err != nil {
				return invalid(f+".id", "%v", err)
			}
			if seen[r.ID] {
				return invalid(f+".id", "duplicate id %q", r.ID)
			}
			seen[r.ID] = true
			if len(r.Description) > maxPattern || hasControl(r.Description) {
				return invalid(f+".description", "at most %d printable bytes", maxPattern)
			}
			if r.Match == "" || len(r.Match) > maxRegexp {
				return invalid(f+".match", "want a regular expression of 1-%d bytes", maxRegexp)
			}
			re, err := regexp.Compile(r.Match)
			if err != nil {
				return invalid(f+".match", "%v", err)
			}
			if re.MatchString("") {
				return invalid(f+".match", "matches the empty string, so it would match every call")
			}
			s := cShape{id: r.ID, re: re, pre: newPrefilter(r.Match)}
			switch r.Action {
			case "deny":
				s.deny = true
			case "escalate":
			default:
				return invalid(f+".action", "want deny or escalate, got %q", r.Action)
			}
			if len(r.In) == 0 {
				s.sinks, s.target = true, true
			}
			for j, in := range r.In {
				switch in {
				case "sinks":
					s.sinks = true
				case "target":
					s.target = true
				case "args":
					s.args = true
				default:
					return invalid(fmt.Sprintf("%s.in[%d]", f, j), "want sinks, target or args, got %q", in)
				}
			}
			for j, ex := range r.Examples.Hit {
				if !s.re.MatchString(ScreenText(ex)) && !s.re.MatchString(ex) {
					return invalid(fmt.Sprintf("%s.examples.hit[%d]", f, j), "the rule does not match %q", ex)
				}
			}
			for j, ex := range r.Examples.Miss {
				if s.re.MatchString(ScreenText(ex)) || s.re.MatchString(ex) {
					return invalid(fmt.Sprintf("%s.examples.miss[%d]", f, j), "the rule matches %q", ex)
				}
			}
			applies := make([]bool, len(c.surfaces))
			if len(r.Surfaces) == 0 {
				for k := range applies {
					applies[k] = true
				}
			} else if applies, err = c.surfaceSet(f+".surfaces", r.Surfaces); err != nil {
				return err
			}
			for k, ok := range applies {
				if ok {
					c.surfaces[k].shape = append(c.surfaces[k].shape, len(c.shape))
					c.surfaces[k].args = c.surfaces[k].args || s.args
				}
			}
			c.shape = append(c.shape, s)
			return nil
		}())
	}
	return ps.err()
}

func (c *compiled) compileQuotas(p *Policy) error {
	if len(p.Quotas) > maxEntries {
		return invalid("quotas", "more than %d entries", maxEntries)
	}
	seen := map[string]bool{}
	var ps problems
	for i, q := range p.Quotas {
		ps.add(func() error {
			f := fmt.Sprintf("quotas[%d]", i)
			if err := safeID(q.ID); err != nil {
				return invalid(f+".id", "%v", err)
			}
			if seen[q.ID] {
				return invalid(f+".id", "duplicate id %q", q.ID)
			}
			seen[q.ID] = true
			m, err := c.compileMatch(f, q.Lanes, q.Workers, nil, nil, false)
			if err != nil {
				return err
			}
			cq := cQuota{id: q.ID, lanes: m.lanes, workers: m.workers, window: int64(q.Window),
				requests: q.Requests, amount: q.Amount, bytes: q.Bytes}
			switch q.Per {
			case ScopeWorker:
			case ScopeLane:
				cq.perLane = true
			default:
				return invalid(f+".per", "want worker or lane, got %q", q.Per)
			}
			if time.Duration(q.Window) < time.Second || time.Duration(q.Window) > maxLedgerWindow {
				return invalid(f+".window", "%s is outside [1s, %s]", time.Duration(q.Window), maxLedgerWindow)
			}
			if q.Requests == nil && q.Amount == nil && q.Bytes == nil {
				return invalid(f, "set at least one of requests, amount or bytes")
			}
			for _, l := range []struct {
				name string
				v    *uint64
			}{{"requests", q.Requests}, {"amount", q.Amount}, {"bytes", q.Bytes}} {
				if err := checkLimit(f+"."+l.name, l.v); err != nil {
					return err
				}
			}
			c.quotas = append(c.quotas, cq)
			return nil
		}())
	}
	return ps.err()
}
