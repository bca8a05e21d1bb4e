package worker

import (
	"context"
	"reflect"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// oldIssuer answers as an issuer of a build before the combined requests:
// their subjects are refused (invalid_request naming the subject), the
// separate requests answered.
type oldIssuer struct{ ops []string }

func (o *oldIssuer) Grant(_ context.Context, r api.GrantRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpGrant)
	return grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 1, Kind: events.KindPermit, Digest: events.Sum([]byte("d")), Target: "url:x"}, nil
}

func (o *oldIssuer) Spend(_ context.Context, r api.SpendRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpSpend)
	if r.GrantID != "g-1" {
		return grants.Refuse(grants.ReasonUnknownGrant, "live grant", ""), nil
	}
	return grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Seq: 2, Kind: events.KindAttempt, Digest: events.Sum([]byte("d"))}, nil
}

func (o *oldIssuer) Effect(_ context.Context, r api.EffectRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpEffect)
	return grants.Envelope{Decision: grants.Permit, GrantID: r.GrantID, Seq: 3, Kind: events.KindEffect, Outcome: r.Outcome}, nil
}

func (o *oldIssuer) RegisterSource(_ context.Context, r api.SourceRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpSource)
	return grants.Envelope{Decision: grants.Permit, Seq: 4, Kind: events.KindSource, Authority: "evidence"}, nil
}

func (o *oldIssuer) GrantSpend(context.Context, api.GrantRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpGrantSpend)
	return grants.Refuse(grants.ReasonInvalidRequest, "subject", `unknown operation "grant_spend"`), nil
}

func (o *oldIssuer) EffectSource(context.Context, api.EffectSourceRequest) (grants.Envelope, error) {
	o.ops = append(o.ops, api.OpEffectSource)
	return grants.Refuse(grants.ReasonInvalidRequest, "subject", `unknown operation "effect_source"`), nil
}

func (o *oldIssuer) Close() {}

// TestCombinedFallsBackOnOldIssuer: against an issuer that does not take
// the combined requests, a call is still granted and spent, and its
// outcome and result still reported and registered, by the separate
// requests.
func TestCombinedFallsBackOnOldIssuer(t *testing.T) {
	o := &oldIssuer{}
	call := harness.Call{Harness: harness.ClaudeCode, Session: "s1", CallID: "toolu_1", Tool: "WebFetch", Args: []byte(`{"url":"x"}`)}
	env, err := authorize(testCtx(t), o, call, "coordinator", grantContext{})
	if err != nil || env.Decision != grants.Permit || env.Kind != events.KindAttempt || env.GrantID != "g-1" {
		t.Fatalf("authorize: %+v %v", env, err)
	}
	if want := []string{api.OpGrantSpend, api.OpGrant, api.OpSpend}; !reflect.DeepEqual(o.ops, want) {
		t.Fatalf("authorize sent %v, want %v", o.ops, want)
	}
	o.ops = nil
	store := newSessionStore(t.TempDir(), "s1", 1<<20)
	src := newSource("s1", "toolu_1", "tool_result", scopeTask, "", "WebFetch", "the result", []byte("result text"))
	eff, _, recErr, regErr := reportSpent(testCtx(t), o, store, call, spentCall{grant: "g-1"}, grants.OutcomeConfirmed, "harness:claude-code", &src)
	if recErr != nil || regErr != nil || eff.Kind != events.KindEffect {
		t.Fatalf("reportSpent: %+v %v %v", eff, recErr, regErr)
	}
	if want := []string{api.OpEffectSource, api.OpEffect, api.OpSource}; !reflect.DeepEqual(o.ops, want) {
		t.Fatalf("reportSpent sent %v, want %v", o.ops, want)
	}
}
