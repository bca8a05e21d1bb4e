package policy

import (
	"strconv"
	"strings"
)

// matches reports whether a rule, preauthorization or quota scope applies
// to a call: its lanes and workers (all when empty), its tools, and its
// target patterns (any target when empty; a call without a target matches
// none).
func (m *cMatch) matches(worker, lane, tool, target string) bool {
	if len(m.lanes) > 0 && !contains(m.lanes, lane) {
		return false
	}
	if len(m.workers) > 0 && !contains(m.workers, worker) {
		return false
	}
	if !anyMatch(m.tools, tool) {
		return false
	}
	if len(m.targets) > 0 && (target == "" || !anyMatch(m.targets, target)) {
		return false
	}
	return true
}

// allowance returns the id of the first allowance covering the call.
func (c *compiled) allowance(r *Request, lane *cLane, f *facts) string {
	for i := range c.allow {
		a := &c.allow[i]
		if !a.m.coversAll(r.Worker, lane.name, r.Tool, f) {
			continue
		}
		if a.maxAmount != nil && (!f.hasAmount || f.amount > *a.maxAmount) {
			continue
		}
		return a.id
	}
	return ""
}

// coverMiss says why no preauthorization covered a call: the fact the
// first matching one lacked (preauthorizations.<id>.<field>), and whether
// a matching one was exhausted (no uses or cumulative amount left), which
// takes precedence.
type coverMiss struct {
	id, field string
	exhausted bool
}

// instrument finds the first preauthorization that covers the call at now,
// with what it has used so far.
func (c *compiled) instrument(r *Request, lane *cLane, f *facts, u Usage, now int64) (p *cPreauth, uses, amount uint64, miss coverMiss) {
	for i := range c.preauths {
		a := &c.preauths[i]
		if !a.m.coversAll(r.Worker, lane.name, r.Tool, f) {
			continue
		}
		used, spent := u.PreauthUsed(a.id, now)
		var lack string
		exhausted := false
		switch {
		case now >= a.expires:
			lack = "expires"
		case (a.perCall != nil || a.cumulative != nil) && !f.hasAmount:
			lack = "amount" // an amount the call does not carry satisfies no amount bound
		case a.perCall != nil && f.amount > *a.perCall:
			lack = "per_call"
		case a.uses != nil && used >= *a.uses:
			lack, exhausted = "uses", true
		case a.cumulative != nil && (spent+f.amount < spent || spent+f.amount > *a.cumulative):
			lack, exhausted = "cumulative", true
		default:
			return a, used, spent, coverMiss{}
		}
		if miss.field == "" || exhausted && !miss.exhausted {
			miss = coverMiss{id: a.id, field: "preauthorizations." + a.id + "." + lack, exhausted: exhausted}
		}
	}
	return nil, 0, 0, miss
}

// left describes what is left of a preauthorization once uses and amount
// are consumed.
func (a *cPreauth) left(uses, amount uint64) string {
	var parts []string
	if a.uses != nil {
		parts = append(parts, "uses="+strconv.FormatUint(*a.uses-min(uses, *a.uses), 10))
	}
	if a.cumulative != nil {
		parts = append(parts, "amount="+strconv.FormatUint(*a.cumulative-min(amount, *a.cumulative), 10))
	}
	return strings.Join(parts, " ")
}

// ledgerKey is the effect-ledger key of a boundary-crossing call: the
// path for file targets, host and path for web targets, the normalized
// command (as its digest) for shell, the tool and target otherwise, the
// tool and request digest for a call without a target; prefixed by the
// worker or lane unless the ledger is fleet-wide.
func (c *compiled) ledgerKey(r *Request, lane *cLane, s *cSurface, f *facts) string {
	var k string
	switch {
	case f.list:
		k = "tool:" + r.Tool + " " + f.target.Emit
	case !f.hasTargets():
		k = "tool:" + r.Tool + " digest:" + r.Digest.String()
	case s.canon == CanonPath:
		k = f.target.Emit
	case s.canon == CanonURL:
		k = "web:" + f.target.Host + f.target.URLPath
	case s.canon == CanonShell:
		k = f.target.Emit
	default:
		k = "tool:" + r.Tool + " " + f.target.Emit
	}
	switch c.ledgerScope {
	case ScopeWorker:
		return r.Worker + "|" + k
	case ScopeLane:
		return "lane:" + lane.name + "|" + k
	}
	return k
}

// applies reports whether a quota counts a call of worker in lane.
func (q *cQuota) applies(worker, lane string) bool {
	return (len(q.lanes) == 0 || contains(q.lanes, lane)) && (len(q.workers) == 0 || contains(q.workers, worker))
}

// key is the quota window's key: the quota id and its scope.
func (q *cQuota) key(worker, lane string) string {
	if q.perLane {
		return q.id + "/lane/" + lane
	}
	return q.id + "/worker/" + worker
}
