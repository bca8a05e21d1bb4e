package issuer

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// mintFor applies a policy and one grant request to a fresh state machine,
// as a leader would, and returns the state and the grant.
func mintFor(t *testing.T, p *policy.Policy, lane, tool, args, cwd string) (*fsm.State, grants.Grant) {
	t.Helper()
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: int64(time.Second), Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: p.Canonical()}}})
	req, rerr := grantRequestCommand("w1", &api.GrantRequest{V: api.Version, Lane: lane, Tool: tool, Args: json.RawMessage(args),
		IdempotencyKey: "k1", Cwd: cwd})
	if rerr != nil {
		t.Fatalf("grant request: %+v", rerr)
	}
	req.GrantID = "g1"
	envs := fsm.Apply(s, 2, fsm.Batch{Time: 2 * int64(time.Second), Node: "n1", Commands: []fsm.Command{req}})
	if envs[0].Decision != grants.Permit {
		t.Fatalf("grant refused: %+v", envs[0])
	}
	g, ok := s.Grant("g1")
	if !ok {
		t.Fatal("grant not in the state")
	}
	return s, g
}

// spendFor builds the spend a worker would send for args, bound as the
// leader binds it.
func spendFor(t *testing.T, s *fsm.State, args, cwd string) fsm.Command {
	t.Helper()
	body, _ := json.Marshal(api.SpendRequest{V: api.Version, GrantID: "g1", IdempotencyKey: "a1", Args: json.RawMessage(args), Cwd: cwd})
	cmd, canon, rerr := spendCommand("w1", body)
	if rerr != nil || canon == nil {
		t.Fatalf("spend: %+v", rerr)
	}
	tool, target := "", ""
	if g, ok := s.Grant(cmd.GrantID); ok {
		tool, target = g.Tool, g.Target
	}
	bindSpend(&cmd, canon, tool, target)
	return cmd
}

// TestBindSpendKeepsArgsOnlyForTargetedGrants: the leader forwards a
// spend's flattened arguments exactly when the grant binds a target (the
// drift check needs them), and the digest is the request digest of the
// grant's tool either way.
func TestBindSpendKeepsArgsOnlyForTargetedGrants(t *testing.T) {
	for _, tc := range []struct {
		name       string
		policy     *policy.Policy
		lane, tool string
		args, cwd  string
		targeted   bool
	}{
		{"built-in policy, shell command", policy.LegacyDefault(), "coordinator", "Bash", `{"command":"echo hi"}`, "", false},
		{"recommended policy, shell command", policy.Recommended(), "specialist", "Bash", `{"command":"echo hi"}`, "", true},
		{"recommended policy, file read", policy.Recommended(), "specialist", "Read", `{"file_path":"notes.txt"}`, "/work/w1/a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g := mintFor(t, tc.policy, tc.lane, tc.tool, tc.args, tc.cwd)
			if (g.Target != "") != tc.targeted {
				t.Fatalf("grant target %q: the case assumes targeted=%v", g.Target, tc.targeted)
			}
			cmd := spendFor(t, s, tc.args, tc.cwd)
			if cmd.Digest != g.Digest {
				t.Fatalf("spend digest %x, grant digest %x", cmd.Digest, g.Digest)
			}
			if cmd.Args.Carried != tc.targeted || (len(cmd.Args.Leaves) > 0) != tc.targeted {
				t.Fatalf("args carried=%v leaves=%d, want carried=%v", cmd.Args.Carried, len(cmd.Args.Leaves), tc.targeted)
			}
		})
	}
	t.Run("unknown grant", func(t *testing.T) {
		cmd := spendFor(t, fsm.New(), `{"command":"echo hi"}`, "")
		if cmd.Args.Carried || cmd.Digest != args.RequestDigest("", []byte(`{"command":"echo hi"}`)) {
			t.Fatalf("unknown grant: carried=%v digest %x", cmd.Args.Carried, cmd.Digest)
		}
	})
}

// TestDroppedSpendArgsChangeNothing: for a grant without a target, the
// state machine gives the same answer and the same receipts whether the
// spend carries its flattened arguments or not, for a good spend, its
// retry, a second spend and a spend of other arguments; so the leader may
// leave them out of the log.
func TestDroppedSpendArgsChangeNothing(t *testing.T) {
	const args = `{"command":"echo hi"}`
	spends := []struct{ args, key string }{
		{args, "a1"}, {args, "a1"}, {args, "a2"}, {`{"command":"echo bye"}`, "a3"},
	}
	run := func(keepArgs bool) ([]grants.Envelope, [][]byte) {
		s, g := mintFor(t, policy.LegacyDefault(), "coordinator", "Bash", args, "")
		if g.Target != "" {
			t.Fatalf("the built-in policy bound target %q to a shell command", g.Target)
		}
		var envs []grants.Envelope
		for i, sp := range spends {
			body, _ := json.Marshal(api.SpendRequest{V: api.Version, GrantID: "g1", IdempotencyKey: sp.key, Args: json.RawMessage(sp.args)})
			cmd, canon, rerr := spendCommand("w1", body)
			if rerr != nil {
				t.Fatalf("spend: %+v", rerr)
			}
			full := cmd
			bindSpend(&cmd, canon, g.Tool, g.Target)
			if keepArgs {
				cmd.Args = full.Args
			}
			envs = append(envs, fsm.Apply(s, uint64(3+i), fsm.Batch{Time: int64(3+i) * int64(time.Second), Node: "n1",
				Commands: []fsm.Command{cmd}})...)
		}
		var receipts [][]byte
		for _, p := range s.Outbox(0, 0) {
			receipts = append(receipts, p.Data)
		}
		return envs, receipts
	}
	withEnvs, withReceipts := run(true)
	withoutEnvs, withoutReceipts := run(false)
	if !reflect.DeepEqual(withEnvs, withoutEnvs) {
		t.Fatalf("answers differ:\nwith args    %+v\nwithout args %+v", withEnvs, withoutEnvs)
	}
	if len(withReceipts) != len(withoutReceipts) {
		t.Fatalf("%d receipts with args, %d without", len(withReceipts), len(withoutReceipts))
	}
	for i := range withReceipts {
		if !bytes.Equal(withReceipts[i], withoutReceipts[i]) {
			t.Fatalf("receipt %d differs", i)
		}
	}
	want := []grants.Reason{grants.ReasonNone, grants.ReasonNone, grants.ReasonAlreadySpent, grants.ReasonAlreadySpent}
	for i, e := range withEnvs {
		if e.Reason != want[i] {
			t.Errorf("spend %d answered %s %s, want reason %q", i, e.Decision, e.Reason, want[i])
		}
	}
}
