package policy

import "github.com/writ-dev/writ/args"

// TargetOf returns the canonical target (as receipts carry it) that a call
// resolves to under this policy, for the target-drift check at spend: the
// tool's surface, the lane's workspace and the resolution context are
// those in force now. ok is false when this policy cannot derive a target
// for the call (a version 1 policy, a lane or tool it does not declare, a
// surface without a target, arguments that were not forwarded or do not
// canonicalize); the caller then has nothing to compare.
func (p *Policy) TargetOf(worker, lane, tool string, flat args.Flat, cwd, resolved string) (target string, ok bool) {
	c := p.c
	if c == nil {
		return "", false
	}
	l := c.lanes[lane]
	si := c.surfaceOf(tool)
	if l == nil || si < 0 || !c.surfaces[si].hasTarget || !flat.Carried {
		return "", false
	}
	s := &c.surfaces[si]
	vals, groups, isList := targetLeaves(s, flat)
	res := Resolution{Cwd: cwd, Resolved: resolved, Workspace: workspaceOf(l.workspace, worker)}
	if isList {
		_, whole, _, _, ok := listTarget(s, vals, groups, res)
		return whole.Emit, ok
	}
	if len(vals) != 1 || vals[0].Kind != args.String || vals[0].Path != s.targetPtr {
		return "", false
	}
	t, err := Canonicalize(s.canon, vals[0].Value, Resolution{Cwd: cwd, Resolved: resolved, Workspace: workspaceOf(l.workspace, worker)})
	if err != nil {
		return "", false
	}
	return t.Emit, true
}

// LedgerWindow is how long a permitted boundary-crossing effect stays in
// the effect ledger (0 for a version 1 policy).
func (p *Policy) LedgerWindow() int64 {
	if p.c == nil {
		return 0
	}
	return p.c.ledgerWindow
}

// PreauthExpires returns a preauthorization's expiry by id.
func (p *Policy) PreauthExpires(id string) (int64, bool) {
	if p.c == nil {
		return 0, false
	}
	i, ok := p.c.preauthByID[id]
	if !ok {
		return 0, false
	}
	return p.c.preauths[i].expires, true
}

// QuotaCharge is one quota window a permit is charged to.
type QuotaCharge struct {
	Key    string // quota id and scope, e.g. "isolated-rate/worker/w1"
	Start  int64  // start of the window holding the permit's time
	Window int64  // window length
}

// QuotaCharges lists, in document order, the quota windows a permit of
// worker in lane at time now is charged to.
func (p *Policy) QuotaCharges(worker, lane string, now int64) []QuotaCharge {
	if p.c == nil {
		return nil
	}
	var out []QuotaCharge
	for i := range p.c.quotas {
		q := &p.c.quotas[i]
		if q.applies(worker, lane) {
			out = append(out, QuotaCharge{Key: q.key(worker, lane), Start: windowStart(now, q.window), Window: q.window})
		}
	}
	return out
}
