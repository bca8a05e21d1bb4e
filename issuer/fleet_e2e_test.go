package issuer_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

// A fleet through the issuer (real raft, real NATS): a worker spawns a
// child with a narrowed scope, the child's calls are judged inside it, a
// widening spawn is refused naming the field, revoking the parent stops
// the child's grant and its next request, a restore leaves nothing
// spendable, and a respawned worker is approval-blocked until an operator
// lifts the block.
func TestFleetThroughTheIssuer(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), nil)
	testenv.WaitFor(t, testenv.SetupTimeout, "receipt format 8", func() bool {
		return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatFleet
	})
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	op := client.New(nc, "operator")
	parent := client.New(nc, "coder-1")

	spawn, err := parent.Spawn(ctx, api.SpawnRequest{Child: "coder-1-explore", Lane: "isolated", ParentLane: "coordinator",
		Tools: []string{"Read", "Grep", "Glob"}, TTLMillis: 10 * 60_000})
	if err != nil || spawn.Decision != grants.Permit || spawn.Worker != "coder-1-explore" || spawn.Parent != "coder-1" ||
		spawn.Lane != "isolated" || spawn.Incarnation != 1 || spawn.ExpiresAt-spawn.IssuedAt != int64(10*time.Minute) {
		t.Fatalf("spawn: %+v %v", spawn, err)
	}
	// A retry names the same child and gets the same answer.
	again, err := parent.Spawn(ctx, api.SpawnRequest{Child: "coder-1-explore", Lane: "isolated", Tools: []string{"Grep", "Read", "Glob"}})
	if err != nil || again.Decision != grants.Permit || again.Seq != spawn.Seq {
		t.Fatalf("spawn retry: %+v %v", again, err)
	}
	// Without operator mode a spawn naming a user key is answered as
	// before, with a note and no credential.
	const someKey = "UA5WUJ54Z23KILLCUOUNAKTPBVZWKMQVO4O6EQ5GHLAERIMLLHNCTYM5"
	keyed, err := parent.Spawn(ctx, api.SpawnRequest{Child: "coder-1-keyed", Lane: "isolated", UserKey: someKey})
	if err != nil || keyed.Decision != grants.Permit || keyed.UserJWT != "" || !strings.Contains(keyed.CredentialNote, "not run in operator mode") {
		t.Fatalf("keyed spawn without operator mode: %+v %v", keyed, err)
	}
	if bad, err := parent.Spawn(ctx, api.SpawnRequest{Child: "coder-1-badkey", Lane: "isolated", UserKey: "UNOTAKEY"}); err != nil || bad.Missing != "user_key" || bad.Seq != 0 {
		t.Fatalf("malformed user key: %+v %v", bad, err)
	}
	child := client.New(nc, "coder-1-explore")
	wide, err := child.Spawn(ctx, api.SpawnRequest{Lane: "isolated", Tools: []string{"Bash"}})
	if err != nil || wide.Reason != grants.ReasonScopeWidens || wide.Missing != "tools" {
		t.Fatalf("widening spawn: %+v %v", wide, err)
	}
	for _, bad := range []api.SpawnRequest{{Child: "a.b", Lane: "isolated"}, {Child: "c", Lane: "isolated", TTLMillis: -1}, {Child: "c"}} {
		if e, err := parent.Spawn(ctx, bad); err != nil || e.Reason != grants.ReasonInvalidRequest || e.Seq != 0 {
			t.Fatalf("%+v: %+v %v", bad, e, err)
		}
	}
	read, err := child.Grant(ctx, api.GrantRequest{Lane: "isolated", Tool: "Read", Cwd: "/tmp/fleet-e2e", Args: json.RawMessage(`{"file_path":"README.md"}`)})
	if err != nil || read.Decision != grants.Permit {
		t.Fatalf("child read: %+v %v", read, err)
	}
	bash, err := child.Grant(ctx, api.GrantRequest{Lane: "isolated", Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`)})
	if err != nil || bash.Reason != grants.ReasonScopeWidens || bash.Missing != "tools" {
		t.Fatalf("child bash: %+v %v", bash, err)
	}

	rv, err := op.Revoke(ctx, api.RevokeRequest{Worker: "coder-1"})
	if err != nil || rv.Decision != grants.Permit || strings.Join(rv.Workers, ",") != "coder-1,coder-1-explore,coder-1-keyed" || len(rv.Cancelled) != 1 || rv.Cancelled[0] != read.GrantID {
		t.Fatalf("revoke: %+v %v", rv, err)
	}
	sp, err := child.Spend(ctx, api.SpendRequest{GrantID: read.GrantID, Args: json.RawMessage(`{"file_path":"README.md"}`)})
	if err != nil || sp.Reason != grants.ReasonGrantRevoked {
		t.Fatalf("child spend after the parent's revocation: %+v %v", sp, err)
	}
	next, err := child.Grant(ctx, api.GrantRequest{Lane: "isolated", Tool: "Read", Cwd: "/tmp/fleet-e2e", Args: json.RawMessage(`{"file_path":"a.md"}`)})
	if err != nil || next.Reason != grants.ReasonWorkerRevoked {
		t.Fatalf("child request after the parent's revocation: %+v %v", next, err)
	}

	// Restore: the old incarnation's grant is refused, naming it.
	solo := client.New(nc, "solo-1")
	g, err := solo.Grant(ctx, api.GrantRequest{Lane: "specialist", Tool: "Read", Cwd: "/tmp/fleet-e2e", Args: json.RawMessage(`{"file_path":"a.md"}`)})
	if err != nil || g.Decision != grants.Permit {
		t.Fatalf("solo grant: %+v %v", g, err)
	}
	rs, err := solo.Restore(ctx)
	if err != nil || rs.Decision != grants.Permit || rs.Incarnation != 1 || rs.Worker != "solo-1" {
		t.Fatalf("restore: %+v %v", rs, err)
	}
	old, err := solo.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: json.RawMessage(`{"file_path":"a.md"}`)})
	if err != nil || old.Reason != grants.ReasonGrantRevoked || !strings.Contains(old.Detail, "incarnation 0") {
		t.Fatalf("old incarnation's spend: %+v %v", old, err)
	}

	// Respawn: approval-blocked until an operator lifts it (who may
	// publish on the operator subjects is the NATS server's business: the
	// state machine refuses a worker's respawn or lift, fsm scripts).
	re, err := op.Respawn(ctx, api.RespawnRequest{Worker: "coder-1", Lane: "specialist", Note: "inc-7"})
	if err != nil || re.Decision != grants.Permit || re.Incarnation != 1 {
		t.Fatalf("respawn: %+v %v", re, err)
	}
	blocked, err := parent.Grant(ctx, api.GrantRequest{Lane: "specialist", Tool: "Bash", Args: json.RawMessage(`{"command":"go test ./..."}`)})
	if err != nil || blocked.Decision != grants.ApprovalRequired {
		t.Fatalf("blocked worker's call: %+v %v", blocked, err)
	}
	fl, err := op.Fleet(ctx)
	if err != nil || len(fl.Workers) != 3 || !fl.Workers[0].Blocked || !fl.Workers[1].Revoked || !fl.Workers[2].Revoked {
		t.Fatalf("fleet: %+v %v", fl, err)
	}
	if e, err := op.Lift(ctx, api.LiftRequest{Worker: "coder-1", Note: "inc-7 closed"}); err != nil || e.Decision != grants.Permit || e.Seq == 0 {
		t.Fatalf("lift: %+v %v", e, err)
	}
	free, err := parent.Grant(ctx, api.GrantRequest{Lane: "specialist", Tool: "Bash", Args: json.RawMessage(`{"command":"go test ./..."}`)})
	if err != nil || free.Decision != grants.Permit {
		t.Fatalf("lifted worker's call: %+v %v", free, err)
	}
}
