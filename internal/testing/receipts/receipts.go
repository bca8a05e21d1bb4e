// Package receipts builds receipt streams with the real state machine for
// tests of the auditor: a scenario with a receipt of every kind, and a
// random workload.
package receipts

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

const (
	T0  = int64(1_760_000_000_000_000_000)
	Sec = int64(time.Second)
)

// reviewPolicy holds vault_read calls (credential_use) for a review, lets
// file reads through, and declares a route cron workers may own (leases
// of 30s at most), under which they may only read.
const reviewPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}},
  {"id":"file_read","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}}],
 "review":{"classes":["credential_use"]},
 "routes":[{"name":"inbox-triage@*","workers":["cron*"],"max_ttl":"30s","consequences":["local_read"]}]}`

// sim drives the real state machine and remembers its digest at every
// sequence, as an issuer would report it.
type Sim struct {
	S       *fsm.State
	Now     int64
	index   uint64
	Digests map[uint64]events.Hash
}

// NewSim starts a state machine at the highest receipt format level.
func NewSim(t testing.TB) *Sim { return NewSimAt(t, fsm.MaxReceiptFormat) }

// NewSimAt starts a state machine at receipt format level format, under
// the legacy default policy.
func NewSimAt(t testing.TB, format uint64) *Sim {
	m := &Sim{S: fsm.New(), Now: T0, Digests: map[uint64]events.Hash{}}
	env := fsm.Apply(m.S, 0, fsm.Batch{Time: T0, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: format}}})
	if env[0].Decision != grants.Permit {
		t.Fatalf("raise format: %+v", env[0])
	}
	m.Apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
	return m
}

// RaiseFormat raises the receipt format level, as the leader does once
// every voter supports it (it records no receipt).
func (m *Sim) RaiseFormat(t testing.TB, format uint64) {
	if env := m.Apply(fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: format}); env[0].Decision != grants.Permit {
		t.Fatalf("raise format: %+v", env[0])
	}
}

// must applies one command and fails t unless its answer is decision.
func (m *Sim) must(t testing.TB, decision grants.Decision, c fsm.Command) grants.Envelope {
	t.Helper()
	env := m.Apply(c)
	if env[0].Decision != decision {
		t.Fatalf("%s by %s: %+v, want %s", c.Op, c.Caller, env[0], decision)
	}
	return env[0]
}

func (m *Sim) Apply(cmds ...fsm.Command) []grants.Envelope {
	m.index++
	out := fsm.Apply(m.S, m.index, fsm.Batch{Time: m.Now, Node: "n1", Commands: cmds})
	m.Digests[m.S.Chain().Seq] = m.S.Digest()
	m.Now += Sec
	return out
}

// raw is every receipt so far.
func (m *Sim) Raw() [][]byte {
	var out [][]byte
	for _, p := range m.S.Outbox(0, 0) {
		out = append(out, p.Data)
	}
	return out
}

// EveryKind runs a scenario that writes a receipt of every kind this
// build knows: permits, denials, attempts, refused spends, agreeing,
// unknown and conflicting effects, refused effects, a revocation that
// cancels a grant, a reinstatement, sources (accepted and refused), a
// refusal summary and policy epochs at receipt format level 3, where a
// held call's approval is an approval receipt (worker w6, grants l1 and
// l2); then, at the highest level, reviews as decision records: an
// artifact review superseded by its next version, an orphaned reply, an
// approval and a rejection by plain-text replies (worker w7), an approval
// that lapses unused (w7, grants x1 and x2), a held call approved by
// command and the permit that consumes it (w5, grants g6 to g8), a
// break-glass case, route leases (see routes) and a fleet (see fleet).
func EveryKind(t testing.TB) (*Sim, map[string]uint64) {
	m := NewSimAt(t, fsm.ReceiptFormatSummaries)
	at := map[string]uint64{}
	d := func(s string) events.Hash { return events.Sum([]byte(s)) }
	req := func(id, w, lane, tool string, dg events.Hash) fsm.Command {
		return fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: lane, Tool: tool, GrantID: id, Digest: dg, IdemKey: "k-" + id}
	}
	m.Apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "s1", Channel: authority.ChannelWebFetch, Scope: "task", ContentDigest: d("page")})
	m.Apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "ds1", Channel: authority.ChannelDerived, Scope: "task", Origins: []string{"s1"}, ContentDigest: d("derived content")})
	m.Apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "s1", Channel: authority.ChannelWebFetch, Scope: "task", ContentDigest: d("other page")}) // conflicting: refused
	m.Apply(req("g1", "w1", "isolated", "Read", d("a")))
	at["g1"] = m.S.Chain().Seq
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d("a"), IdemKey: "s1"})
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d("a"), IdemKey: "s2"}) // already spent
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "v1"})
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "v2"}) // collapses
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "failed", Verifier: "v3"})    // contested
	m.Apply(req("g2", "w2", "isolated", "Read", d("b")))
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w2", GrantID: "g2", Digest: d("b"), IdemKey: "s3"})
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w2", GrantID: "g2", Outcome: "unknown", Verifier: "v1"})
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w2", GrantID: "g2", Outcome: "confirmed", Verifier: "v1"}) // resolves unknown
	m.Apply(req("g3", "w3", "isolated", "Read", d("c")))
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w3", GrantID: "g3", Digest: d("c"), IdemKey: "s4"}) // never verified
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w3", GrantID: "g9", Outcome: "confirmed", Verifier: "v1"})
	m.Apply(req("g4", "w2", "isolated", "Read", d("d")))
	at["g4"] = m.S.Chain().Seq
	m.Apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/w2"})
	m.Apply(req("g5", "w2", "isolated", "Read", d("e"))) // worker revoked: deny
	m.Apply(fsm.Command{Op: fsm.OpReinstate, Caller: "operator:alice", Key: "w2"})
	m.Apply(fsm.Command{Op: fsm.OpRefusalSummary, Caller: "issuer:n1", Key: "w4", Tool: "spend", Amount: 17, Since: m.Now - Sec, Until: m.Now})

	m.Apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: []byte(reviewPolicy)})
	call := []byte(`{"name":"db"}`)
	vd, _ := args.Digest("vault_read", call)
	flat, _ := args.Flatten(call)
	vreq := func(id string) fsm.Command {
		return fsm.Command{Op: fsm.OpRequest, Caller: "w5", Lane: "coordinator", Tool: "vault_read", GrantID: id, Digest: vd, IdemKey: "k-" + id, Args: flat}
	}
	wreq := func(w, id, name string) fsm.Command {
		call := []byte(`{"name":"` + name + `"}`)
		dg, _ := args.Digest("vault_read", call)
		fl, _ := args.Flatten(call)
		return fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "vault_read", GrantID: id, Digest: dg, IdemKey: "k-" + id, Args: fl}
	}

	// Level 3: a held call's approval is an approval receipt.
	m.must(t, grants.ApprovalRequired, wreq("w6", "l1", "ledger"))
	at["l1"] = m.S.Chain().Seq
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpApprove, Caller: "operator:bob", ReviewID: fsm.ReviewID("l1"), TTL: int64(time.Minute)})
	m.must(t, grants.Permit, wreq("w6", "l2", "ledger"))
	at["l2"] = m.S.Chain().Seq

	// The highest level: reviews are decision records.
	m.RaiseFormat(t, fsm.MaxReceiptFormat)
	open := func(name, digest string) fsm.Command {
		return fsm.Command{Op: fsm.OpOpenReview, Caller: "w7", Lane: "coordinator", Caption: name, Path: "out/" + name + ".pdf",
			ContentDigest: d(digest), Transition: "review_ready->send", Destination: "class:finance", ReviewerRole: "finance"}
	}
	reply := func(text string, sentAgo int64) fsm.Command {
		return fsm.Command{Op: fsm.OpReviewReply, Caller: "operator:alice", Channel: "slack:#finance", Sender: "dana", ReplyAt: m.Now - sentAgo, Text: text}
	}
	// Commands in one log entry, as the issuer batches them (one second
	// of the clock for all, so that the scenario's grants stay live).
	batch := func(want []grants.Decision, cmds ...fsm.Command) {
		t.Helper()
		for i, env := range m.Apply(cmds...) {
			if env.Decision != want[i] {
				t.Fatalf("%s by %s: %+v, want %s", cmds[i].Op, cmds[i].Caller, env, want[i])
			}
		}
	}
	type dd = []grants.Decision
	batch(dd{grants.Permit, grants.Permit}, open("q3-report", "q3 v1"), open("q3-report", "q3 v2")) // v2 supersedes v1
	at["q3v2"] = m.S.Chain().Seq - 1
	batch(dd{grants.Deny, grants.Permit}, reply("what is this?", 2*Sec), reply("q3-report_v2_keep, ship it", Sec)) // orphaned; approved
	at["orphan"], at["q3v2approved"] = m.S.Chain().Seq-1, m.S.Chain().Seq
	batch(dd{grants.Permit, grants.Deny}, open("notes", "notes v1"), reply("no to notes_v1_review, the numbers are wrong", 0)) // rejected by the reply
	at["notesrejected"] = m.S.Chain().Seq
	batch(dd{grants.ApprovalRequired, grants.Permit}, wreq("w7", "x1", "payroll"),
		fsm.Command{Op: fsm.OpDecideReview, Caller: "operator:alice", ReviewID: fsm.ReviewID("x1"), Outcome: "approve", TTL: Sec})
	m.must(t, grants.Deny, wreq("w7", "x2", "payroll")) // a second later the approval has lapsed: approval_unbindable and review_expired
	at["x2"] = m.S.Chain().Seq

	// A held call approved by command and the permit that consumes it.
	m.Apply(vreq("g6")) // approval_required
	at["g6"] = m.S.Chain().Seq
	m.Apply(fsm.Command{Op: fsm.OpApprove, Caller: "operator:alice", ReviewID: fsm.ReviewID("g6"), TTL: int64(time.Minute), Note: "owner said yes"})
	m.Apply(vreq("g7")) // permitted under the approval, which it consumes
	at["g7"] = m.S.Chain().Seq - 1
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w5", GrantID: "g7", Digest: vd, IdemKey: "s7"})
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w5", GrantID: "g7", Outcome: "confirmed", Verifier: "vault-audit"})
	m.Apply(vreq("g8")) // held again: the approval is used up
	m.Apply(fsm.Command{Op: fsm.OpBreakGlass, Caller: "operator", CaseID: "inc-1", GlassScope: "worker:w5",
		TTL: int64(30 * time.Minute), Note: "which vault entry did w5 read?"})
	at["glass"] = m.S.Chain().Seq
	routes(t, m, at)
	fleet(t, m, at)
	return m, at
}

// fleet is the fleet section of EveryKind: w8 spawns w8-c, the child
// restores a checkpoint (a new incarnation), revoking w8 revokes both in
// one entry, an operator respawns w8 approval-blocked and lifts the block.
func fleet(t testing.TB, m *Sim, at map[string]uint64) {
	t.Helper()
	cmds := []fsm.Command{
		{Op: fsm.OpSpawn, Caller: "w8", Key: "w8-c", Lane: "isolated", ParentLane: "specialist"},
		{Op: fsm.OpRestore, Caller: "w8-c"},
		{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/w8"},
		{Op: fsm.OpRespawn, Caller: "operator:alice", Key: "w8", Lane: "specialist", Note: "inc-2"},
		{Op: fsm.OpLift, Caller: "operator:alice", Key: "w8", Note: "inc-2 closed"},
	}
	// One log entry, on the clock of the section before, so that the
	// scenario's times (and the windows tests read them through) stay.
	m.Now -= Sec
	before := m.S.Chain().Seq
	for i, env := range m.Apply(cmds...) {
		if env.Decision != grants.Permit {
			t.Fatalf("%s by %s: %+v", cmds[i].Op, cmds[i].Caller, env)
		}
	}
	at["spawn"], at["fleetrevoke"] = before+1, before+3
}

// Route is the route of the scenario's route section.
const Route = "inbox-triage@acme"

// routes is the route section of EveryKind: cron1 acquires the route
// (generation 1), renews it, does work under it (grant rt1: permit,
// attempt, a clean effect) and releases it; cron2 acquires it
// (generation 2), spends grant rt2 under it and lets the lease lapse,
// which the leader records (route_lapsed); cron1 takes the route over
// (route_taken, generation 3), cron2's late effect for rt2 is recorded
// route_stale, its request under generation 2 is refused owner_stale,
// and revoking cron1 ends generation 3 in the revocation (ForgetRoute
// goes on a day later).
//
// The policy in force (reviewPolicy) declares the route.
func routes(t testing.TB, m *Sim, at map[string]uint64) {
	read := func(w, id, path string, gen uint64) fsm.Command {
		call := []byte(`{"file_path":"` + path + `"}`)
		dg, _ := args.Digest("Read", call)
		fl, _ := args.Flatten(call)
		return fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "coordinator", Tool: "Read", GrantID: id, Digest: dg,
			IdemKey: "k-" + id, Args: fl, Route: Route, RouteGen: gen}
	}
	spend := func(w, id, path, key string) fsm.Command {
		c := read(w, id, path, 0)
		return fsm.Command{Op: fsm.OpSpend, Caller: w, GrantID: id, Digest: c.Digest, IdemKey: key}
	}
	lease := func(op fsm.Op, w string, ttl int64) fsm.Command {
		return fsm.Command{Op: op, Caller: w, Lane: "coordinator", Route: Route, TTL: ttl}
	}
	m.must(t, grants.Permit, lease(fsm.OpRouteAcquire, "cron1", 10*Sec)) // route_acquired, generation 1
	at["route_acquired"] = m.S.Chain().Seq
	m.must(t, grants.Permit, lease(fsm.OpRouteRenew, "cron1", 20*Sec))
	at["route_renewed"] = m.S.Chain().Seq
	m.must(t, grants.Permit, read("cron1", "rt1", "/work/cron1/inbox", 1))
	at["rt1"] = m.S.Chain().Seq
	m.must(t, grants.Permit, spend("cron1", "rt1", "/work/cron1/inbox", "a-rt1"))
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpEffect, Caller: "cron1", GrantID: "rt1", Outcome: "confirmed", Verifier: "hook"})
	m.must(t, grants.Permit, lease(fsm.OpRouteRelease, "cron1", 0))
	at["route_released"] = m.S.Chain().Seq
	m.must(t, grants.Permit, lease(fsm.OpRouteAcquire, "cron2", 5*Sec)) // generation 2
	m.must(t, grants.Permit, read("cron2", "rt2", "/work/cron2/inbox", 0))
	at["rt2"] = m.S.Chain().Seq
	m.must(t, grants.Permit, spend("cron2", "rt2", "/work/cron2/inbox", "a-rt2"))
	// Nobody renews: ten seconds on, the lease has lapsed, and the
	// leader records it.
	m.Now += 10 * Sec
	if l := m.S.LapsedRoutes(m.Now); len(l) != 1 || l[0] != Route {
		t.Fatalf("lapsed routes at %d: %v", m.Now, l)
	}
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpRouteLapse, Caller: "issuer:n1", Route: Route})
	at["route_lapsed"] = m.S.Chain().Seq
	m.must(t, grants.Permit, lease(fsm.OpRouteAcquire, "cron1", 0)) // route_taken, generation 3
	at["route_taken"] = m.S.Chain().Seq
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpEffect, Caller: "cron2", GrantID: "rt2", Outcome: "confirmed", Verifier: "hook"}) // route_stale
	at["route_stale"] = m.S.Chain().Seq
	m.must(t, grants.Deny, read("cron2", "rt3", "/work/cron2/inbox", 2)) // owner_stale: generation 2 ended
	at["rt3"] = m.S.Chain().Seq
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/cron1"}) // ends generation 3
	at["route_revoked"] = m.S.Chain().Seq
}

// ForgetRoute continues EveryKind a day later, when the leader forgets the
// route's free record (route_forgotten; the generation high-water mark
// keeps generation 3). Apart from EveryKind, since a day passing closes
// what the scenario leaves open (break-glass cases, time windows).
func ForgetRoute(t testing.TB, m *Sim, at map[string]uint64) {
	m.Now += int64(fsm.RouteRetention)
	if f := m.S.ForgettableRoutes(m.Now); len(f) != 1 || f[0] != Route {
		t.Fatalf("forgettable routes at %d: %v", m.Now, f)
	}
	m.must(t, grants.Permit, fsm.Command{Op: fsm.OpRouteForget, Caller: "issuer:n1", Route: Route})
	at["route_forgotten"] = m.S.Chain().Seq
}

// workload adds n random batches of requests, spends, effects,
// revocations and clock jumps past retention.
func Workload(m *Sim, seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, 7))
	m.Apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
	workers := []string{"w1", "w2", "w3"}
	type issued struct {
		id, w string
		d     events.Hash
	}
	var live []issued
	for i := range n {
		var cmds []fsm.Command
		for range 1 + r.IntN(3) {
			w := workers[r.IntN(len(workers))]
			switch p := r.IntN(100); {
			case p < 40:
				id := fmt.Sprintf("r%d-%d", seed, i)
				dg := events.Sum(fmt.Appendf(nil, "%d", r.IntN(4)))
				cmds = append(cmds, fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "isolated", Tool: "Read", GrantID: id, Digest: dg, IdemKey: id})
				live = append(live, issued{id, w, dg})
			case p < 70 && len(live) > 0:
				g := live[r.IntN(len(live))]
				cmds = append(cmds, fsm.Command{Op: fsm.OpSpend, Caller: g.w, GrantID: g.id, Digest: g.d, IdemKey: "s" + g.id})
			case p < 95 && len(live) > 0:
				g := live[r.IntN(len(live))]
				cmds = append(cmds, fsm.Command{Op: fsm.OpEffect, Caller: g.w, GrantID: g.id,
					Outcome: []string{"confirmed", "failed", "unknown"}[r.IntN(3)], Verifier: []string{"v1", "v2"}[r.IntN(2)]})
			default:
				cmds = append(cmds, fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "lane/isolated"})
			}
		}
		m.Apply(cmds...)
		if r.IntN(15) == 0 {
			m.Now += int64(10 * time.Minute)
		}
	}
}
