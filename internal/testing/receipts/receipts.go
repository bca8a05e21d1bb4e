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

// reviewPolicy holds vault_read calls (credential_use) for a review.
const reviewPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]}}`

// sim drives the real state machine and remembers its digest at every
// sequence, as an issuer would report it.
type Sim struct {
	S       *fsm.State
	Now     int64
	index   uint64
	Digests map[uint64]events.Hash
}

func NewSim(t testing.TB) *Sim {
	m := &Sim{S: fsm.New(), Now: T0, Digests: map[uint64]events.Hash{}}
	env := fsm.Apply(m.S, 0, fsm.Batch{Time: T0, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.MaxReceiptFormat}}})
	if env[0].Decision != grants.Permit {
		t.Fatalf("raise format: %+v", env[0])
	}
	m.Apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
	return m
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

// everyKind runs a scenario that writes a receipt of every kind this
// build knows: permits, denials, attempts, refused spends, agreeing,
// unknown and conflicting effects, refused effects, a revocation that
// cancels a grant, a reinstatement, sources (accepted and refused), a
// held call, its approval and the permit that consumes it, a refusal
// summary and policy epochs.
func EveryKind(t testing.TB) (*Sim, map[string]uint64) {
	m := NewSim(t)
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
	m.Apply(vreq("g6")) // approval_required
	at["g6"] = m.S.Chain().Seq
	m.Apply(fsm.Command{Op: fsm.OpApprove, Caller: "operator:alice", ReviewID: fsm.ReviewID("g6"), TTL: int64(time.Minute), Note: "owner said yes"})
	m.Apply(vreq("g7")) // permitted under the approval
	at["g7"] = m.S.Chain().Seq
	m.Apply(fsm.Command{Op: fsm.OpSpend, Caller: "w5", GrantID: "g7", Digest: vd, IdemKey: "s7"})
	m.Apply(fsm.Command{Op: fsm.OpEffect, Caller: "w5", GrantID: "g7", Outcome: "confirmed", Verifier: "vault-audit"})
	m.Apply(vreq("g8")) // held again: the approval is used up
	m.Apply(fsm.Command{Op: fsm.OpBreakGlass, Caller: "operator", CaseID: "inc-1", GlassScope: "worker:w5",
		TTL: int64(30 * time.Minute), Note: "which vault entry did w5 read?"})
	at["glass"] = m.S.Chain().Seq
	return m, at
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
