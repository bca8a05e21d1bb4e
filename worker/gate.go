package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// authorize asks for a grant for call in lane and spends it: the call is
// about to run. It returns the attempt receipt (decision permit) or the
// refusal of the request or of the spend; an error means nothing is known
// and the call must not run.
//
// It asks for both in one request (api.OpGrantSpend: one round trip, one
// log entry from receipt format 11); an issuer of an earlier build refuses
// it before proposing anything, and the request and the spend are then
// sent apart. Either way the request and
// the spend carry the call's idempotency key, so a repeated hook for the
// same call gets the same grant and the same attempt receipt back instead
// of a second grant or an already_spent refusal.
func authorize(ctx context.Context, a authority, call harness.Call, lane string, gc grantContext) (grants.Envelope, error) {
	req := grantRequest(call, lane, gc)
	env, err := a.GrantSpend(ctx, req)
	if err != nil || !client.GrantSpendUnsupported(env) {
		if err == nil && env.Decision == grants.Permit && env.GrantID == "" {
			return env, errors.New("the issuer permitted the call without naming a grant")
		}
		return env, err
	}
	return grantThenSpend(ctx, a, call, req)
}

// grantThenSpend is authorize for an issuer that does not take the
// combined request: the grant request, then the spend of its permit.
func grantThenSpend(ctx context.Context, a authority, call harness.Call, req api.GrantRequest) (grants.Envelope, error) {
	key := call.IdempotencyKey()
	permit, err := a.Grant(ctx, req)
	if err != nil {
		return permit, err
	}
	if permit.Decision != grants.Permit {
		return permit, nil
	}
	if permit.GrantID == "" {
		return permit, errors.New("the issuer permitted the call without naming a grant")
	}
	return a.Spend(ctx, api.SpendRequest{GrantID: permit.GrantID, Args: call.Args, IdempotencyKey: key})
}

// grantContext is what a hook knows of a call beyond the call itself: the
// session's working directory (absolute, or "") and the field traces of
// its arguments. The MCP proxy knows neither.
type grantContext struct {
	Cwd        string
	Provenance []api.FieldTrace
	// Route is the config's route, used when the environment names none.
	Route string
}

func grantRequest(call harness.Call, lane string, gc grantContext) api.GrantRequest {
	rb := routeOfProcess()
	if rb.Route == "" && rb.Gen == 0 {
		rb.Route = gc.Route
	}
	return api.GrantRequest{
		Lane: lane, Session: call.GrantSession(), Tool: call.Tool, Args: call.Args,
		IdempotencyKey: call.IdempotencyKey(), Cwd: gc.Cwd, Provenance: gc.Provenance,
		Route: rb.Route, RouteGen: rb.Gen,
	}
}

// errRanWithoutGrant: a post-call hook found no spent grant for the call.
var errRanWithoutGrant = errors.New("ran without a spent writ grant")

// recordTarget reports a finished call's outcome against the grant authorize
// spent for it, when no record of the call names the grant (a hook reads
// it with readSpentCall and reports with reportSpent). The grant is found
// again by repeating the grant request with the same idempotency key and
// arguments, which returns the original permit (the issuer matches a
// repeat by tool and arguments; the traces are not repeated: they do not
// change the original answer). verifier names who judged the outcome
// (for hooks, the harness itself: self-reported).
//
// A failed call that writ had refused records nothing: the refusal is why
// it failed, and no grant was spent. A call reported as having succeeded
// although writ refused it is an error the model and the operator must
// see.
//
// It also returns the canonical target the call's grant bound ("" when
// there is none or no permit): the resource a result came from
// (harness.ResultResource).
func recordTarget(ctx context.Context, a authority, call harness.Call, lane, cwd, outcome, verifier string) (grants.Envelope, string, error) {
	permit, err := a.Grant(ctx, grantRequest(call, lane, grantContext{Cwd: cwd}))
	if err != nil {
		return permit, "", err
	}
	target := ""
	if permit.Decision == grants.Permit {
		target = permit.Target
	}
	env, err := recordPermit(ctx, a, call, permit, outcome, verifier)
	return env, target, err
}

func recordPermit(ctx context.Context, a authority, call harness.Call, permit grants.Envelope, outcome, verifier string) (grants.Envelope, error) {
	switch {
	case permit.Reason == grants.ReasonIdemConflict:
		return permit, errInputDiffers(call)
	case permit.Decision != grants.Permit && outcome == grants.OutcomeFailed:
		return permit, nil
	case permit.Decision != grants.Permit || permit.GrantID == "":
		return permit, fmt.Errorf("this %s call %s: writ had refused it (%s)", call.Tool, errRanWithoutGrant, refusalCode(permit))
	}
	eff, err := a.Effect(ctx, api.EffectRequest{GrantID: permit.GrantID, Outcome: outcome, Verifier: verifier})
	if err != nil {
		return eff, err
	}
	return eff, effectRefusal(call, permit.GrantID, eff)
}

// effectRefusal is the error an effect's refusal is reported with (nil
// for a recorded effect).
func effectRefusal(call harness.Call, grant string, eff grants.Envelope) error {
	if eff.Decision == grants.Permit {
		return nil
	}
	if eff.Reason == grants.ReasonNotSpent {
		// The permit was minted just now: the original answer aged out
		// of the issuer (a very long call) or no PreToolUse hook ran.
		return fmt.Errorf("this %s call %s (grant %s was never spent): its result is not recorded", call.Tool, errRanWithoutGrant, grant)
	}
	return fmt.Errorf("the issuer refused the result of this %s call: %s", call.Tool, refusalCode(eff))
}

// errInputDiffers: a finished call presented other arguments than its
// PreToolUse did.
func errInputDiffers(call harness.Call) error {
	return fmt.Errorf("this %s call's tool_input differs from the one its PreToolUse hook presented, so its result cannot be bound to that grant", call.Tool)
}

// reportSpent reports a finished call's outcome against the grant its
// PreToolUse spent, as the call's record names it (readSpentCall; a zero
// digest: a caller that kept the grant itself, unchecked), and
// registers the call's result src (nil: none) as a source: both in one
// request (api.OpEffectSource, one log entry) when there is a result,
// else the effect alone. An issuer that does not take the combined
// request gets the effect and then the registration. eff is the effect's
// answer; recErr is the
// effect's failure, regErr the registration's (as registerSources
// reports it); a request that could not be sent or answered is recErr
// alone, which then says the result was not registered either.
func reportSpent(ctx context.Context, a authority, store *sessionStore, call harness.Call, sc spentCall, outcome, verifier string, src *pendingSource) (eff grants.Envelope, notes []string, recErr, regErr error) {
	if d, err := grants.DigestArgs(call.Tool, call.Args); err == nil && !sc.digest.IsZero() && d != sc.digest {
		return eff, nil, errInputDiffers(call), nil
	}
	if src != nil {
		env, err := a.EffectSource(ctx, api.EffectSourceRequest{GrantID: sc.grant, Outcome: outcome, Verifier: verifier, Source: src.req})
		if err != nil {
			return env, nil, fmt.Errorf("%w; its result was not registered as a source either", err), nil
		}
		if !client.GrantSpendUnsupported(env) && env.Source != nil {
			notes, regErr = registerAnswered(ctx, a, store, []pendingSource{*src}, []grants.Envelope{*env.Source})
			return env, notes, effectRefusal(call, sc.grant, env), regErr
		}
	}
	eff, err := a.Effect(ctx, api.EffectRequest{GrantID: sc.grant, Outcome: outcome, Verifier: verifier})
	if err != nil {
		if src != nil {
			err = fmt.Errorf("%w; its result was not registered as a source either", err)
		}
		return eff, nil, err, nil
	}
	recErr = effectRefusal(call, sc.grant, eff)
	if src != nil {
		notes, regErr = registerSources(ctx, a, store, []pendingSource{*src})
	}
	return eff, notes, recErr, regErr
}

func refusalCode(env grants.Envelope) string {
	s := string(env.Decision)
	if env.Reason != grants.ReasonNone {
		s += " " + string(env.Reason)
	}
	if env.Missing != "" {
		s += ", missing " + env.Missing
	}
	return s
}

// unreachable rewords a connection or timeout error for a hook's one
// line.
func unreachable(err error) error {
	switch {
	case errors.Is(err, connect.ErrConnect):
		return fmt.Errorf("cannot reach the writ issuer: %v", err)
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the writ issuer did not answer in time: %v", err)
	}
	return err
}

// blocked is unreachable for a call not yet run: it also says which
// boundary held, so that nobody reads a shed request as a skipped check.
func blocked(err error) error {
	if !isTransport(err) {
		return err
	}
	return fmt.Errorf("%v; %s; retry the call later", unreachable(err), grants.KeptBlocked)
}
