package projection

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

const (
	t0  = int64(1_760_000_000_000_000_000)
	sec = int64(time.Second)
)

// reviewPolicy holds vault_read calls (credential_use) for a review.
const reviewPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]}}`

// sim drives the real state machine and remembers its digest at every
// sequence, as an issuer would report it.
type sim struct {
	s       *fsm.State
	now     int64
	index   uint64
	digests map[uint64]events.Hash
	sent    int
}

func newSim(t *testing.T) *sim {
	m := &sim{s: fsm.New(), now: t0, digests: map[uint64]events.Hash{}}
	env := fsm.Apply(m.s, 0, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatSummaries}}})
	if env[0].Decision != grants.Permit {
		t.Fatalf("raise format: %+v", env[0])
	}
	m.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
	return m
}

func (m *sim) apply(cmds ...fsm.Command) []grants.Envelope {
	m.index++
	out := fsm.Apply(m.s, m.index, fsm.Batch{Time: m.now, Node: "n1", Commands: cmds})
	m.digests[m.s.Chain().Seq] = m.s.Digest()
	m.now += sec
	return out
}

// raw is every receipt so far.
func (m *sim) raw() [][]byte {
	var out [][]byte
	for _, p := range m.s.Outbox(0, 0) {
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
func everyKind(t *testing.T) (*sim, map[string]uint64) {
	m := newSim(t)
	at := map[string]uint64{}
	d := func(s string) events.Hash { return events.Sum([]byte(s)) }
	req := func(id, w, lane, tool string, dg events.Hash) fsm.Command {
		return fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: lane, Tool: tool, GrantID: id, Digest: dg, IdemKey: "k-" + id}
	}
	m.apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "s1", Channel: "web_fetch", Scope: "task", ContentDigest: d("page")})
	m.apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "ds1", Channel: "derived", Scope: "task", Origins: []string{"s1"}, ContentDigest: d("derived")})
	m.apply(fsm.Command{Op: fsm.OpSource, Caller: "w1", SourceID: "s1", Channel: "web_fetch", Scope: "task", ContentDigest: d("other page")}) // conflicting: refused
	m.apply(req("g1", "w1", "isolated", "Read", d("a")))
	at["g1"] = m.s.Chain().Seq
	m.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d("a"), IdemKey: "s1"})
	m.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d("a"), IdemKey: "s2"}) // already spent
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "v1"})
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "v2"}) // collapses
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "failed", Verifier: "v3"})    // contested
	m.apply(req("g2", "w2", "isolated", "Read", d("b")))
	m.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w2", GrantID: "g2", Digest: d("b"), IdemKey: "s3"})
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w2", GrantID: "g2", Outcome: "unknown", Verifier: "v1"})
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w2", GrantID: "g2", Outcome: "confirmed", Verifier: "v1"}) // resolves unknown
	m.apply(req("g3", "w3", "isolated", "Read", d("c")))
	m.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w3", GrantID: "g3", Digest: d("c"), IdemKey: "s4"}) // never verified
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w3", GrantID: "g9", Outcome: "confirmed", Verifier: "v1"})
	m.apply(req("g4", "w2", "isolated", "Read", d("d")))
	at["g4"] = m.s.Chain().Seq
	m.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:alice", Key: "worker/w2"})
	m.apply(req("g5", "w2", "isolated", "Read", d("e"))) // worker revoked: deny
	m.apply(fsm.Command{Op: fsm.OpReinstate, Caller: "operator:alice", Key: "w2"})
	m.apply(fsm.Command{Op: fsm.OpRefusalSummary, Caller: "issuer:n1", Key: "w4", Tool: "spend", Amount: 17, Since: m.now - sec, Until: m.now})

	m.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: []byte(reviewPolicy)})
	call := []byte(`{"name":"db"}`)
	vd, _ := args.Digest("vault_read", call)
	flat, _ := args.Flatten(call)
	vreq := func(id string) fsm.Command {
		return fsm.Command{Op: fsm.OpRequest, Caller: "w5", Lane: "coordinator", Tool: "vault_read", GrantID: id, Digest: vd, IdemKey: "k-" + id, Args: flat}
	}
	m.apply(vreq("g6")) // approval_required
	at["g6"] = m.s.Chain().Seq
	m.apply(fsm.Command{Op: fsm.OpApprove, Caller: "operator:alice", ReviewID: fsm.ReviewID("g6"), TTL: int64(time.Minute), Note: "owner said yes"})
	m.apply(vreq("g7")) // permitted under the approval
	at["g7"] = m.s.Chain().Seq
	m.apply(fsm.Command{Op: fsm.OpSpend, Caller: "w5", GrantID: "g7", Digest: vd, IdemKey: "s7"})
	m.apply(fsm.Command{Op: fsm.OpEffect, Caller: "w5", GrantID: "g7", Outcome: "confirmed", Verifier: "vault-audit"})
	m.apply(vreq("g8")) // held again: the approval is used up
	return m, at
}

// workload adds n random batches of requests, spends, effects,
// revocations and clock jumps past retention.
func workload(m *sim, seed uint64, n int) {
	r := rand.New(rand.NewPCG(seed, 7))
	m.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: policy.LegacyDefault().Canonical()})
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
		m.apply(cmds...)
		if r.IntN(15) == 0 {
			m.now += int64(10 * time.Minute)
		}
	}
}

func openTemp(t *testing.T, name string, commitEvery int) *DB {
	t.Helper()
	cfg := DefaultConfig(filepath.Join(t.TempDir(), name))
	cfg.CommitEvery = commitEvery
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func applyAll(t *testing.T, d *DB, raw [][]byte) {
	t.Helper()
	for _, b := range raw[d.Head().Seq:] {
		if err := d.Apply(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}
