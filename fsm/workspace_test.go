package fsm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestOutsideWorkspaceAnswerOnly: a read held because its path is outside
// the lane's workspace answers with the workspace it left, and a retry
// with the same key gets the same answer; the receipt and the state keep
// the engine's own fields (no such detail), so a log written before the
// answer said it replays to the same receipts and digest.
func TestOutsideWorkspaceAnswerOnly(t *testing.T) {
	doc := *policy.Recommended()
	doc.Workspace = "/work/{worker}"
	t0 := int64(1000 * time.Second)
	read := func(grant, key, path string) fsm.Command {
		raw := []byte(`{"file_path":"` + path + `"}`)
		c := fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Read", IdemKey: key, GrantID: grant}
		c.Digest, _ = grants.DigestArgs(c.Tool, raw)
		c.Args, _ = policy.FlattenArgs(raw)
		return c
	}
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: doc.Canonical()}}})
	envs := fsm.Apply(s, 2, fsm.Batch{Time: t0 + 1, Node: "n1", Commands: []fsm.Command{
		read("g1", "k1", "/etc/hosts"), read("g2", "k2", "/work/w1/main.go"), read("g1", "k1", "/etc/hosts")}})
	const want = "/etc/hosts is outside the workspace /work/w1"
	if envs[0].Decision != grants.ApprovalRequired || envs[0].Reason != grants.ReasonBoundaryCrossing || envs[0].Detail != want {
		t.Fatalf("outside: %+v", envs[0])
	}
	if envs[1].Decision != grants.Permit || envs[1].Detail != "" {
		t.Fatalf("inside: %+v", envs[1])
	}
	if envs[2].Decision != grants.ApprovalRequired || envs[2].ReviewID != envs[0].ReviewID || envs[2].Detail != want {
		t.Fatalf("retry: %+v", envs[2])
	}
	for _, p := range s.Outbox(0, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(e.Detail, "outside the workspace") {
			t.Fatalf("receipt %d carries the answer's detail: %q", e.Seq, e.Detail)
		}
	}
}
