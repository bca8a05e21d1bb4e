package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	authlevel "github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// Plugin ops on the sidecar socket: the judgement an OpenClaw gateway
// plugin (integrations/openclaw) asks for, so the plugin itself stays a
// thin translator. See docs/harnesses.md, "The plugin protocol".
const (
	OpPluginBefore  = "openclaw.before"
	OpPluginAfter   = "openclaw.after"
	OpPluginResolve = "openclaw.resolve"
	OpPluginMessage = "openclaw.message"
)

// Plugin verdicts.
const (
	VerdictPermit           = "permit"
	VerdictDeny             = "deny"
	VerdictApprovalRequired = "approval_required"
	VerdictRecorded         = "recorded" // after: the effect was recorded
	VerdictRefused          = "refused"  // after or resolve: writ refused
)

// pluginCall is the call part of a before or after request.
type pluginCall struct {
	Lane    string          `json:"lane"`
	Session string          `json:"session"`
	Tool    string          `json:"tool"`
	Params  json.RawMessage `json:"params"`
	CallID  string          `json:"call_id"`
	Cwd     string          `json:"cwd,omitempty"`
}

// pluginAfter is an after request: the call, and its result or error.
type pluginAfter struct {
	pluginCall
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// pluginResolve forwards a person's decision on a held call, through the
// reviewer identity configured for the gateway.
type pluginResolve struct {
	pluginCall
	ReviewID string         `json:"review_id"`
	Decision string         `json:"decision"` // only "allow-once" approves
	Reviewer pluginReviewer `json:"reviewer"`
}

// pluginMessage is a message the gateway received for an agent's session:
// its content becomes a provenance source of that session, so values
// copied from it into a tool call are traced to it.
type pluginMessage struct {
	Session   string `json:"session"`
	MessageID string `json:"message_id,omitempty"`
	Sender    string `json:"sender,omitempty"`
	// Owner: the sender is one the gateway's config lists as the user, so
	// the message is the user's prompt; otherwise it is a peer message.
	Owner   bool   `json:"owner,omitempty"`
	Content string `json:"content"`
}

// pluginReviewer is the operator identity the gateway approves with: a
// NATS user allowed on writ.op.approve, never the worker's. The plugin
// sends the password itself, read from the file only the gateway can
// read: the sidecar never reads a reviewer's secret on a caller's behalf,
// so reaching the socket is not enough to approve.
type pluginReviewer struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// PluginAnswer is the sidecar's answer to a plugin op.
type PluginAnswer struct {
	Verdict  string `json:"verdict"`
	Tool     string `json:"tool,omitempty"` // the writ tool the call was granted as
	Reason   string `json:"reason,omitempty"`
	Next     string `json:"next,omitempty"`
	ReviewID string `json:"review_id,omitempty"`
	Caption  string `json:"caption,omitempty"`
	GrantID  string `json:"grant_id,omitempty"`
	Effect   string `json:"effect,omitempty"` // after: confirmed or failed
	Receipt  uint64 `json:"receipt,omitempty"`
	Notes    string `json:"notes,omitempty"`
}

// errReviewer: a resolve named no usable reviewer identity.
var errReviewer = errors.New("no usable reviewer identity")

// clientAuthority is a sidecar's client as an authority.
type clientAuthority struct{ *client.Client }

func (clientAuthority) Close() {}

// heldReviews remembers which review each held call got, so a resolve can
// approve only a review this sidecar handed to that call.
type heldReviews struct {
	mu sync.Mutex
	m  map[string]string // idempotency key → review id
}

const maxHeldReviews = 4096

func (h *heldReviews) put(key, review string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHeldReviews {
		h.m = map[string]string{}
	}
	h.m[key] = review
}

func (h *heldReviews) get(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key]
}

// spentGrants remembers the grant each permitted call spent, so that its
// after op reports the outcome against it without asking for the grant
// again (as a hook's call record does).
type spentGrants struct {
	mu sync.Mutex
	m  map[string]spentCall // idempotency key → the grant spent
}

func (g *spentGrants) put(key string, env grants.Envelope) {
	if env.Decision != grants.Permit || env.GrantID == "" || env.Digest.IsZero() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= maxHeldReviews {
		g.m = map[string]spentCall{}
	}
	g.m[key] = spentCall{grant: env.GrantID, digest: env.Digest, target: env.Target}
}

func (g *spentGrants) get(key string) (spentCall, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	sc, ok := g.m[key]
	return sc, ok
}

// plugin answers one plugin op; an error is a transport failure the
// caller reports as unavailable.
func (s *sidecar) plugin(ctx context.Context, c *client.Client, op string, body json.RawMessage) (*PluginAnswer, error) {
	auth := clientAuthority{c}
	switch op {
	case OpPluginBefore:
		var r pluginCall
		if err := strictJSON(body, &r); err != nil {
			return nil, err
		}
		call, lane, err := r.call()
		if err != nil {
			return nil, err
		}
		gc := grantContext{Cwd: r.workDir()}
		store := s.store(call.Session)
		if store != nil {
			if reg, lerr := store.load(ctx); lerr == nil {
				gc.Provenance = traceArgs(reg, call.Args)
			}
		}
		env, err := authorize(ctx, auth, call, lane, gc)
		if err != nil {
			return nil, err
		}
		s.spent.put(call.IdempotencyKey(), env)
		a := beforeAnswer(call, env)
		if a.Verdict == VerdictApprovalRequired && a.ReviewID != "" {
			s.held.put(call.IdempotencyKey(), a.ReviewID)
		}
		return a, nil
	case OpPluginAfter:
		var r pluginAfter
		if err := strictJSON(body, &r); err != nil {
			return nil, err
		}
		return s.pluginAfter(ctx, auth, r)
	case OpPluginResolve:
		var r pluginResolve
		if err := strictJSON(body, &r); err != nil {
			return nil, err
		}
		return s.pluginResolve(ctx, auth, r)
	case OpPluginMessage:
		var r pluginMessage
		if err := strictJSON(body, &r); err != nil {
			return nil, err
		}
		return s.pluginMessage(ctx, auth, r)
	}
	return nil, fmt.Errorf("%w: unknown op %q", harness.ErrMalformed, op)
}

func (r pluginCall) call() (harness.Call, string, error) {
	if err := api.ValidID(r.Lane); err != nil {
		return harness.Call{}, "", fmt.Errorf("%w: lane: %v", harness.ErrMalformed, err)
	}
	call, err := harness.OpenClawCall(r.Session, r.CallID, r.Tool, r.Params)
	return call, r.Lane, err
}

// workDir is the request's cwd when it is a clean absolute path, else "".
func (r pluginCall) workDir() string {
	return harness.HookInput{Cwd: harness.LooseString(r.Cwd)}.WorkDir()
}

// store is the provenance registry of an OpenClaw session, or nil when
// the sidecar keeps none.
func (s *sidecar) store(session string) *sessionStore {
	if s.stateDir == "" {
		return nil
	}
	return newSessionStore(s.stateDir, harness.OpenClaw+":"+session, s.maxBytes)
}

func beforeAnswer(call harness.Call, env grants.Envelope) *PluginAnswer {
	a := &PluginAnswer{Tool: call.Tool, Receipt: env.Seq}
	switch env.Decision {
	case grants.Permit:
		a.Verdict, a.GrantID = VerdictPermit, env.GrantID
		a.Reason = harness.PermitReason(call.Tool, env)
	case grants.ApprovalRequired:
		a.Verdict, a.ReviewID = VerdictApprovalRequired, env.ReviewID
		a.Reason = harness.RefusalReason(call.Tool, env)
		a.Next = harness.NextStep(env)
		a.Caption = harness.ReviewCaption(call.Tool, env)
	default:
		a.Verdict = VerdictDeny
		a.Reason = harness.RefusalReason(call.Tool, env)
		a.Next = harness.NextStep(env)
	}
	return a
}

// pluginAfter records a finished call's effect against the grant spent
// for it (or for its approved retry) and registers its result as a
// provenance source.
func (s *sidecar) pluginAfter(ctx context.Context, auth authority, r pluginAfter) (*PluginAnswer, error) {
	call, lane, err := r.call()
	if err != nil {
		return nil, err
	}
	outcome := grants.OutcomeConfirmed
	if r.Error != "" {
		outcome = grants.OutcomeFailed
	}
	a := &PluginAnswer{Tool: call.Tool, Effect: outcome}
	rec := call
	if held := s.held.get(call.IdempotencyKey()); held != "" {
		// The call ran after its review was approved: its grant is the
		// one the resolve spent.
		rec.CallID = call.CallID + "#approved"
	}
	verifier := harness.Verifier(harness.OpenClaw)
	if sc, ok := s.spent.get(rec.IdempotencyKey()); ok {
		return s.reportAfter(ctx, auth, a, call, rec, sc, outcome, verifier, r)
	}
	env, target, recErr := recordTarget(ctx, auth, rec, lane, r.workDir(), outcome, verifier)
	if recErr != nil {
		if isTransport(recErr) {
			return nil, recErr
		}
		a.Verdict, a.Reason = VerdictRefused, harness.OneLine(recErr.Error())
		return a, nil
	}
	a.Verdict, a.Receipt, a.GrantID = VerdictRecorded, env.Seq, env.GrantID
	if outcome != grants.OutcomeConfirmed {
		return a, nil
	}
	in := harness.HookInput{SessionID: call.Session, ToolInput: call.Args, ToolResponse: r.Result, Cwd: harness.LooseString(r.workDir())}
	store := s.store(call.Session)
	var src pendingSource
	var notes []string
	var ok bool
	if store != nil {
		src, notes, ok = resultSource(ctx, store, in, call)
		src = withResource(src, target, call.Session, call.CallID)
	}
	if ok {
		more, err := registerSources(ctx, auth, store, []pendingSource{src})
		notes = append(notes, more...)
		if err != nil {
			notes = append(notes, err.Error())
		}
	}
	a.Notes = harness.OneLine(joinNotes(notes))
	return a, nil
}

// reportAfter is pluginAfter for a call whose grant this sidecar spent:
// the outcome and, for a confirmed call, the result's registration in one
// request (reportSpent).
func (s *sidecar) reportAfter(ctx context.Context, auth authority, a *PluginAnswer, call, rec harness.Call, sc spentCall, outcome, verifier string, r pluginAfter) (*PluginAnswer, error) {
	var (
		src   *pendingSource
		notes []string
	)
	store := s.store(call.Session)
	if outcome == grants.OutcomeConfirmed && store != nil {
		in := harness.HookInput{SessionID: call.Session, ToolInput: call.Args, ToolResponse: r.Result, Cwd: harness.LooseString(r.workDir())}
		if p, n, ok := resultSource(ctx, store, in, call); ok {
			p = withResource(p, sc.target, call.Session, call.CallID)
			src, notes = &p, n
		}
	}
	env, more, recErr, regErr := reportSpent(ctx, auth, store, rec, sc, outcome, verifier, src)
	if recErr != nil {
		if isTransport(recErr) {
			return nil, recErr
		}
		a.Verdict, a.Reason = VerdictRefused, harness.OneLine(recErr.Error())
		return a, nil
	}
	a.Verdict, a.Receipt, a.GrantID = VerdictRecorded, env.Seq, env.GrantID
	notes = append(notes, more...)
	if regErr != nil {
		notes = append(notes, regErr.Error())
	}
	a.Notes = harness.OneLine(joinNotes(notes))
	return a, nil
}

// pluginResolve forwards a person's allow-once for a held call: it
// approves the review this sidecar handed to that call, as the reviewer
// (an operator identity that must not be the worker's), then grants and
// spends the call under its approved key. Any other decision is a
// refusal the plugin reports; the review is left to expire.
func (s *sidecar) pluginResolve(ctx context.Context, auth authority, r pluginResolve) (*PluginAnswer, error) {
	call, lane, err := r.call()
	if err != nil {
		return nil, err
	}
	a := &PluginAnswer{Tool: call.Tool, ReviewID: r.ReviewID}
	refuse := func(why string) (*PluginAnswer, error) {
		a.Verdict, a.Reason = VerdictRefused, why
		return a, nil
	}
	if r.Decision != "allow-once" {
		return refuse(fmt.Sprintf("the reviewer decided %q; only allow-once releases a held call, once", r.Decision))
	}
	if held := s.held.get(call.IdempotencyKey()); held == "" || held != r.ReviewID {
		return refuse(fmt.Sprintf("review %s is not the one this sidecar holds for call %s", r.ReviewID, call.CallID))
	}
	if r.Reviewer.User == "" || r.Reviewer.User == s.worker {
		return refuse(fmt.Sprintf("%v: the reviewer must be an operator identity, not the worker %s", errReviewer, s.worker))
	}
	opts := s.conn
	if r.Reviewer.Password == "" {
		return refuse(fmt.Sprintf("%v: reviewer %s came without a password", errReviewer, r.Reviewer.User))
	}
	opts.User, opts.PasswordFile, opts.Password = r.Reviewer.User, "", r.Reviewer.Password
	opts.ConnectOnce, opts.Name = true, "worker-agent-reviewer:"+r.Reviewer.User
	nc, err := opts.DialContext(ctx)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	rc := client.New(nc, "")
	rc.Attempt = maxAttempt
	env, err := rc.Approve(ctx, api.ApproveRequest{ReviewID: r.ReviewID, Note: "allow-once through the OpenClaw gateway for call " + call.CallID})
	if err != nil {
		if isTransport(err) {
			return nil, err
		}
		return refuse(fmt.Sprintf("the approval as %s was refused: %v", r.Reviewer.User, err))
	}
	if env.Decision != grants.Permit {
		return refuse("the issuer refused the approval: " + refusalCode(env))
	}
	approved := call
	approved.CallID = call.CallID + "#approved"
	spent, err := authorize(ctx, auth, approved, lane, grantContext{Cwd: r.workDir()})
	if err != nil {
		return nil, err
	}
	s.spent.put(approved.IdempotencyKey(), spent)
	b := beforeAnswer(call, spent)
	b.ReviewID = r.ReviewID
	return b, nil
}

// pluginMessage registers a received message as a source of its session:
// a user_prompt when it came from an owner, else a peer_message
// (evidence). A refusal or an unreachable issuer is reported, never an
// error for the gateway: a message is never held back for provenance.
func (s *sidecar) pluginMessage(ctx context.Context, auth authority, r pluginMessage) (*PluginAnswer, error) {
	if _, err := harness.OpenClawCall(r.Session, "message", "message", nil); err != nil {
		return nil, err
	}
	content := []byte(r.Content)
	if len(content) == 0 {
		return nil, fmt.Errorf("%w: content is empty", harness.ErrMalformed)
	}
	if len(content) > harness.MaxSourceContent {
		content = []byte(strings.ToValidUTF8(string(content[:harness.MaxSourceContent]), ""))
	}
	store := s.store(r.Session)
	if store == nil {
		return &PluginAnswer{Verdict: VerdictRefused, Reason: "this sidecar keeps no provenance state, so it registers no sources"}, nil
	}
	channel, what := authlevel.ChannelPeerMessage, "a message from "+harness.OneLine(r.Sender)
	if r.Owner {
		channel, what = authlevel.ChannelUserPrompt, "the user's message"
	}
	src := newSource(r.Session, "message:"+r.MessageID, channel, scopeSession, "", "", what, content)
	notes, err := registerSources(ctx, auth, store, []pendingSource{src})
	if err != nil {
		if isTransport(err) {
			return nil, err
		}
		return &PluginAnswer{Verdict: VerdictRefused, Reason: harness.OneLine(err.Error())}, nil
	}
	return &PluginAnswer{Verdict: VerdictRecorded, Notes: harness.OneLine(joinNotes(notes))}, nil
}

// strictJSON decodes a plugin body, refusing unknown fields.
func strictJSON(b json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", harness.ErrMalformed, err)
	}
	return nil
}
