package clustertests

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/policy"
)

// TestAuthorityChangesBetweenPermitAndSpend checks that authority is judged
// again at spend time. Invariants, each with its recovery class:
//   - a policy applied between permit and spend (epoch bump) -> epoch_stale,
//     request_new_grant;
//   - revoking the worker cancels its unspent grants in one entry whose
//     receipt lists exactly those grants (not spent ones, not other
//     workers'); spending one -> grant_revoked, request_new_grant; a new
//     request from the revoked worker -> worker_revoked, none, until
//     writ.op.reinstate; after reinstatement new grants work and the
//     cancelled ones stay dead;
//   - revoking a source the grant was minted from -> source_revoked,
//     request_new_grant, while grants from other sources still spend;
//   - revoking the lane -> lane_revoked, request_new_grant.
func TestAuthorityChangesBetweenPermitAndSpend(t *testing.T) {
	_, nc := single(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := client.New(nc, "")
	w1 := client.New(nc, worker)
	w2 := client.New(nc, "w2")
	n := 0
	grant := func(c *client.Client, sources ...string) (grants.Envelope, int) {
		t.Helper()
		n++
		env, err := c.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(n), Sources: sources})
		if err != nil || !cluster.IsPermit(env) {
			t.Fatalf("grant %d for %s: %+v (%v)", n, c.Worker, env, err)
		}
		return env, n
	}
	spend := func(c *client.Client, g grants.Envelope, i int) grants.Envelope {
		t.Helper()
		env, err := c.Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(i)})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	wantRefusal := func(what string, env grants.Envelope, r grants.Reason, rec grants.Recovery) {
		t.Helper()
		if !cluster.IsRefusal(env, r) || env.Recovery != rec {
			t.Errorf("invariant %s: want deny %s/%s, got %s %s/%s (%+v)", what, r, rec, env.Decision, env.Reason, env.Recovery, env)
		}
	}
	ok := func(err error, env grants.Envelope) {
		t.Helper()
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("operator call: %+v (%v)", env, err)
		}
	}

	// Epoch bump.
	g, i := grant(w1)
	env, err := op.SetPolicy(ctx, policy.Recommended().Canonical())
	ok(err, env)
	if env.Epoch != g.Epoch+1 {
		t.Fatalf("policy moved the epoch to %d, grant epoch %d", env.Epoch, g.Epoch)
	}
	wantRefusal("policy epoch bump refuses older grants", spend(w1, g, i), grants.ReasonEpochStale, grants.RecoverRequestNewGrant)

	// Worker revocation.
	spent, si := grant(w1)
	if a := spend(w1, spent, si); !cluster.IsAttempt(a) {
		t.Fatalf("spend before revocation: %+v", a)
	}
	ga, ia := grant(w1)
	gb, _ := grant(w1)
	other, io := grant(w2)
	env, err = op.Revoke(ctx, api.RevokeRequest{Worker: worker})
	ok(err, env)
	rec := receiptAt(t, nc, env.Seq)
	// Cancelled: every unspent, unexpired grant of w1 -- the epoch-stale g
	// included (it is still "permitted"; it just cannot be spent) -- and
	// neither the spent grant nor w2's.
	want := []string{g.GrantID, ga.GrantID, gb.GrantID}
	sort.Strings(want)
	if rec.Kind != events.KindRevoke || rec.Worker != worker || !slices.Equal(rec.Cancelled, want) {
		t.Errorf("invariant revoke receipt lists the cancelled grants: got %s worker %q cancelled %v, want %v", rec.Kind, rec.Worker, rec.Cancelled, want)
	}
	wantRefusal("revoked worker's grant is cancelled", spend(w1, ga, ia), grants.ReasonGrantRevoked, grants.RecoverRequestNewGrant)
	if a := spend(w2, other, io); !cluster.IsAttempt(a) {
		t.Errorf("invariant revocation is scoped: w2's grant refused: %+v", a)
	}
	n++
	req, err := w1.Grant(ctx, api.GrantRequest{Lane: lane, Tool: tool, Args: cluster.ArgsFor(n)})
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal("revoked worker cannot ask", req, grants.ReasonWorkerRevoked, grants.RecoverNone)
	env, err = op.Reinstate(ctx, api.ReinstateRequest{Worker: worker})
	ok(err, env)
	if env.Kind != events.KindReinstate {
		t.Errorf("reinstate answered %+v", env)
	}
	fresh, fi := grant(w1)
	if a := spend(w1, fresh, fi); !cluster.IsAttempt(a) {
		t.Errorf("invariant reinstated worker can work again: %+v", a)
	}
	wantRefusal("cancelled grants stay dead after reinstatement", spend(w1, gb, 0), grants.ReasonGrantRevoked, grants.RecoverRequestNewGrant)
	wantRefusal("a stale grant cancelled by revocation reports the revocation", spend(w1, g, i), grants.ReasonGrantRevoked, grants.RecoverRequestNewGrant)

	// Source revocation.
	fromS1, i1 := grant(w1, "s1")
	fromS2, i2 := grant(w1, "s2")
	env, err = op.Revoke(ctx, api.RevokeRequest{Source: "s1"})
	ok(err, env)
	wantRefusal("revoked source kills derived grants", spend(w1, fromS1, i1), grants.ReasonSourceRevoked, grants.RecoverRequestNewGrant)
	if a := spend(w1, fromS2, i2); !cluster.IsAttempt(a) {
		t.Errorf("invariant source revocation is scoped: grant from s2 refused: %+v", a)
	}

	// Lane revocation.
	gl, il := grant(w1)
	env, err = op.Revoke(ctx, api.RevokeRequest{Lane: lane})
	ok(err, env)
	wantRefusal("revoked lane kills its grants", spend(w1, gl, il), grants.ReasonLaneRevoked, grants.RecoverRequestNewGrant)
}
