package grants

import (
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/revocation"
)

var (
	digestA = events.Sum([]byte("request A"))
	digestB = events.Sum([]byte("request B"))
)

// spendFixture is a live grant and a spend that CheckSpend accepts; each
// case breaks one or more bindings.
func spendFixture() (*Grant, SpendInput) {
	var c revocation.Counters
	c.Set("source/s1", 1)
	c.Set("lane/isolated", 2)
	c.Set("worker/w2", 9) // someone else's counter: not bound, never matters
	g := &Grant{
		ID: "g1", Worker: "w1", Lane: "isolated", Tool: "Read", Digest: digestA, Epoch: 3,
		Counters:  c.Bind("source/s1", "worker/w1", "lane/isolated", "dest/api.example.com"),
		IssuedAt:  100,
		ExpiresAt: 1000,
		Status:    StatusPermitted,
	}
	return g, SpendInput{Now: 999, Spender: "w1", Digest: digestA, IdemKey: "k1", Epoch: 3, Counters: &c}
}

// TestCheckSpend: each broken binding yields its reason and missing fact.
func TestCheckSpend(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(g *Grant, in *SpendInput)
		reason  Reason
		missing string
	}{
		{"all bindings hold", func(*Grant, *SpendInput) {}, ReasonNone, ""},
		{"unbound counter moved", func(_ *Grant, in *SpendInput) { in.Counters.Bump("worker/w2") }, ReasonNone, ""},
		{"one nanosecond before expiry", func(_ *Grant, in *SpendInput) { in.Now = 999 }, ReasonNone, ""},
		{"different idempotency key is not a binding", func(_ *Grant, in *SpendInput) { in.IdemKey = "other" }, ReasonNone, ""},
		{"spender is not the grantee", func(_ *Grant, in *SpendInput) { in.Spender = "w2" }, ReasonNotGrantee, "grantee"},
		{"empty spender", func(_ *Grant, in *SpendInput) { in.Spender = "" }, ReasonNotGrantee, "grantee"},
		{"grant revoked", func(g *Grant, _ *SpendInput) { g.Status = StatusRevoked }, ReasonGrantRevoked, "grant_status"},
		{"grant spent", func(g *Grant, _ *SpendInput) { g.Status = StatusSpent }, ReasonAlreadySpent, "unspent"},
		{"grant closed", func(g *Grant, _ *SpendInput) { g.Status = StatusClosed }, ReasonAlreadySpent, "unspent"},
		{"status unset", func(g *Grant, _ *SpendInput) { g.Status = 0 }, ReasonAlreadySpent, "unspent"},
		{"exactly at expiry", func(_ *Grant, in *SpendInput) { in.Now = 1000 }, ReasonExpired, "clock<expires_at"},
		{"after expiry", func(_ *Grant, in *SpendInput) { in.Now = 5000 }, ReasonExpired, "clock<expires_at"},
		{"newer epoch", func(_ *Grant, in *SpendInput) { in.Epoch = 4 }, ReasonEpochStale, "epoch"},
		{"older epoch", func(_ *Grant, in *SpendInput) { in.Epoch = 2 }, ReasonEpochStale, "epoch"},
		{"source revoked", func(_ *Grant, in *SpendInput) { in.Counters.Bump("source/s1") }, ReasonSourceRevoked, "source/s1"},
		{"worker revoked", func(_ *Grant, in *SpendInput) { in.Counters.Bump("worker/w1") }, ReasonWorkerRevoked, "worker/w1"},
		{"lane revoked", func(_ *Grant, in *SpendInput) { in.Counters.Bump("lane/isolated") }, ReasonLaneRevoked, "lane/isolated"},
		{"destination revoked", func(_ *Grant, in *SpendInput) { in.Counters.Bump("dest/api.example.com") }, ReasonDestRevoked, "dest/api.example.com"},
		{"counter restored from an old checkpoint", func(_ *Grant, in *SpendInput) { in.Counters.Set("source/s1", 0) }, ReasonSourceRevoked, "source/s1"},
		{"nil counters against non-zero bindings", func(_ *Grant, in *SpendInput) { in.Counters = nil }, ReasonLaneRevoked, "lane/isolated"},
		{"digest mismatch", func(_ *Grant, in *SpendInput) { in.Digest = digestB }, ReasonDigestMismatch, "request_digest"},
		{"zero digest presented", func(_ *Grant, in *SpendInput) { in.Digest = events.Hash{} }, ReasonDigestMismatch, "request_digest"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, in := spendFixture()
			tc.mutate(g, &in)
			r, missing := CheckSpend(g, in)
			if r != tc.reason || missing != tc.missing {
				t.Fatalf("CheckSpend = %q, %q; want %q, %q", r, missing, tc.reason, tc.missing)
			}
		})
	}
}

// TestCheckSpendOrder: with every binding broken at once, CheckSpend
// reports them in the documented order — grantee, revoked, spent, expiry,
// target drift, epoch, counters, digest — as they are repaired one at a
// time.
func TestCheckSpendOrder(t *testing.T) {
	g, in := spendFixture()
	in.Spender = "w2"
	g.Status = StatusRevoked
	in.Now = 1000
	in.Epoch = 4
	in.Counters.Bump("source/s1")
	in.Digest = digestB
	g.Target = "path:/work/a.txt"
	in.Drift = "path:/work/b.txt"
	steps := []struct {
		want Reason
		fix  func()
	}{
		{ReasonNotGrantee, func() { in.Spender = "w1" }},
		{ReasonGrantRevoked, func() { g.Status = StatusSpent }},
		{ReasonAlreadySpent, func() { g.Status = StatusPermitted }},
		{ReasonExpired, func() { in.Now = 999 }},
		{ReasonTargetDrift, func() { in.Drift = g.Target }},
		{ReasonEpochStale, func() { in.Epoch = 3 }},
		{ReasonSourceRevoked, func() { in.Counters.Set("source/s1", 1) }},
		{ReasonDigestMismatch, func() { in.Digest = digestA }},
		{ReasonNone, func() {}},
	}
	for i, s := range steps {
		if r, _ := CheckSpend(g, in); r != s.want {
			t.Fatalf("step %d: CheckSpend = %q, want %q", i, r, s.want)
		}
		s.fix()
	}
}

// TestIsRetry: only the spender of the attempt, with the attempt's own
// non-empty idempotency key and the same request digest, is retrying.
func TestIsRetry(t *testing.T) {
	spent := func() *Grant {
		return &Grant{Worker: "w1", Digest: digestA, Status: StatusSpent, AttemptKey: "k1", AttemptSeq: 7}
	}
	cases := []struct {
		name    string
		g       func() *Grant
		spender string
		digest  events.Hash
		key     string
		want    bool
	}{
		{"same spender, key and digest", spent, "w1", digestA, "k1", true},
		{"closed grant, same attempt", func() *Grant { g := spent(); g.Status = StatusClosed; return g }, "w1", digestA, "k1", true},
		{"different key", spent, "w1", digestA, "k2", false},
		{"empty key", func() *Grant { g := spent(); g.AttemptKey = ""; return g }, "w1", digestA, "", false},
		{"different spender", spent, "w2", digestA, "k1", false},
		{"different digest", spent, "w1", digestB, "k1", false},
		{"not yet spent", func() *Grant { g := spent(); g.Status = StatusPermitted; return g }, "w1", digestA, "k1", false},
		{"revoked", func() *Grant { g := spent(); g.Status = StatusRevoked; return g }, "w1", digestA, "k1", false},
		{"no attempt recorded", func() *Grant { g := spent(); g.AttemptSeq = 0; return g }, "w1", digestA, "k1", false},
	}
	for _, tc := range cases {
		if got := IsRetry(tc.g(), tc.spender, tc.digest, tc.key); got != tc.want {
			t.Errorf("%s: IsRetry = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStatusAndOutcomes: statuses have stable names; verifiers may report
// confirmed, failed or unknown, never contested.
func TestStatusAndOutcomes(t *testing.T) {
	names := map[Status]string{0: "unknown", StatusPermitted: "permitted", StatusSpent: "spent",
		StatusClosed: "closed", StatusRevoked: "revoked", 5: "unknown", 255: "unknown"}
	for s, want := range names {
		if s.String() != want {
			t.Errorf("Status(%d) = %q, want %q", s, s.String(), want)
		}
	}
	for o, want := range map[string]bool{OutcomeConfirmed: true, OutcomeFailed: true, OutcomeUnknown: true,
		OutcomeContested: false, "": false, "Confirmed": false} {
		if ValidOutcome(o) != want {
			t.Errorf("ValidOutcome(%q) = %v, want %v", o, !want, want)
		}
	}
}
