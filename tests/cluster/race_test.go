package clustertests

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

// spendIn is one spend attempt as the porcupine model sees it.
type spendIn struct {
	Grant int
	Key   string
}

// spendOut is its outcome: the grant was spent by this call (OK), refused as
// already spent (neither flag), or unknown (the client gave up: the spend
// may or may not have happened).
type spendOut struct {
	OK      bool
	Unknown bool
}

// spendModel is a per-grant register: "" while unspent, then the
// idempotency key of the one spend that consumed it. A grant can be spent
// once; a second spend with another key is refused already_spent; a retry
// with the spending key gets the original attempt.
var spendModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			g := op.Input.(spendIn).Grant
			by[g] = append(by[g], op)
		}
		keys := make([]int, 0, len(by))
		for g := range by {
			keys = append(keys, g)
		}
		sort.Ints(keys)
		out := make([][]porcupine.Operation, 0, len(by))
		for _, g := range keys {
			out = append(out, by[g])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		spender, in, out := state.(string), input.(spendIn), output.(spendOut)
		switch {
		case out.Unknown:
			// Either it took effect here (only possible while unspent)
			// or it never did; porcupine may place it anywhere after its
			// call, including after everything else.
			if spender == "" {
				return true, in.Key
			}
			return true, spender
		case out.OK:
			if spender == "" || spender == in.Key {
				return true, in.Key
			}
			return false, spender
		default: // already_spent
			return spender != "" && spender != in.Key, spender
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(spendIn), output.(spendOut)
		res := "already_spent"
		switch {
		case out.Unknown:
			res = "unknown"
		case out.OK:
			res = "attempt"
		}
		return fmt.Sprintf("spend(g%d, %s) -> %s", in.Grant, in.Key, res)
	},
}

// TestDoubleSpendRaceIsLinearizable checks the single-spend invariant under
// contention on a 3-node cluster: 50 grants, each spent by 4 concurrent
// spenders with different idempotency keys through different nodes' NATS
// servers. Invariants: exactly one spender per grant gets the attempt and
// every other gets already_spent; the history of spends is linearizable
// against a per-grant single-spend register (porcupine); the stream holds
// exactly one attempt per grant, by the winning key, plus one
// spend_refused receipt per loser; and the stream is whole and passes the
// auditor.
func TestDoubleSpendRaceIsLinearizable(t *testing.T) {
	const (
		nGrants   = 50
		nSpenders = 4
	)
	c := cluster.Start(t, 3)
	leader := c.Leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	minter := c.Client(leader, worker)
	envs := make([]grants.Envelope, nGrants)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range nGrants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			envs[i] = cluster.Mint(t, ctx, minter, i, fmt.Sprintf("mint-%d", i))
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var clients []*client.Client
	for i := range c.Nodes {
		clients = append(clients, c.Client(i, worker))
	}
	type result struct {
		in       spendIn
		env      grants.Envelope
		err      error
		call     int64
		ret      int64
		clientID int
	}
	results := make([]result, nGrants*nSpenders)
	t0 := time.Now()
	startGun := make(chan struct{})
	for g := range nGrants {
		for s := range nSpenders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				idx := g*nSpenders + s
				cl := clients[(g+s)%len(clients)]
				in := spendIn{Grant: g, Key: fmt.Sprintf("g%d-spender%d", g, s)}
				<-startGun
				sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
				defer scancel()
				call := time.Since(t0).Nanoseconds()
				env, err := cl.Spend(sctx, api.SpendRequest{GrantID: envs[g].GrantID, Args: cluster.ArgsFor(g), IdempotencyKey: in.Key})
				ret := time.Since(t0).Nanoseconds()
				results[idx] = result{in: in, env: env, err: err, call: call, ret: ret, clientID: idx}
			}()
		}
	}
	close(startGun)
	wg.Wait()

	ops := make([]porcupine.Operation, 0, len(results))
	winners := map[int]string{}
	refusals := map[int]int{}
	unknown := 0
	for _, r := range results {
		out := spendOut{}
		ret := r.ret
		switch {
		case r.err != nil:
			out.Unknown, ret = true, math.MaxInt64
			unknown++
			t.Logf("spend %s: unknown outcome: %v", r.in.Key, r.err)
		case cluster.IsAttempt(r.env):
			out.OK = true
			if w, dup := winners[r.in.Grant]; dup {
				t.Errorf("invariant one attempt per grant: grant %d spent by %s and %s", r.in.Grant, w, r.in.Key)
			}
			winners[r.in.Grant] = r.in.Key
		case cluster.IsRefusal(r.env, grants.ReasonAlreadySpent):
			if r.env.Recovery != grants.RecoverReconcileConsumption {
				t.Errorf("already_spent for %s has recovery %q", r.in.Key, r.env.Recovery)
			}
			refusals[r.in.Grant]++
		default:
			t.Errorf("spend %s: want attempt or already_spent, got %+v", r.in.Key, r.env)
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: r.clientID, Input: r.in, Call: r.call, Output: out, Return: ret})
	}
	if unknown > 0 {
		t.Errorf("%d of %d spends got no answer within 20s on a healthy cluster", unknown, len(results))
	}
	for g := range nGrants {
		if _, ok := winners[g]; !ok {
			t.Errorf("invariant every grant spent exactly once: grant %d has no attempt among %d spenders", g, nSpenders)
		}
		if refusals[g] != nSpenders-1 && unknown == 0 {
			t.Errorf("invariant losers get already_spent: grant %d has %d refusals, want %d", g, refusals[g], nSpenders-1)
		}
	}

	res, info := porcupine.CheckOperationsVerbose(spendModel, ops, 30*time.Second)
	if res != porcupine.Ok {
		path := t.TempDir() + "/spend-race.html"
		if err := porcupine.VisualizePath(spendModel, info, path); err == nil {
			t.Logf("porcupine visualization: %s", path)
		}
		t.Fatalf("invariant spends are linearizable: porcupine says %s", res)
	}

	// The receipts agree with the answers.
	st := c.WaitPublished()
	evs := c.CheckedStream(t, st)
	attempts := attemptsByGrant(evs)
	refused := map[string]int{}
	for _, e := range evs {
		if e.Kind == events.KindSpendRefused {
			refused[e.GrantID]++
		}
	}
	for g := range nGrants {
		id := envs[g].GrantID
		as := attempts[id]
		if len(as) != 1 {
			t.Errorf("invariant at most one attempt receipt per grant: grant %d has %d", g, len(as))
			continue
		}
		if as[0].IdemKey != winners[g] {
			t.Errorf("grant %d: attempt receipt has key %q, the acknowledged winner was %q", g, as[0].IdemKey, winners[g])
		}
		if refused[id] != refusals[g] {
			t.Errorf("grant %d: %d spend_refused receipts for %d refusals", g, refused[id], refusals[g])
		}
	}
	for _, r := range results {
		if r.err == nil && cluster.IsAttempt(r.env) {
			e := evs[r.env.Seq-1]
			if e.Kind != events.KindAttempt || e.GrantID != envs[r.in.Grant].GrantID || e.IdemKey != r.in.Key {
				t.Errorf("answer for %s names seq %d, which is %s %s %s", r.in.Key, r.env.Seq, e.Kind, e.GrantID, e.IdemKey)
			}
		}
	}
	t.Logf("%d spends (%d unknown) over %d grants, linearizable; %d receipts", len(results), unknown, nGrants, len(evs))
}

// TestSpendModelRejectsDoubleSpend checks the checker: histories that break
// single-spend must not pass as linearizable.
func TestSpendModelRejectsDoubleSpend(t *testing.T) {
	op := func(key string, call, ret int64, out spendOut) porcupine.Operation {
		return porcupine.Operation{Input: spendIn{Grant: 1, Key: key}, Call: call, Output: out, Return: ret}
	}
	cases := []struct {
		name string
		h    []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"one winner", []porcupine.Operation{op("a", 0, 10, spendOut{OK: true}), op("b", 1, 9, spendOut{})}, porcupine.Ok},
		{"two winners", []porcupine.Operation{op("a", 0, 10, spendOut{OK: true}), op("b", 1, 9, spendOut{OK: true})}, porcupine.Illegal},
		{"refused before anyone spent", []porcupine.Operation{op("b", 0, 5, spendOut{}), op("a", 6, 9, spendOut{OK: true})}, porcupine.Illegal},
		{"unknown may have won", []porcupine.Operation{op("a", 0, math.MaxInt64, spendOut{Unknown: true}), op("b", 1, 9, spendOut{})}, porcupine.Ok},
		{"unknown may have lost", []porcupine.Operation{op("a", 0, math.MaxInt64, spendOut{Unknown: true}), op("b", 1, 9, spendOut{OK: true})}, porcupine.Ok},
		{"retry with the winning key", []porcupine.Operation{op("a", 0, 3, spendOut{OK: true}), op("a", 4, 6, spendOut{OK: true})}, porcupine.Ok},
	}
	for _, tc := range cases {
		if got := porcupine.CheckOperationsTimeout(spendModel, tc.h, 5*time.Second); got != tc.want {
			t.Errorf("%s: porcupine says %s, want %s", tc.name, got, tc.want)
		}
	}
}
