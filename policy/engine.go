package policy

import (
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Request is one grant request as the engine judges it. Worker comes from
// the transport; everything else from the committed command.
type Request struct {
	Worker    string
	Lane      string
	Tool      string
	Args      args.Flat
	Digest    events.Hash // H(tool, canonical args): the ledger key of a target-less call
	Cwd       string
	Resolved  string
	Label     string // the target label the caller showed a human
	Amount    uint64 // declared amount, when HasAmount
	HasAmount bool
	Bytes     uint64 // declared byte count
	TTL       int64  // requested lifetime (ns); 0 = the lane's
	// Provenance of the argument fields (see FieldOrigin); a sink field
	// without an entry counts as model-made (evidence).
	Provenance []FieldOrigin
	// Features are the judging behaviours in force for this request (the
	// state machine sets them from the receipt format level).
	Features Features
}

// Usage is the consumption state Judge reads: how often an effect-ledger
// key was permitted, what a preauthorization has used, and what a quota
// window holds, at control-plane time now. Implementations answer as if
// every entry whose time has passed were already gone.
type Usage interface {
	LedgerCount(key string, now int64) uint64
	PreauthUsed(id string, now int64) (uses, amount uint64)
	QuotaUsed(key string, start, now int64) (requests, amount, bytes uint64)
}

// Judgement is the engine's decision with its grounds. For a permit, the
// caller records Instrument, Amount, Bytes and LedgerKey in the permit
// event, which is what charges them.
type Judgement struct {
	Decision       grants.Decision
	Reason         grants.Reason // ReasonNone for a permit
	Missing        string        // the binding fact that was missing
	Detail         string
	Rules          []string // the rule ids that matched, in evaluation order
	Surface        string
	Operation      string
	Consequence    string
	Target         string // canonical target as receipts carry it
	Cwd, Resolved  string // the resolution context of a path target
	LedgerKey      string // set for boundary-crossing calls
	Instrument     string // the preauthorization consumed by a permit
	InstrumentLeft string // what is left of it after this permit ("uses=2 amount=150")
	Amount         uint64
	Bytes          uint64
	TTL            int64 // grant lifetime (permit)
	NotAfter       int64 // the grant may not outlive this (the instrument's expiry); 0 = no cap
	// Grounds are the provenance grounds: one line per source of each
	// argument leaf the provenance step examined, by leaf and source id,
	// at most MaxGrounds (see grounds in provenance_judge.go and
	// events.Event.Grounds). Nil when the step examined nothing.
	Grounds []string
}

func (j *Judgement) refuse(d grants.Decision, r grants.Reason, missing, detail string, rules ...string) Judgement {
	j.Decision, j.Reason, j.Missing, j.Detail = d, r, missing, detail
	j.Rules = append(j.Rules, rules...)
	return *j
}

// Judge evaluates a request under a version 2 policy at control-plane time
// now. It is pure: the same policy, request, usage and time give the same
// judgement. The order is fixed: lane and surface, fact extraction,
// boundary classification, lane eligibility, explicit denials, deny-shape
// rules, the provenance checks (protected transfer, authority, memory
// writes; see judgeProvenance), escalate-shape rules, coverage by an
// allowance or preauthorization, the effect-ledger repeat check, quotas,
// then permit.
func (p *Policy) Judge(r *Request, u Usage, now int64) Judgement {
	var j Judgement
	c := p.c
	if c == nil {
		return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "version 2 policy", "the policy in force is not a compiled version 2 document")
	}
	// Lane: pinned workers stay in their lane.
	if pinned, ok := p.Workers[r.Worker]; ok && pinned != r.Lane {
		return j.refuse(grants.Deny, grants.ReasonLaneMismatch, "lane="+pinned, "", "workers."+r.Worker)
	} else if !ok && p.Unpinned == "deny" {
		return j.refuse(grants.Deny, grants.ReasonLaneMismatch, "worker pinned to a lane", "this policy admits only workers listed in workers", "unpinned")
	}
	lane := c.lanes[r.Lane]
	if lane == nil {
		return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "lane "+r.Lane+" declared", "", "lanes")
	}
	j.Rules = append(j.Rules, "lane:"+lane.name)
	si := c.surfaceOf(r.Tool)
	if si < 0 {
		return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "surface for tool "+r.Tool, "no surface declares this tool", "surfaces")
	}
	s := &c.surfaces[si]
	j.Surface, j.Operation, j.Consequence = s.id, s.operation, s.consequence
	j.Rules = append(j.Rules, "surface:"+s.id)

	f, reason, missing, detail := c.extract(s, lane, r)
	j.Amount, j.Bytes = f.amount, f.bytes
	if reason != grants.ReasonNone {
		return j.refuse(grants.Deny, reason, missing, detail)
	}
	j.Target = f.target.Emit
	if s.hasTarget && s.canon == CanonPath && !f.list && !f.noTarget {
		j.Cwd, j.Resolved = r.Cwd, r.Resolved
	}

	crossing := c.classify(&f)
	j.Rules = append(j.Rules, crossing...)

	// Denials: lane eligibility, explicit denials, deny-shapes. A denial
	// beats every allowance and instrument.
	if !lane.surfaces[si] {
		return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "surface "+s.id+" allowed in lane "+lane.name, "", "lanes."+lane.name+".surfaces")
	}
	if !lane.classes[s.class] {
		return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "consequence "+s.consequence+" spendable in lane "+lane.name, "", "lanes."+lane.name+".consequences")
	}
	for i := range c.deny {
		if c.deny[i].m.hitsAny(r.Worker, lane.name, r.Tool, &f) {
			return j.refuse(grants.Deny, grants.ReasonDeniedByPolicy, "no explicit denial", "", "deny:"+c.deny[i].id)
		}
	}
	escalate := -1
	for _, k := range s.shape {
		sh := &c.shape[k]
		if !c.shapeMatches(sh, &f) {
			continue
		}
		if sh.deny {
			return j.refuse(grants.Deny, grants.ReasonShapeRule, "a form no shape rule denies", "", "shape:"+sh.id)
		}
		if escalate < 0 {
			escalate = k
		}
	}
	if f.elided && len(s.shape) > 0 {
		return j.refuse(grants.Deny, grants.ReasonShapeRule, "sink values of at most 16 KiB", "a sink value was too long to screen", "shape:unscreened")
	}
	// Provenance: protected content leaving, field authority, memory
	// writes. After every denial above and before escalations, coverage,
	// the ledger and quotas, so that no allowance or instrument covers a
	// provenance refusal.
	if refusal, refused := c.judgeProvenance(&j, r, si, &f, crossing); refused {
		return refusal
	}
	if escalate >= 0 {
		return j.refuse(grants.ApprovalRequired, grants.ReasonShapeReview, "review of shape "+c.shape[escalate].id, "", "shape:"+c.shape[escalate].id)
	}

	// Coverage: a review class needs an instrument; a boundary crossing an
	// allowance or an instrument. Coverage is found here and consumed only
	// by the permit event.
	review := c.reviewOf(s, &f)
	if review == "" {
		review = c.reviewNamed(si, r.Tool)
	}
	var pre *cPreauth
	var preUses, preAmount uint64
	if review != "" || len(crossing) > 0 {
		covered := false
		if review == "" {
			if a := c.allowance(r, lane, &f); a != "" {
				covered = true
				j.Rules = append(j.Rules, "allow:"+a)
			}
		}
		var miss coverMiss
		if !covered {
			pre, preUses, preAmount, miss = c.instrument(r, lane, &f, u, now)
			if pre != nil {
				covered = true
				j.Rules = append(j.Rules, "preauth:"+pre.id)
			}
		}
		if !covered {
			switch {
			case miss.exhausted:
				return j.refuse(grants.ApprovalRequired, grants.ReasonPreauthExhausted, miss.field, "", "preauth:"+miss.id)
			case review != "":
				return j.refuse(grants.ApprovalRequired, grants.ReasonReviewRequired, orString(miss.field, review), "", "review")
			default:
				return j.refuse(grants.ApprovalRequired, grants.ReasonBoundaryCrossing,
					orString(miss.field, "allowance or preauthorization covering "+orString(f.target.Emit, r.Tool)), "")
			}
		}
	}
	if len(crossing) > 0 {
		// The effect ledger: a repeated boundary-crossing effect needs a
		// fresh review even when an instrument covers it.
		j.LedgerKey = c.ledgerKey(r, lane, s, &f)
		if u.LedgerCount(j.LedgerKey, now) > 0 {
			return j.refuse(grants.ApprovalRequired, grants.ReasonRepeatEffect, "fresh review of a repeated effect",
				"the same effect was permitted within the ledger window", "ledger")
		}
	}

	// Quotas.
	for i := range c.quotas {
		q := &c.quotas[i]
		if !q.applies(r.Worker, lane.name) {
			continue
		}
		key := q.key(r.Worker, lane.name)
		start := windowStart(now, q.window)
		reqs, amt, byt := u.QuotaUsed(key, start, now)
		field := ""
		switch {
		case q.requests != nil && reqs >= *q.requests:
			field = "requests"
		case q.amount != nil && (amt+f.amount < amt || amt+f.amount > *q.amount):
			field = "amount"
		case q.bytes != nil && (byt+f.bytes < byt || byt+f.bytes > *q.bytes):
			field = "bytes"
		}
		if field != "" {
			return j.refuse(grants.Deny, grants.ReasonQuotaExhausted, "quotas."+q.id+"."+field,
				"window resets at "+Timestamp(addSat(start, q.window)).String(), "quota:"+q.id)
		}
		if r.Features&FeatureCountedQuotas == 0 || quotaCounts(q.requests, q.amount, q.bytes, f.amount, f.bytes) {
			j.Rules = append(j.Rules, "quota:"+q.id)
		}
	}

	// Permit.
	j.Decision = grants.Permit
	ttl := lane.ttl
	if r.TTL > 0 && r.TTL < ttl {
		ttl = r.TTL
	}
	if ttl < int64(MinTTL) {
		ttl = int64(MinTTL)
	}
	j.TTL = ttl
	if pre != nil {
		j.Instrument, j.NotAfter = pre.id, pre.expires
		j.InstrumentLeft = pre.left(preUses+1, preAmount+f.amount)
	}
	return j
}

func orString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// addSat is a+b saturated to the int64 range.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return 1<<63 - 1
	case b < 0 && s > a:
		return -1 << 63
	}
	return s
}

// windowStart is the start of the fixed window of length w holding now.
func windowStart(now, w int64) int64 {
	m := now % w
	if m < 0 {
		m += w
	}
	return now - m
}
