package fsm

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/lanes"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Fleets (receipt format level 8, ReceiptFormatFleet): spawned workers,
// incarnations, subtree revocation and respawn.
//
// A worker spawns a child (OpSpawn) whose scope is a subset of its own at
// that moment: tool patterns (lanes.Attenuate), consequence classes,
// target patterns and lifetime. The child is never a coordinator, and
// every grant it gets binds the worker counters of all its ancestors, so
// revoking any ancestor kills the child's grants at spend; its requests
// are also judged under every ancestor's lane, so a lane mapping can only
// narrow. Spawn records are kept for good (a spawned id must never turn
// back into an unconstrained root worker).
//
// Every worker has an incarnation, the value of its counter
// "incarnation/<worker>" (0 for a worker never spawned, restored or
// respawned). At this level every grant binds it. A checkpoint restore
// (OpRestore) or an operator's respawn (OpRespawn) moves it and cancels
// the old incarnation's unspent grants in the same entry; a grant of an
// earlier incarnation is refused at spend (grant_revoked, naming both
// incarnations).
//
// A worker revocation at this level revokes the worker's whole subtree in
// one entry: every descendant's counter moves (barring it), and the
// receipt lists the revoked workers, the cancelled grants, the ended
// route leases and the cancelled reviews and approvals. A respawn brings
// a revoked worker back in a given lane, approval-blocked: every call
// other than a read needs a review until an operator lifts the block
// (OpLift). An agent can never lift its own block.

// ReceiptFormatFleet (8) adds spawned workers, incarnations, subtree
// revocations and respawns (kinds spawn, incarnation and lift; the
// fleet fields on events). Below it the fleet ops are refused and a
// worker revocation revokes only the worker.
const ReceiptFormatFleet uint64 = 8

// WritesFleet reports whether Decide writes fleet events at the level in
// force.
func (s *State) WritesFleet() bool { return s.ReceiptFormat() >= ReceiptFormatFleet }

// Fleet limits.
const (
	// MaxSpawnDepth is how deep a spawn tree may grow below a root
	// worker: every grant binds one counter per ancestor.
	MaxSpawnDepth = 8
	// MaxSpawnScope is how many entries each of a spawn's scope lists
	// (tools, classes, targets) may hold.
	MaxSpawnScope = 64
	// DefaultSpawnTTL is a child's lifetime when the spawn asks for none
	// (capped by the parent's).
	DefaultSpawnTTL = int64(time.Hour)
	// MaxSpawnTTL is the longest lifetime a child may have.
	MaxSpawnTTL = int64(24 * time.Hour)
)

// member is a worker the fleet records: a spawned child (Parent set) or
// a respawned root (Parent empty). Scope lists are nil when unrestricted
// (a root's). ParentLane is, for a child of a root worker, the lane that
// root spawned it from; the child is judged under it too.
type member struct {
	ID         string
	Parent     string
	ParentLane string
	Lane       string
	Tools      []string
	Classes    []string
	Targets    []string
	IssuedAt   int64
	ExpiresAt  int64 // 0: no end (a respawned root)
	Blocked    bool  // approval-blocked until an operator lifts it
	Seq        uint64
	UserKey    string // the child's NATS user key (level 12), "" when none
}

// incarnation returns a worker's incarnation.
func (s *State) incarnation(worker string) uint64 {
	return s.counters.Get(revocation.Key(revocation.ScopeIncarnation, worker))
}

// Incarnation is a worker's incarnation number (0: never spawned,
// restored or respawned).
func (s *State) Incarnation(worker string) uint64 { return s.incarnation(worker) }

// FleetMember is what the state records of a spawned or respawned worker,
// for status displays and the issuer's spawn answers.
type FleetMember struct {
	Worker      string   `json:"worker"`
	Parent      string   `json:"parent,omitempty"`
	Lane        string   `json:"lane"`
	Tools       []string `json:"tools,omitempty"`
	Classes     []string `json:"classes,omitempty"`
	Targets     []string `json:"targets,omitempty"`
	IssuedAt    int64    `json:"issued_at"`
	ExpiresAt   int64    `json:"expires_at,omitempty"`
	Incarnation uint64   `json:"incarnation"`
	Blocked     bool     `json:"blocked,omitempty"`
	Revoked     bool     `json:"revoked,omitempty"`
	// UserKey is the public nkey of the NATS user the spawn named
	// (receipt format level 12).
	UserKey string `json:"user_key,omitempty"`
}

// Member returns what the fleet records of a worker.
func (s *State) Member(worker string) (FleetMember, bool) {
	m, ok := s.fleet[worker]
	if !ok {
		return FleetMember{}, false
	}
	return s.fleetMember(m), true
}

func (s *State) fleetMember(m *member) FleetMember {
	return FleetMember{
		Worker: m.ID, Parent: m.Parent, Lane: m.Lane, Tools: slices.Clone(m.Tools),
		Classes: slices.Clone(m.Classes), Targets: slices.Clone(m.Targets),
		IssuedAt: m.IssuedAt, ExpiresAt: m.ExpiresAt, Incarnation: s.incarnation(m.ID),
		Blocked: m.Blocked, Revoked: s.barred[m.ID], UserKey: m.UserKey,
	}
}

// Fleet lists the recorded workers in id order.
func (s *State) Fleet() []FleetMember {
	ids := make([]string, 0, len(s.fleet))
	for id := range s.fleet {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]FleetMember, len(ids))
	for i, id := range ids {
		out[i] = s.fleetMember(s.fleet[id])
	}
	return out
}

// ancestors returns a worker's parent, grandparent, ... (nearest first).
func (s *State) ancestors(worker string) []*member {
	var out []*member
	for m := s.fleet[worker]; m != nil && m.Parent != ""; m = s.fleet[m.Parent] {
		p := s.fleet[m.Parent]
		if p == nil {
			// A root parent without a record of its own.
			out = append(out, &member{ID: m.Parent, Lane: m.ParentLane})
			break
		}
		out = append(out, p)
		if len(out) > MaxSpawnDepth {
			break // never reached: spawns are refused past the depth
		}
	}
	return out
}

// subtree returns worker followed by all its descendants, each level in
// id order.
func (s *State) subtree(worker string) []string {
	kids := map[string][]string{}
	for id, m := range s.fleet {
		if m.Parent != "" {
			kids[m.Parent] = append(kids[m.Parent], id)
		}
	}
	out := []string{worker}
	for i := 0; i < len(out); i++ {
		k := kids[out[i]]
		sort.Strings(k)
		out = append(out, k...)
	}
	return out
}

func (s *State) fleetBelowLevel() grants.Envelope {
	return grants.Refuse(grants.ReasonUnknownVersion, "receipt format 8",
		fmt.Sprintf("spawns, restores and respawns are recorded from receipt format level %d; the cluster writes level %d (a voter's build predates fleets)",
			ReceiptFormatFleet, s.ReceiptFormat()))
}

// validWorkerID reports whether id can name a spawned worker: an api id
// (letters, digits, '-', '_'), so that it is one NATS subject token.
func validWorkerID(id string) bool { return api.IsValidID(id) }

// widens is a refused spawn: scope_widens naming the field.
func widens(e events.Event, field, detail string) verdict {
	return record(deny(e, grants.ReasonScopeWidens, field, detail))
}

// decideSpawn judges a worker's request to spawn a child: Caller is the
// parent, Key the child's id, Lane its lane, ScopeTools, ScopeClasses and
// ScopeTargets its scope (empty: the parent's), TTL its lifetime (0:
// DefaultSpawnTTL) and ParentLane the lane a root parent runs in.
func decideSpawn(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesFleet() {
		return reply(s.fleetBelowLevel())
	}
	invalid := func(missing, format string, a ...any) verdict {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, missing, fmt.Sprintf(format, a...)))
	}
	switch {
	case c.Caller == "" || isOperator(c.Caller):
		return invalid("worker", "a spawn is asked by the parent worker")
	case !validWorkerID(c.Key):
		return invalid("child", "a child id is 1-%d of letters, digits, - and _", api.MaxIDLen)
	case c.Lane == "" || !validWorkerID(c.Lane):
		return invalid("lane", "a spawn names the child's lane (1-%d of letters, digits, - and _)", api.MaxIDLen)
	case c.ParentLane != "" && !validWorkerID(c.ParentLane):
		return invalid("parent_lane", "the parent's lane is 1-%d of letters, digits, - and _", api.MaxIDLen)
	case c.TTL < 0:
		return invalid("ttl", "ttl must not be negative")
	case len(c.ScopeTools) > MaxSpawnScope || len(c.ScopeClasses) > MaxSpawnScope || len(c.ScopeTargets) > MaxSpawnScope:
		return invalid("scope", "a spawn scope lists at most %d tools, classes and targets each", MaxSpawnScope)
	case c.UserKey != "" && s.WritesWorkerKeys() && !ValidUserKey(c.UserKey):
		return invalid("user_key", "a NATS user key is a public user nkey (U followed by 55 base32 characters)")
	}
	for _, l := range [][]string{c.ScopeTools, c.ScopeClasses, c.ScopeTargets} {
		if slices.Contains(l, "") {
			return invalid("scope", "a spawn scope entry is empty")
		}
	}
	e := base(events.KindDeny, now, node, c)
	e.Worker, e.Lane, e.Tool = c.Caller, c.Lane, ToolSpawn
	e.Epoch = s.epoch
	parent := s.fleet[c.Caller]
	if m := s.fleet[c.Key]; m != nil && m.Parent == c.Caller && m.Lane == c.Lane && !s.barred[c.Key] &&
		sameScope(c.ScopeTools, m.Tools) && sameScope(c.ScopeClasses, m.Classes) && sameScope(c.ScopeTargets, m.Targets) {
		// A retry of the spawn that recorded this child: its answer again.
		return reply(grants.Envelope{Decision: grants.Permit, Kind: events.KindSpawn, Seq: m.Seq,
			IssuedAt: m.IssuedAt, ExpiresAt: m.ExpiresAt, Worker: m.ID, Parent: m.Parent, Lane: m.Lane,
			Incarnation: s.incarnation(m.ID), Detail: "worker " + m.ID + " was spawned already"})
	}
	switch {
	case c.Key == c.Caller:
		return invalid("child", "a worker cannot spawn itself")
	case !strings.HasPrefix(c.Key, c.Caller+"-"):
		// Names are namespaced by their parent, so that no worker can
		// claim a name another worker (or operator) means for itself.
		return invalid("child", "a child's id starts with its parent's id and a dash (%s-...), got %q", c.Caller, c.Key)
	case s.fleet[c.Key] != nil || s.incarnation(c.Key) != 0 || s.barred[c.Key] ||
		s.counters.Get(revocation.Key(revocation.ScopeWorker, c.Key)) != 0 || s.byWorkerHas(c.Key, now):
		return record(deny(e, grants.ReasonInvalidRequest, "fresh child id",
			"worker "+c.Key+" exists already (spawned, revoked, restored or holding grants): a child gets an id never used"))
	case c.UserKey != "" && s.WritesWorkerKeys() && s.userKeys[c.UserKey] != "":
		// A key names one user: recording it for a second worker would
		// let that worker's revocation revoke the first one's credential.
		return record(deny(e, grants.ReasonInvalidRequest, "fresh user key",
			"the NATS user key is recorded for another worker already: every child gets a key pair of its own"))
	case s.barred[c.Caller]:
		return record(deny(e, grants.ReasonWorkerRevoked, "worker reinstated", "worker "+c.Caller+" is revoked"))
	case parent != nil && parent.ExpiresAt != 0 && now >= parent.ExpiresAt:
		return record(deny(e, grants.ReasonExpired, "live parent", "worker "+c.Caller+"'s lifetime has ended"))
	case parent != nil && parent.Blocked:
		return record(deny(e, grants.ReasonReviewRequired, "operator lift",
			"worker "+c.Caller+" is approval-blocked since its respawn: it spawns nothing until an operator lifts the block"))
	case c.Lane == lanes.Coordinator:
		return widens(e, "lane", "a spawned worker can never be a coordinator")
	case len(s.ancestors(c.Caller))+1 > MaxSpawnDepth:
		return widens(e, "depth", fmt.Sprintf("a spawn tree is at most %d deep", MaxSpawnDepth))
	}
	for _, a := range s.ancestors(c.Caller) {
		if s.barred[a.ID] {
			return record(deny(e, grants.ReasonWorkerRevoked, "worker reinstated", "ancestor "+a.ID+" is revoked"))
		}
	}
	var pTools, pClasses, pTargets []string
	pEnd := AddSat(now, MaxSpawnTTL)
	if parent != nil {
		pTools, pClasses, pTargets = parent.Tools, parent.Classes, parent.Targets
		if parent.ExpiresAt != 0 {
			pEnd = min(pEnd, parent.ExpiresAt)
		}
	}
	tools, classes, targets := c.ScopeTools, c.ScopeClasses, c.ScopeTargets
	if pTools != nil {
		if len(tools) == 0 {
			tools = pTools
		} else if _, err := lanes.Attenuate(pTools, tools); err != nil {
			return widens(e, "tools", fmt.Sprintf("%v: the parent %s may call %v", err, c.Caller, pTools))
		}
	} else {
		for _, t := range tools {
			if err := lanes.ValidPattern(t); err != nil {
				return invalid("tools", "%v", err)
			}
		}
	}
	if pClasses != nil {
		if len(classes) == 0 {
			classes = pClasses
		}
		for _, k := range classes {
			if !slices.Contains(pClasses, k) {
				return widens(e, "classes", fmt.Sprintf("consequence class %q: the parent %s may spend %v", k, c.Caller, pClasses))
			}
		}
	}
	if pTargets != nil {
		if len(targets) == 0 {
			targets = pTargets
		}
		for _, t := range targets {
			if !targetCovered(pTargets, t) {
				return widens(e, "targets", fmt.Sprintf("target %q: the parent %s may reach %v", t, c.Caller, pTargets))
			}
		}
	}
	end := AddSat(now, DefaultSpawnTTL)
	if c.TTL > 0 {
		end = AddSat(now, c.TTL)
		if end > pEnd {
			return widens(e, "ttl", fmt.Sprintf("the child would end %s after its parent %s (at most %s)",
				time.Duration(end-pEnd), c.Caller, time.Duration(pEnd-now)))
		}
	}
	end = min(end, pEnd)
	if end <= now {
		return widens(e, "ttl", "the parent "+c.Caller+" has no lifetime left to give")
	}
	e = base(events.KindSpawn, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker, e.Parent, e.Lane = c.Key, c.Caller, c.Lane
	if parent == nil {
		e.ParentLane = c.ParentLane
	}
	e.Incarnation = 1
	e.Counters = []events.Counter{{Key: revocation.Key(revocation.ScopeIncarnation, c.Key), Value: 1}}
	e.ScopeTools, e.ScopeClasses, e.ScopeTargets = sortedSet(tools), sortedSet(classes), sortedSet(targets)
	e.IssuedAt, e.ExpiresAt = now, end
	if s.WritesWorkerKeys() {
		e.UserKey = c.UserKey
	}
	return record(e)
}

// ToolSpawn is the tool name a refused spawn is recorded under.
const ToolSpawn = "writ.spawn"

// byWorkerHas reports whether worker holds any grant in memory.
func (s *State) byWorkerHas(worker string, now int64) bool {
	if s.byWorker != nil {
		return s.byWorker[worker].len() > 0
	}
	for _, g := range s.grants {
		if g.Worker == worker && now < RetainUntil(g.ExpiresAt) {
			return true
		}
	}
	return false
}

// sameScope reports whether a spawn's scope list asks for what a recorded
// child has (an empty list: whatever was inherited).
func sameScope(asked, has []string) bool {
	return len(asked) == 0 || slices.Equal(sortedSet(asked), has)
}

func sortedSet(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}

// targetCovered reports whether a child's target pattern is covered by
// one of its parent's: the same pattern, "*", a concrete target the
// parent's pattern matches, or a prefix pattern ("<p>*") inside one of
// the parent's prefix patterns.
func targetCovered(parent []string, t string) bool {
	for _, p := range parent {
		switch {
		case p == "*" || p == t:
			return true
		case !hasTargetMeta(t) && lanes.MatchTool(p, t):
			return true
		}
		pp, pok := strings.CutSuffix(p, "*")
		tp, tok := strings.CutSuffix(t, "*")
		if pok && tok && !hasTargetMeta(pp) && !hasTargetMeta(tp) && strings.HasPrefix(tp, pp) {
			return true
		}
	}
	return false
}

func hasTargetMeta(s string) bool { return strings.ContainsAny(s, "*?[\\") }

// targetAllowed reports whether a call's canonical target is inside a
// spawn scope's target patterns.
func targetAllowed(patterns []string, target string) bool {
	if target == "" {
		return false
	}
	for _, p := range patterns {
		if lanes.MatchTool(p, target) {
			return true
		}
	}
	return false
}

// evolveSpawn records a spawned child.
func (s *State) evolveSpawn(e *events.Event) {
	m := &member{
		ID: e.Worker, Parent: e.Parent, Lane: e.Lane,
		Tools: slices.Clone(e.ScopeTools), Classes: slices.Clone(e.ScopeClasses), Targets: slices.Clone(e.ScopeTargets),
		IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt, Seq: e.Seq, UserKey: e.UserKey,
	}
	if s.fleet[e.Parent] == nil {
		m.ParentLane = e.ParentLane
	}
	s.fleet[m.ID] = m
	if m.UserKey != "" {
		s.recordUserKey(m.UserKey, m.ID)
	}
	for _, c := range e.Counters {
		s.counters.Set(c.Key, c.Value)
	}
}

// fleetCheck judges a grant request of a recorded worker against its
// spawn record before the policy runs: lifetime, lane, tool and the
// ancestors' bars. It returns the refusal, or ok.
func (s *State) fleetCheck(e events.Event, c *Command, now int64) (verdict, bool) {
	m := s.fleet[c.Caller]
	if m == nil {
		return verdict{}, true
	}
	switch {
	case m.ExpiresAt != 0 && now >= m.ExpiresAt:
		return record(deny(e, grants.ReasonExpired, "live spawn", fmt.Sprintf("worker %s's lifetime ended (spawned by %s)", m.ID, m.Parent))), false
	case c.Lane != m.Lane:
		return record(deny(e, grants.ReasonLaneMismatch, "lane="+m.Lane, "worker "+m.ID+" runs in lane "+m.Lane)), false
	case m.Tools != nil && !lanes.Allowed(m.Tools, c.Tool):
		return record(deny(e, grants.ReasonScopeWidens, "tools", fmt.Sprintf("tool %s is outside worker %s's spawn scope %v", c.Tool, m.ID, m.Tools))), false
	}
	for _, a := range s.ancestors(c.Caller) {
		if s.barred[a.ID] {
			return record(deny(e, grants.ReasonWorkerRevoked, "worker reinstated", "ancestor "+a.ID+" of "+m.ID+" is revoked")), false
		}
	}
	return verdict{}, true
}

// fleetKeys returns the counter keys a grant of worker binds at the fleet
// level: its incarnation and its ancestors' worker counters.
func (s *State) fleetKeys(worker string, keys []string) []string {
	keys = append(keys, s.intern.counterKey(revocation.ScopeIncarnation, worker))
	for _, a := range s.ancestors(worker) {
		keys = append(keys, s.intern.counterKey(revocation.ScopeWorker, a.ID))
	}
	return keys
}

// fleetJudge narrows a policy judgement of a recorded worker's call: the
// consequence class and target must be inside its spawn scope, every
// ancestor's lane must allow the call too, and an approval-blocked
// worker's calls other than reads need a review. It returns the refusal,
// or ok.
func (s *State) fleetJudge(e events.Event, c *Command, j *policy.Judgement, req *policy.Request, now int64) (verdict, bool) {
	m := s.fleet[c.Caller]
	if m == nil || j.Decision == grants.Deny {
		return verdict{}, true
	}
	if m.Classes != nil && !slices.Contains(m.Classes, j.Consequence) {
		return record(deny(e, grants.ReasonScopeWidens, "classes", fmt.Sprintf("consequence class %q is outside worker %s's spawn scope %v", j.Consequence, m.ID, m.Classes))), false
	}
	if m.Targets != nil && !targetAllowed(m.Targets, j.Target) {
		return record(deny(e, grants.ReasonScopeWidens, "targets", fmt.Sprintf("target %q is outside worker %s's spawn scope %v", j.Target, m.ID, m.Targets))), false
	}
	for _, a := range s.ancestors(c.Caller) {
		if a.Lane == "" || a.Lane == c.Lane {
			continue
		}
		ar := *req
		ar.Worker, ar.Lane = a.ID, a.Lane
		if aj := s.policy.Judge(&ar, s, now); aj.Decision == grants.Deny {
			return record(deny(e, grants.ReasonScopeWidens, "lane", fmt.Sprintf(
				"the call is outside the lane %s of ancestor %s (%s)", a.Lane, a.ID, aj.Reason))), false
		}
	}
	if m.Blocked && j.Decision == grants.Permit && j.Operation != "read" && j.Consequence != "local_read" {
		j.Decision = grants.ApprovalRequired
		j.Reason, j.Missing = grants.ReasonReviewRequired, "operator approval (respawn block)"
		j.Detail = "worker " + m.ID + " was respawned approval-blocked: every call but a read needs a review until an operator lifts the block"
	}
	return verdict{}, true
}

// fleetLegacy is fleetJudge under a version 1 policy, which knows no
// consequence classes or targets: a worker whose spawn scope restricts
// them is refused, an ancestor's lane must allow the tool, and a blocked
// worker is refused outright.
func (s *State) fleetLegacy(e events.Event, c *Command) (verdict, bool) {
	m := s.fleet[c.Caller]
	if m == nil {
		return verdict{}, true
	}
	switch {
	case m.Classes != nil || m.Targets != nil:
		return record(deny(e, grants.ReasonScopeWidens, "version 2 policy", "a spawn scope with classes or targets is judged only under a version 2 policy")), false
	case m.Blocked:
		return record(deny(e, grants.ReasonReviewRequired, "operator lift", "worker "+m.ID+" was respawned approval-blocked until an operator lifts the block")), false
	}
	for _, a := range s.ancestors(c.Caller) {
		if a.Lane == "" || a.Lane == c.Lane {
			continue
		}
		if v := s.policy.Evaluate(a.ID, a.Lane, c.Tool); !v.Allowed {
			return record(deny(e, grants.ReasonScopeWidens, "lane", fmt.Sprintf("tool %s is outside the lane %s of ancestor %s", c.Tool, a.Lane, a.ID))), false
		}
	}
	return verdict{}, true
}

// capExpiry keeps a recorded worker's grant inside its lifetime.
func (s *State) capExpiry(worker string, e *events.Event) {
	if m := s.fleet[worker]; m != nil && m.ExpiresAt != 0 && e.ExpiresAt > m.ExpiresAt {
		e.ExpiresAt = m.ExpiresAt
	}
}

// decideRestore answers a worker restoring a checkpoint: a new
// incarnation, cancelling the old one's unspent grants.
func decideRestore(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesFleet() {
		return reply(s.fleetBelowLevel())
	}
	switch {
	case c.Caller == "" || isOperator(c.Caller):
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "worker", "a restore is asked by the worker restoring its checkpoint"))
	case s.barred[c.Caller]:
		return reply(grants.Refuse(grants.ReasonWorkerRevoked, "operator respawn",
			"worker "+c.Caller+" is revoked: a revoked worker does not restore itself; an operator respawns it"))
	}
	if m := s.fleet[c.Caller]; m != nil && m.ExpiresAt != 0 && now >= m.ExpiresAt {
		return reply(grants.Refuse(grants.ReasonExpired, "live spawn", "worker "+c.Caller+"'s lifetime has ended"))
	}
	e := base(events.KindIncarnation, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker = c.Caller
	return record(s.nextIncarnation(e, now))
}

// nextIncarnation fills in an incarnation event: the next incarnation,
// its counter and the unspent grants it cancels.
func (s *State) nextIncarnation(e events.Event, now int64) events.Event {
	e.Incarnation = s.incarnation(e.Worker) + 1
	e.Counters = []events.Counter{{Key: revocation.Key(revocation.ScopeIncarnation, e.Worker), Value: e.Incarnation}}
	e.Cancelled = s.outstanding(e.Worker, now)
	return e
}

// decideRespawn answers an operator's respawn of a worker (Key) in a lane
// (Lane): a new incarnation, reinstated, in that lane, approval-blocked.
func decideRespawn(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesFleet() {
		return reply(s.fleetBelowLevel())
	}
	refuse := func(r grants.Reason, missing, detail string) verdict {
		return reply(grants.Refuse(r, missing, detail))
	}
	switch {
	case !isOperator(c.Caller):
		return refuse(grants.ReasonUnauthorized, "operator", "only an operator respawns a worker")
	case !validWorkerID(c.Key):
		return refuse(grants.ReasonInvalidRequest, "worker", "a worker id is 1-64 of letters, digits, - and _")
	case c.Lane == "" || !validWorkerID(c.Lane):
		return refuse(grants.ReasonInvalidRequest, "lane", "a respawn names the lane the replacement runs in")
	}
	m := s.fleet[c.Key]
	if m != nil && m.Parent != "" {
		if c.Lane == lanes.Coordinator {
			return refuse(grants.ReasonScopeWidens, "lane", "a spawned worker can never be a coordinator")
		}
		if m.ExpiresAt != 0 && now >= m.ExpiresAt {
			return refuse(grants.ReasonExpired, "live spawn", "worker "+c.Key+"'s lifetime has ended: spawn a new child instead")
		}
		for _, a := range s.ancestors(c.Key) {
			if s.barred[a.ID] {
				return refuse(grants.ReasonWorkerRevoked, "ancestor "+a.ID+" respawned", "ancestor "+a.ID+" of "+c.Key+" is revoked: respawn it first")
			}
		}
	}
	e := base(events.KindIncarnation, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker, e.Lane, e.Blocked = c.Key, c.Lane, true
	e.Detail = c.Note
	return record(s.nextIncarnation(e, now))
}

// evolveIncarnation moves a worker's incarnation and cancels the old
// incarnation's grants; a respawn (Lane set) also reinstates the worker,
// records it in its lane and blocks it.
func (s *State) evolveIncarnation(e *events.Event) {
	for _, c := range e.Counters {
		s.counters.Set(c.Key, c.Value)
	}
	for _, id := range e.Cancelled {
		if g := s.grants[id]; g != nil && g.Status == grants.StatusPermitted {
			g.Status, g.RevokedSeq = grants.StatusRevoked, e.Seq
			s.touchGrant(g.ID)
		}
	}
	if e.Lane == "" {
		return // a restore
	}
	delete(s.barred, e.Worker)
	m := s.fleet[e.Worker]
	if m == nil {
		m = &member{ID: e.Worker, IssuedAt: e.Time, Seq: e.Seq}
		s.fleet[e.Worker] = m
	}
	m.Lane, m.Blocked = e.Lane, e.Blocked
}

// decideLift answers an operator lifting a respawned worker's block.
func decideLift(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesFleet() {
		return reply(s.fleetBelowLevel())
	}
	if !isOperator(c.Caller) {
		return reply(grants.Refuse(grants.ReasonUnauthorized, "operator", "only an operator lifts a respawn block; a worker never lifts its own"))
	}
	m := s.fleet[c.Key]
	if m == nil || !m.Blocked {
		return reply(grants.Envelope{Decision: grants.Permit, Detail: "worker " + c.Key + " is not approval-blocked"})
	}
	e := base(events.KindLift, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker, e.Detail = c.Key, c.Note
	return record(e)
}

func (s *State) evolveLift(e *events.Event) {
	if m := s.fleet[e.Worker]; m != nil {
		m.Blocked = false
	}
}

// revokeSubtree fills in a worker revocation at the fleet level: every
// descendant's counter moves too, and the event lists the revoked
// workers, their cancelled grants, ended leases and cancelled reviews.
func (s *State) revokeSubtree(e *events.Event, now int64) {
	ws := s.subtree(e.Worker)
	e.Workers = ws
	e.Counters = e.Counters[:0]
	var cancelled, routes, reviews []string
	for _, w := range ws {
		k := revocation.Key(revocation.ScopeWorker, w)
		e.Counters = append(e.Counters, events.Counter{Key: k, Value: s.counters.Get(k) + 1})
		cancelled = append(cancelled, s.outstanding(w, now)...)
		if s.WritesRoutes() {
			routes = append(routes, s.endLeasesOf(w, now)...)
		}
	}
	set := map[string]bool{}
	for _, w := range ws {
		set[w] = true
	}
	for id, r := range s.reviews {
		if set[r.Worker] && r.Status == rsOpen && now < r.Until {
			reviews = append(reviews, id)
		}
	}
	for k, a := range s.approvals {
		if set[k.Worker] && now < a.ExpiresAt {
			reviews = append(reviews, a.ReviewID)
		}
	}
	slices.SortFunc(e.Counters, func(a, b events.Counter) int { return strings.Compare(a.Key, b.Key) })
	e.Cancelled, e.Routes, e.Reviews = sortedSet(cancelled), sortedSet(routes), sortedSet(reviews)
}

// checkFleetEvent refuses a spawn or incarnation event whose counters are
// not exactly the worker's incarnation counter at the event's
// incarnation, so that a replayed stream cannot move any other counter
// through one.
func checkFleetEvent(e *events.Event) error {
	want := events.Counter{Key: revocation.Key(revocation.ScopeIncarnation, e.Worker), Value: e.Incarnation}
	if len(e.Counters) != 1 || e.Counters[0] != want || e.Worker == "" {
		return fmt.Errorf("seq %d %s: counters %v, want [%s=%d]", e.Seq, e.Kind, e.Counters, want.Key, want.Value)
	}
	return nil
}

// incarnationDetail names the incarnations when a grant is refused
// because its worker has moved to a later one ("" otherwise).
func (s *State) incarnationDetail(g *grants.Grant) string {
	key := revocation.Key(revocation.ScopeIncarnation, g.Worker)
	for _, c := range g.Counters {
		if c.Key == key {
			if now := s.counters.Get(key); now != c.Value {
				return fmt.Sprintf("granted to incarnation %d of worker %s, which is at incarnation %d now (restored or respawned): nothing from an earlier incarnation is spendable",
					c.Value, g.Worker, now)
			}
		}
	}
	return ""
}

// WritesWorkerKeys reports whether a spawn records the NATS user key it
// names (receipt format level 12).
func (s *State) WritesWorkerKeys() bool { return s.ReceiptFormat() >= ReceiptFormatWorkerKeys }

// recordUserKey indexes a recorded user key.
func (s *State) recordUserKey(key, worker string) {
	if s.userKeys == nil {
		s.userKeys = map[string]string{}
	}
	s.userKeys[key] = worker
}

// ValidUserKey reports whether k has the form of a public user nkey: "U"
// then 55 characters of the RFC 4648 base32 alphabet (the checksum is the
// issuer's to verify before it proposes).
func ValidUserKey(k string) bool {
	if len(k) != 56 || k[0] != 'U' {
		return false
	}
	for i := 1; i < len(k); i++ {
		if c := k[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// LiveUserKey is the NATS user key a worker's spawn recorded while its
// credential may be signed: the worker is at the incarnation its spawn
// started and neither it nor an ancestor is revoked ("" otherwise, or
// when the spawn recorded none). Its lifetime is the signer's to check.
func (s *State) LiveUserKey(worker string) string {
	m := s.fleet[worker]
	if m == nil || m.UserKey == "" || s.barred[worker] || s.incarnation(worker) != 1 {
		return ""
	}
	for _, a := range s.ancestors(worker) {
		if s.barred[a.ID] {
			return ""
		}
	}
	return m.UserKey
}

// UserKeyEnded reports whether key is a NATS user key a spawn recorded
// for a worker whose lifetime ended at or before t: every credential
// signed for it has expired by then, and none is signed again.
func (s *State) UserKeyEnded(key string, t int64) bool {
	m := s.fleet[s.userKeys[key]]
	return m != nil && m.UserKey == key && m.ExpiresAt != 0 && m.ExpiresAt <= t
}

// RevokedUserKeys lists, sorted, the NATS user keys of recorded workers
// whose credential must be refused at now: the worker (or an ancestor) is
// revoked, or it moved past the incarnation its spawn recorded (a restore
// or a respawn), while its lifetime has not ended (after that the
// credential has expired on its own).
func (s *State) RevokedUserKeys(now int64) []string {
	var out []string
	for _, id := range s.userKeys {
		m := s.fleet[id]
		if m == nil || m.UserKey == "" || m.ExpiresAt != 0 && now >= m.ExpiresAt {
			continue
		}
		dead := s.barred[id] || s.incarnation(id) != 1
		for _, a := range s.ancestors(id) {
			dead = dead || s.barred[a.ID]
		}
		if dead {
			out = append(out, m.UserKey)
		}
	}
	sort.Strings(out)
	return out
}
