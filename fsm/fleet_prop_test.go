package fsm_test

// Fleet properties: random spawn trees under the engine scripts' version 2
// policy at receipt format level 8, with requests, spends, restores and
// revocations between the spawns.

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/lanes"
	"github.com/writ-dev/writ/policy"
)

// fleetRig drives one state through single-command entries.
type fleetRig struct {
	t     *rapid.T
	s     *fsm.State
	raft  uint64
	at    int64
	ids   []string // every worker that may exist: roots then children
	grant int
}

func newFleetRig(t *rapid.T) *fleetRig {
	r := &fleetRig{t: t, s: fsm.New(), at: int64(1000 * time.Second), ids: []string{"r1", "r2"}}
	r.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: scriptPolicy("v2.yaml")})
	r.apply(fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatFleet})
	return r
}

// apply applies one command as its own entry and returns its answer and
// the events it recorded.
func (r *fleetRig) apply(c fsm.Command) (grants.Envelope, []events.Event) {
	r.raft++
	before := r.s.Chain().Seq
	env := fsm.Apply(r.s, r.raft, fsm.Batch{Time: r.at, Node: "n1", Commands: []fsm.Command{c}})[0]
	var evs []events.Event
	for _, p := range r.s.Outbox(before, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			r.t.Fatalf("seq %d does not decode: %v", p.Seq, err)
		}
		evs = append(evs, e)
	}
	return env, evs
}

// spawn draws a spawn from a random existing worker, with a scope drawn
// from a universe that both fits inside and reaches past the parent's.
func (r *fleetRig) spawn() {
	t := r.t
	sub := func(label string, from []string) []string {
		var out []string
		for _, v := range from {
			if rapid.IntRange(0, 2).Draw(t, label) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	parent := rapid.SampledFrom(r.ids).Draw(t, "parent")
	child := parent + "-c" + strconv.Itoa(len(r.ids))
	if len(child) > 64 {
		return
	}
	c := fsm.Command{Op: fsm.OpSpawn, Caller: parent, Key: child,
		Lane:         rapid.SampledFrom([]string{"specialist", "isolated", "coordinator"}).Draw(t, "lane"),
		ParentLane:   rapid.SampledFrom([]string{"", "specialist", "isolated"}).Draw(t, "parentLane"),
		ScopeTools:   sub("tools", []string{"Bash", "Read", "Write", "R*", "*"}),
		ScopeClasses: sub("classes", []string{"local_read", "local_mutation", "arbitrary_execution"}),
		ScopeTargets: sub("targets", []string{"path:/work/*", "path:/work/c1/*", "path:/work/c2/*", "shell:*", "*"}),
		TTL:          int64(rapid.SampledFrom([]time.Duration{0, time.Minute, 30 * time.Minute, 2 * time.Hour, 48 * time.Hour}).Draw(t, "ttl")),
	}
	if env, _ := r.apply(c); env.Decision == grants.Permit {
		r.ids = append(r.ids, child)
	}
}

// request draws a request by a random worker; it returns the grant id
// when permitted.
func (r *fleetRig) request() (string, bool) {
	t := r.t
	tool := rapid.SampledFrom([]string{"Bash", "Read", "Write"}).Draw(t, "tool")
	worker := rapid.SampledFrom(r.ids).Draw(t, "worker")
	raw := rapid.SampledFrom(map[string][]string{
		"Bash":  {`{"command":"ls"}`, `{"command":"go test"}`},
		"Read":  {`{"file_path":"/work/c1/a"}`, `{"file_path":"/work/c2/a"}`, `{"file_path":"/work/` + worker + `/a"}`},
		"Write": {`{"file_path":"/work/` + worker + `/a","content":"x"}`},
	}[tool]).Draw(t, "call")
	lane := "specialist"
	if m, ok := r.s.Member(worker); ok {
		lane = m.Lane
	}
	r.grant++
	id := "g" + strconv.Itoa(r.grant)
	c := fsm.Command{Op: fsm.OpRequest, Caller: worker, Lane: lane, Tool: tool, GrantID: id, Cwd: "/work/" + worker}
	c.Digest, _ = grants.DigestArgs(tool, []byte(raw))
	c.Args, _ = policy.FlattenArgs([]byte(raw))
	env, _ := r.apply(c)
	return id, env.Decision == grants.Permit
}

// spendable reports whether a grant's spend is permitted now, without
// spending it (Decide does not modify the state).
func (r *fleetRig) spendable(id string) (grants.Envelope, bool) {
	g, ok := r.s.Grant(id)
	if !ok {
		return grants.Envelope{}, false
	}
	out := fsm.Decide(r.s, r.at, "n1", fsm.Command{Op: fsm.OpSpend, Caller: g.Worker, GrantID: id, Digest: g.Digest, IdemKey: "probe"})
	if out.Reply != nil {
		return *out.Reply, out.Reply.Decision == grants.Permit
	}
	e := out.Events[0]
	return grants.Envelope{Decision: grants.Decision(e.Decision), Reason: grants.Reason(e.Reason), Detail: e.Detail}, e.Kind == events.KindAttempt
}

// TestPropSpawnNeverWidens: whatever the tree, every recorded child's
// scope is inside its parent's (tools, classes, targets, lifetime), no
// child is a coordinator, and every grant a child gets is inside the scope
// of each of its ancestors and binds each ancestor's worker counter.
func TestPropSpawnNeverWidens(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newFleetRig(t)
		var permitted []string
		for n := rapid.IntRange(1, 40).Draw(t, "steps"); n > 0; n-- {
			switch rapid.IntRange(0, 3).Draw(t, "op") {
			case 0, 1:
				r.spawn()
			case 2:
				if id, ok := r.request(); ok {
					permitted = append(permitted, id)
				}
			case 3:
				r.at += int64(rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Minute, time.Hour}).Draw(t, "dt"))
			}
		}
		for _, m := range r.s.Fleet() {
			if m.Parent == "" {
				continue
			}
			if m.Lane == lanes.Coordinator {
				t.Fatalf("child %s is a coordinator", m.Worker)
			}
			p, ok := r.s.Member(m.Parent)
			if !ok {
				continue // a root parent: unrestricted but for its lane
			}
			if p.Tools != nil {
				if _, err := lanes.Attenuate(p.Tools, m.Tools); err != nil || m.Tools == nil {
					t.Fatalf("child %s tools %v are wider than parent %s's %v", m.Worker, m.Tools, p.Worker, p.Tools)
				}
			}
			if p.Classes != nil && (m.Classes == nil || !subset(m.Classes, p.Classes)) {
				t.Fatalf("child %s classes %v are wider than parent %s's %v", m.Worker, m.Classes, p.Worker, p.Classes)
			}
			if p.Targets != nil && m.Targets == nil {
				t.Fatalf("child %s has unrestricted targets under parent %s's %v", m.Worker, p.Worker, p.Targets)
			}
			if m.ExpiresAt > p.ExpiresAt {
				t.Fatalf("child %s ends at %d, after parent %s at %d", m.Worker, m.ExpiresAt, p.Worker, p.ExpiresAt)
			}
		}
		for _, id := range permitted {
			g, ok := r.s.Grant(id)
			if !ok {
				continue
			}
			for w := g.Worker; ; {
				m, ok := r.s.Member(w)
				if !ok {
					break
				}
				if m.Tools != nil && !lanes.Allowed(m.Tools, g.Tool) {
					t.Fatalf("grant %s of %s: tool %s outside %s's scope %v", id, g.Worker, g.Tool, w, m.Tools)
				}
				if m.Classes != nil && !slices.Contains(m.Classes, g.Consequence) {
					t.Fatalf("grant %s of %s: class %s outside %s's scope %v", id, g.Worker, g.Consequence, w, m.Classes)
				}
				if m.Targets != nil && !lanes.Allowed(m.Targets, g.Target) {
					t.Fatalf("grant %s of %s: target %s outside %s's scope %v", id, g.Worker, g.Target, w, m.Targets)
				}
				if m.ExpiresAt != 0 && g.ExpiresAt > m.ExpiresAt {
					t.Fatalf("grant %s of %s outlives %s", id, g.Worker, w)
				}
				if m.Parent == "" {
					break
				}
				if !slices.ContainsFunc(g.Counters, func(c events.Counter) bool { return c.Key == "worker/"+m.Parent }) {
					t.Fatalf("grant %s of %s does not bind ancestor %s's counter: %v", id, g.Worker, m.Parent, g.Counters)
				}
				w = m.Parent
			}
		}
	})
}

func subset(a, b []string) bool {
	for _, v := range a {
		if !slices.Contains(b, v) {
			return false
		}
	}
	return true
}

// TestPropRevokeExactlySubtree: revoking any worker bars exactly it and
// its descendants, in one receipt, and afterwards exactly the grants of
// that subtree (unspent ones, minted before) are refused at spend, while
// every other grant spendable before stays spendable.
func TestPropRevokeExactlySubtree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newFleetRig(t)
		var permitted []string
		for n := rapid.IntRange(1, 30).Draw(t, "steps"); n > 0; n-- {
			if rapid.Bool().Draw(t, "spawnOrRequest") {
				r.spawn()
			} else if id, ok := r.request(); ok {
				permitted = append(permitted, id)
			}
		}
		for range 3 {
			if id, ok := r.request(); ok {
				permitted = append(permitted, id)
			}
		}
		before := map[string]bool{}
		for _, id := range permitted {
			_, before[id] = r.spendable(id)
		}
		target := rapid.SampledFrom(r.ids).Draw(t, "revoked")
		// The subtree, from the parent links.
		sub := map[string]bool{target: true}
		for grew := true; grew; {
			grew = false
			for _, m := range r.s.Fleet() {
				if m.Parent != "" && sub[m.Parent] && !sub[m.Worker] {
					sub[m.Worker], grew = true, true
				}
			}
		}
		seqBefore := r.s.Chain().Seq
		env, evs := r.apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/" + target})
		if env.Decision != grants.Permit || len(evs) != 1 || r.s.Chain().Seq != seqBefore+1 {
			t.Fatalf("revoke answered %+v with %d receipts", env, len(evs))
		}
		listed := map[string]bool{}
		for _, w := range evs[0].Workers {
			listed[w] = true
		}
		for _, w := range r.ids {
			if listed[w] != sub[w] {
				t.Fatalf("worker %s: in subtree %v, listed as revoked %v (%v)", w, sub[w], listed[w], evs[0].Workers)
			}
		}
		cancelled := map[string]bool{}
		for _, id := range evs[0].Cancelled {
			cancelled[id] = true
		}
		for _, id := range permitted {
			g, _ := r.s.Grant(id)
			_, now := r.spendable(id)
			switch {
			case sub[g.Worker] && now:
				t.Fatalf("grant %s of %s (in the revoked subtree of %s) is still spendable", id, g.Worker, target)
			case !sub[g.Worker] && before[id] && !now:
				t.Fatalf("grant %s of %s (outside the subtree of %s) is no longer spendable", id, g.Worker, target)
			case sub[g.Worker] && before[id] && !cancelled[id]:
				t.Fatalf("grant %s of %s was spendable and is not listed as cancelled", id, g.Worker)
			}
		}
		// A revoked child's next request is refused.
		for w := range sub {
			if _, ok := r.s.Member(w); ok || w == target {
				r.grant++
				c := fsm.Command{Op: fsm.OpRequest, Caller: w, Lane: "specialist", Tool: "Read", GrantID: "late" + strconv.Itoa(r.grant), Cwd: "/work/" + w}
				if m, ok := r.s.Member(w); ok {
					c.Lane = m.Lane
				}
				raw := `{"file_path":"/work/` + w + `/z"}`
				c.Digest, _ = grants.DigestArgs("Read", []byte(raw))
				c.Args, _ = policy.FlattenArgs([]byte(raw))
				if env, _ := r.apply(c); env.Decision != grants.Deny || env.Reason != grants.ReasonWorkerRevoked {
					t.Fatalf("revoked worker %s's request answered %s %s", w, env.Decision, env.Reason)
				}
			}
		}
	})
}

// TestPropRestoreNothingSpendable: after a worker restores a checkpoint,
// no grant id it held before is spendable, whatever its state was, and the
// refusal names the incarnation; other workers' grants are untouched.
func TestPropRestoreNothingSpendable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newFleetRig(t)
		var permitted []string
		for n := rapid.IntRange(1, 25).Draw(t, "steps"); n > 0; n-- {
			if rare(t, "spawnFirst", 3) {
				r.spawn()
			} else if id, ok := r.request(); ok {
				permitted = append(permitted, id)
			}
		}
		before := map[string]bool{}
		for _, id := range permitted {
			_, before[id] = r.spendable(id)
		}
		w := rapid.SampledFrom(r.ids).Draw(t, "restorer")
		env, _ := r.apply(fsm.Command{Op: fsm.OpRestore, Caller: w})
		if env.Decision != grants.Permit {
			return // a revoked or expired worker: nothing restored
		}
		for _, id := range permitted {
			g, _ := r.s.Grant(id)
			spend, now := r.spendable(id)
			if g.Worker == w {
				if now {
					t.Fatalf("grant %s of restored worker %s is spendable", id, w)
				}
				if before[id] && (spend.Reason != grants.ReasonGrantRevoked || !strings.Contains(spend.Detail, "incarnation")) {
					t.Fatalf("grant %s of restored worker %s refused with %s %q, want grant_revoked naming the incarnation", id, w, spend.Reason, spend.Detail)
				}
			} else if before[id] != now {
				t.Fatalf("grant %s of %s changed spendability when %s restored", id, g.Worker, w)
			}
		}
	})
}
