package faults

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/cluster"
)

const (
	tool = cluster.Tool
	lane = cluster.Lane
)

// full reports whether the whole fault suite runs (make test-faults sets
// WRIT_FAULTS=1). Without it, `make test` runs a short smoke subset.
func full() bool { return os.Getenv("WRIT_FAULTS") == "1" }

// needFull skips a long scenario outside the full suite.
func needFull(t *testing.T) {
	t.Helper()
	if !full() {
		t.Skip("long fault scenario: runs with WRIT_FAULTS=1 (make test-faults)")
	}
	if testing.Short() {
		t.Skip("fault scenario skipped in -short mode")
	}
}

// smokeOK skips a smoke scenario in -short mode.
func smokeOK(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("fault scenario skipped in -short mode")
	}
}

// ---------------------------------------------------------------------
// History.

// opKind names a recorded client operation.
type opKind string

const (
	opGrant  opKind = "grant"
	opSpend  opKind = "spend"
	opRevoke opKind = "revoke"
	opEpoch  opKind = "epoch"
)

// record is one client operation: its invocation and completion times
// (since the history began), which node's server it went through, and its
// answer or error. An error is an unknown outcome: the operation may or may
// not have taken effect, at any time after its invocation.
type record struct {
	Kind   opKind
	Grant  int    // the test's grant number (grant, spend)
	Worker string // grant, spend, revoke
	Key    string // idempotency key (grant, spend)
	Via    int    // node index of the client's server (-1: any)
	Env    grants.Envelope
	Err    error
	Call   time.Duration
	Return time.Duration
}

// Unknown reports an operation whose outcome the client never learned.
func (r record) Unknown() bool {
	return r.Err != nil || r.Env.Reason == grants.ReasonIssuerUnavail
}

// history records operations from many goroutines.
type history struct {
	mu  sync.Mutex
	t0  time.Time
	ops []record
}

func newHistory() *history { return &history{t0: time.Now()} }

// since is the time since the history began.
func (h *history) since() time.Duration { return time.Since(h.t0) }

// do runs f as operation r, timing it, and records it.
func (h *history) do(r record, f func() (grants.Envelope, error)) record {
	r.Call = h.since()
	r.Env, r.Err = f()
	r.Return = h.since()
	h.mu.Lock()
	h.ops = append(h.ops, r)
	h.mu.Unlock()
	return r
}

func (h *history) all() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]record(nil), h.ops...)
	sort.Slice(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// ---------------------------------------------------------------------
// The authority model checked by porcupine.

// grantState is one grant as the model sees it: the idempotency key that
// spent it ("" while unspent), whether a worker revocation cancelled it
// while unspent, and whether a policy epoch moved after it was minted.
type grantState struct {
	Minted    bool
	Spent     string
	Cancelled bool
	Stale     bool
}

// spendResult is a spend's outcome as the model distinguishes it.
type spendResult string

const (
	resAttempt   spendResult = "attempt"
	resAlready   spendResult = "already_spent"
	resRevoked   spendResult = "grant_revoked"
	resStale     spendResult = "epoch_stale"
	resUnknown   spendResult = "unknown"
	resUnmatched spendResult = "other"
)

func spendOutcome(r record) spendResult {
	switch {
	case r.Unknown():
		return resUnknown
	case cluster.IsAttempt(r.Env):
		return resAttempt
	case cluster.IsRefusal(r.Env, grants.ReasonAlreadySpent):
		return resAlready
	case cluster.IsRefusal(r.Env, grants.ReasonGrantRevoked):
		return resRevoked
	case cluster.IsRefusal(r.Env, grants.ReasonEpochStale):
		return resStale
	}
	return resUnmatched
}

// modelIn is an operation's input; modelOut its output.
type modelIn struct {
	Kind   opKind
	Grant  int
	Worker string
	Key    string
}

type modelOut struct {
	Result spendResult // spends
	OK     bool        // grant, revoke and epoch: answered permit (or unknown)
}

// authorityModel is a per-grant register of grantState. The grant exists
// once its grant request linearizes (revocations and epoch bumps before
// that do not touch it: it is minted under them). A spend takes
// effect only while the grant is unspent, not cancelled and not stale; a
// retry with the spending key gets the attempt again; any other spend of a
// spent grant is already_spent; a cancelled grant refuses grant_revoked
// (before epoch_stale). A revocation of the grant's worker cancels it if
// still unspent; an epoch bump makes it stale. Unknown operations are
// placed by porcupine anywhere after their invocation (their return is
// +inf), which covers both "took effect" and "never did".
//
// The history is partitioned per grant; each partition carries that
// grant's request and spends plus every revocation of its worker and every
// epoch bump. (Checking per grant with the global operations repeated in
// each partition is weaker than one global check -- two partitions may
// order the same revocation differently -- but it keeps porcupine fast;
// the log-order check, checkRevocationBeatsSpends, closes the gap for
// what was committed.)
var authorityModel = porcupine.Model{
	Init: func() any { return grantState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(grantState), input.(modelIn), output.(modelOut)
		switch in.Kind {
		case opGrant:
			// A permit (or an unknown answer) mints the grant under the
			// epoch and counters of its linearization point.
			if out.OK {
				st.Minted = true
			}
			return true, st
		case opRevoke:
			if st.Minted && st.Spent == "" {
				st.Cancelled = true
			}
			return true, st
		case opEpoch:
			if st.Minted {
				st.Stale = true
			}
			return true, st
		}
		if !st.Minted {
			return false, st
		}
		live := st.Spent == "" && !st.Cancelled && !st.Stale
		switch out.Result {
		case resUnknown:
			if live {
				st.Spent = in.Key
			}
			return true, st
		case resAttempt:
			if live {
				st.Spent = in.Key
				return true, st
			}
			return st.Spent == in.Key, st
		case resAlready:
			return st.Spent != "" && st.Spent != in.Key, st
		case resRevoked:
			return st.Spent == "" && st.Cancelled, st
		case resStale:
			return st.Spent == "" && !st.Cancelled && st.Stale, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(modelIn), output.(modelOut)
		switch in.Kind {
		case opGrant:
			return fmt.Sprintf("grant(g%d, %s) ok=%v", in.Grant, in.Key, out.OK)
		case opRevoke:
			return fmt.Sprintf("revoke(%s) ok=%v", in.Worker, out.OK)
		case opEpoch:
			return fmt.Sprintf("epoch() ok=%v", out.OK)
		}
		return fmt.Sprintf("spend(g%d, %s) -> %s", in.Grant, in.Key, out.Result)
	},
}

// checkAuthority checks the history against authorityModel; grantWorker
// maps the test's grant numbers to their workers.
func checkAuthority(t *testing.T, rs []record, grantWorker map[int]string) {
	t.Helper()
	var global []porcupine.Operation
	per := map[int][]porcupine.Operation{}
	id := 0
	toOp := func(r record, in modelIn, out modelOut) porcupine.Operation {
		id++
		ret := r.Return.Nanoseconds()
		if r.Unknown() {
			ret = math.MaxInt64
		}
		return porcupine.Operation{ClientId: id, Input: in, Output: out, Call: r.Call.Nanoseconds(), Return: ret}
	}
	for _, r := range rs {
		switch r.Kind {
		case opGrant:
			ok := r.Unknown() || cluster.IsPermit(r.Env)
			per[r.Grant] = append(per[r.Grant], toOp(r, modelIn{Kind: opGrant, Grant: r.Grant, Worker: r.Worker, Key: r.Key}, modelOut{OK: ok}))
		case opSpend:
			res := spendOutcome(r)
			if res == resUnmatched {
				t.Errorf("spend %s of grant %d: unexpected answer %+v", r.Key, r.Grant, r.Env)
				continue
			}
			per[r.Grant] = append(per[r.Grant], toOp(r, modelIn{Kind: opSpend, Grant: r.Grant, Worker: r.Worker, Key: r.Key}, modelOut{Result: res}))
		case opRevoke, opEpoch:
			if !r.Unknown() && r.Env.Decision != grants.Permit {
				t.Errorf("%s %s refused: %+v", r.Kind, r.Worker, r.Env)
				continue
			}
			global = append(global, toOp(r, modelIn{Kind: r.Kind, Worker: r.Worker}, modelOut{OK: !r.Unknown()}))
		}
	}
	var grantsSeen []int
	for g := range per {
		grantsSeen = append(grantsSeen, g)
	}
	sort.Ints(grantsSeen)
	for _, g := range grantsSeen {
		h := append([]porcupine.Operation(nil), per[g]...)
		for _, op := range global {
			in := op.Input.(modelIn)
			if in.Kind == opEpoch || in.Worker == grantWorker[g] {
				h = append(h, op)
			}
		}
		res, info := porcupine.CheckOperationsVerbose(authorityModel, h, 20*time.Second)
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			t.Errorf("porcupine timed out on grant %d (%d operations)", g, len(h))
		default:
			var lines []string
			for _, op := range h {
				ret := "?"
				if op.Return != math.MaxInt64 {
					ret = time.Duration(op.Return).String()
				}
				lines = append(lines, fmt.Sprintf("  [%s, %s] %s", time.Duration(op.Call), ret, authorityModel.DescribeOperation(op.Input, op.Output)))
			}
			_ = info
			t.Errorf("invariant linearizable authority: grant %d (worker %s) has no legal order:\n%s", g, grantWorker[g], strings.Join(lines, "\n"))
		}
	}
}

// checkCommitted checks that every definite answer names the receipt that
// records it: nothing answered as committed is missing from the log, and
// no answer names someone else's receipt.
func checkCommitted(t *testing.T, rs []record, evs []events.Event) {
	t.Helper()
	for _, r := range rs {
		if r.Unknown() || r.Env.Seq == 0 {
			continue
		}
		if r.Env.Seq > uint64(len(evs)) {
			t.Errorf("invariant answered means committed: %s %s answered seq %d, the log ends at %d", r.Kind, r.Key, r.Env.Seq, len(evs))
			continue
		}
		e := evs[r.Env.Seq-1]
		ok := true
		switch r.Kind {
		case opGrant:
			ok = e.IdemKey == r.Key && (e.Kind == events.KindPermit && e.GrantID == r.Env.GrantID || e.Kind == events.KindDeny && r.Env.Decision == grants.Deny)
		case opSpend:
			ok = (e.Kind == events.KindAttempt || e.Kind == events.KindSpendRefused) && e.GrantID == r.Env.GrantID && e.IdemKey == r.Key
			if r.Env.GrantID == "" {
				ok = e.IdemKey == r.Key
			}
		case opRevoke:
			ok = e.Kind == events.KindRevoke
		case opEpoch:
			ok = e.Kind == events.KindEpoch
		}
		if !ok {
			t.Errorf("invariant answered means committed: %s %s (via node %d) answered seq %d, which is %s grant %s key %q",
				r.Kind, r.Key, r.Via, r.Env.Seq, e.Kind, e.GrantID, e.IdemKey)
		}
	}
}

// checkOnePerKey checks that no idempotency key produced two permits or
// two attempts: nothing was applied twice.
func checkOnePerKey(t testing.TB, evs []events.Event) {
	t.Helper()
	type k struct {
		kind events.Kind
		who  string
		key  string
	}
	seen := map[k]uint64{}
	attempts := map[string]uint64{}
	for _, e := range evs {
		switch e.Kind {
		case events.KindPermit, events.KindAttempt:
			if e.IdemKey != "" {
				kk := k{e.Kind, e.Worker, e.IdemKey}
				if prev, dup := seen[kk]; dup {
					t.Errorf("invariant nothing applied twice: %s key %q at seq %d and %d", e.Kind, e.IdemKey, prev, e.Seq)
				}
				seen[kk] = e.Seq
			}
			if e.Kind == events.KindAttempt {
				if prev, dup := attempts[e.GrantID]; dup {
					t.Errorf("invariant at most one spend per grant: grant %s attempted at seq %d and %d", e.GrantID, prev, e.Seq)
				}
				attempts[e.GrantID] = e.Seq
			}
		}
	}
}

// checkDigests checks every running node reports the same state digest.
func checkDigests(t testing.TB, c *cluster.Cluster) api.Status {
	t.Helper()
	conv := c.WaitConverged()
	for i, nd := range c.Nodes {
		if !nd.Running() {
			continue
		}
		if st := c.Status(i); st.StateDigest != conv.StateDigest || st.Seq != conv.Seq {
			t.Errorf("invariant same state everywhere: %s at seq %d digest %.12s, leader at %d %.12s", st.Node, st.Seq, st.StateDigest, conv.Seq, conv.StateDigest)
		}
	}
	return conv
}

// count tallies outcomes for the log.
func count(rs []record, kind opKind) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		if r.Kind != kind {
			continue
		}
		switch {
		case r.Unknown():
			out["unknown"]++
		case r.Env.Decision == grants.Permit:
			out[r.Env.Kind.String()]++
		default:
			out[string(r.Env.Reason)]++
		}
	}
	return out
}
