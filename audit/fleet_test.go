package audit_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

// A fleet's receipts, as the state machine writes them, verify: a
// spawned child's attempts bind its incarnation and its ancestors'
// counters, which the spawn and incarnation receipts set, and a subtree
// revocation, a restore and a respawn cancel what they list. The
// auditor's projection reaches the issuer's digest.
func TestFleetStreamVerifies(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "fsm", "testdata", "policies", "v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policyfile.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := fsm.New()
	var raft uint64
	at := int64(1000 * time.Second)
	apply := func(cs ...fsm.Command) []grants.Envelope {
		raft++
		return fsm.Apply(s, raft, fsm.Batch{Time: at, Node: "n1", Commands: cs})
	}
	read := func(worker, id, path string) fsm.Command {
		c := fsm.Command{Op: fsm.OpRequest, Caller: worker, Lane: "specialist", Tool: "Read", GrantID: id}
		c.Digest, _ = grants.DigestArgs("Read", []byte(`{"file_path":"`+path+`"}`))
		c.Args, _ = policy.FlattenArgs([]byte(`{"file_path":"` + path + `"}`))
		return c
	}
	spend := func(worker, id, path string) fsm.Command {
		c := read(worker, id, path)
		return fsm.Command{Op: fsm.OpSpend, Caller: worker, GrantID: id, Digest: c.Digest, IdemKey: "a-" + id}
	}
	apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: pol.Canonical()},
		fsm.Command{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatFleet})
	// A revocation first, so the auditor tracks counters from the start.
	apply(fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/other"})
	for i, env := range apply(
		fsm.Command{Op: fsm.OpSpawn, Caller: "w1", Key: "w1-a", Lane: "specialist", ParentLane: "specialist"},
		fsm.Command{Op: fsm.OpSpawn, Caller: "w1-a", Key: "w1-a-x", Lane: "specialist"},
		read("w1-a", "g1", "/work/w1-a/a"), read("w1-a-x", "g2", "/work/w1-a-x/a"), read("w1-a-x", "g3", "/work/w1-a-x/b"),
		spend("w1-a", "g1", "/work/w1-a/a"), spend("w1-a-x", "g2", "/work/w1-a-x/a"),
		fsm.Command{Op: fsm.OpRestore, Caller: "w1-a-x"},
		spend("w1-a-x", "g3", "/work/w1-a-x/b"),
		read("w1-a-x", "g4", "/work/w1-a-x/c"), spend("w1-a-x", "g4", "/work/w1-a-x/c"),
		read("w1-a", "g5", "/work/w1-a/b"),
		fsm.Command{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w1"},
		spend("w1-a", "g5", "/work/w1-a/b"),
		fsm.Command{Op: fsm.OpRespawn, Caller: "operator:root", Key: "w1", Lane: "specialist"},
		fsm.Command{Op: fsm.OpLift, Caller: "operator:root", Key: "w1"},
	) {
		if i < 7 && i != 0 && i != 1 && env.Decision != grants.Permit {
			t.Fatalf("command %d: %+v", i, env)
		}
	}
	v := audit.NewVerifier(audit.Options{})
	for _, p := range s.Outbox(0, 0) {
		if err := v.Add(p.Data, p.Seq); err != nil {
			t.Fatalf("seq %d: %v", p.Seq, err)
		}
	}
	if err := v.CheckDigest(s.Digest()); err != nil {
		t.Fatal(err)
	}
}
