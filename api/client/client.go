// Package client is writ's NATS client for the request/reply protocol of
// package api: it encodes requests, sends them on their subjects and
// retries with the same idempotency key until the issuer answers. Package
// api holds the wire format alone and imports no transport.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/connect"
	"github.com/writ-dev/writ/grants"
)

// ErrUnavailable is returned when no issuer answered before the context
// ended. The caller may retry with the same idempotency key.
var ErrUnavailable = errors.New("client: issuer unavailable")

// Client sends requests to the issuer and retries them, with the same
// idempotency key, until an answer arrives or ctx ends. Answers come only
// after the entry is committed, so a retried request that was already
// applied gets its original answer.
type Client struct {
	NC *nats.Conn
	// Worker is this client's worker id; it picks the subject, and the
	// NATS server's permissions make sure it is really ours.
	Worker string
	// Attempt bounds one try; Client retries until ctx ends.
	Attempt time.Duration
	// Leader, when set, is NC's leader affinity: requests go through it,
	// and the leader's URL in answers and status moves NC to the leader's
	// server (see connect.Affinity). nil sends requests as they are.
	Leader *connect.Affinity
}

// New returns a client for worker (empty for operators), with the leader
// affinity connect.Dial gave nc, if any.
func New(nc *nats.Conn, worker string) *Client {
	return &Client{NC: nc, Worker: worker, Attempt: 2 * time.Second, Leader: connect.AffinityOf(nc)}
}

// workerSubject is the subject of op for the client's worker, as it is now.
func (c *Client) workerSubject(op string) string { return api.WorkerSubject(c.Worker, op) }

// bodies recycles the buffers grant, spend and effect bodies are encoded
// into, one pool for every client (a body buffer fits any client's body).
// nats.go copies a body into the connection's write buffer before a
// request call returns, so a buffer is free again once send has returned,
// retries included. Buffers grown past maxPooledBody are left to the
// garbage collector rather than kept.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody bounds the capacity of a buffer returned to bodies.
const maxPooledBody = 64 << 10

// getBody returns an empty buffer with room for at least n bytes.
func getBody(n int) *[]byte {
	bp := bodies.Get().(*[]byte)
	*bp = slices.Grow((*bp)[:0], n)
	return bp
}

// putBody returns a buffer to bodies; body is what was last encoded into
// it (it may have grown).
func putBody(bp *[]byte, body []byte) {
	if cap(body) > maxPooledBody {
		return
	}
	*bp = body[:0]
	bodies.Put(bp)
}

// NewKey returns a fresh idempotency key.
func NewKey() string { return uuid.NewString() }

// Grant asks for a grant. An empty IdempotencyKey is filled in.
func (c *Client) Grant(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return c.grantOp(ctx, api.OpGrant, r)
}

// GrantSpend asks for a grant and spends it at once (api.OpGrantSpend):
// the answer is the attempt, the spend's refusal or the request's. An
// empty IdempotencyKey is filled in. An issuer of an earlier build
// answers invalid_request naming the subject: see GrantSpendUnsupported.
func (c *Client) GrantSpend(ctx context.Context, r api.GrantRequest) (grants.Envelope, error) {
	return c.grantOp(ctx, api.OpGrantSpend, r)
}

// grantOp sends r as a grant request under op (api.OpGrant or
// api.OpGrantSpend), encoded into a pooled buffer.
func (c *Client) grantOp(ctx context.Context, op string, r api.GrantRequest) (grants.Envelope, error) {
	r.V = api.Version
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = NewKey()
	}
	bp := getBody(r.SizeHint())
	payload, err := r.AppendJSON(*bp)
	if err != nil {
		putBody(bp, payload)
		return grants.Envelope{}, encodeError(err)
	}
	env, err := c.envelopeFor(ctx, c.workerSubject(op), payload)
	putBody(bp, payload)
	return env, err
}

// EffectSource reports an outcome and registers a source in one log
// entry (api.OpEffectSource): the answer is the effect's, with the
// source's in Source. See GrantSpendUnsupported for an issuer that does
// not take it.
func (c *Client) EffectSource(ctx context.Context, r api.EffectSourceRequest) (grants.Envelope, error) {
	r.V = api.Version
	r.Source.V = api.Version
	return c.envelope(ctx, c.workerSubject(api.OpEffectSource), r)
}

// GrantSpendUnsupported recognizes the answer of an issuer that does not
// take the combined requests (api.OpGrantSpend, api.OpEffectSource): one
// of an earlier build (invalid_request naming the subject), or a state
// machine below receipt format 11 (unsupported_version, nothing
// recorded), which an issuer of this build never lets a combined request
// reach. The caller sends the separate requests instead.
func GrantSpendUnsupported(env grants.Envelope) bool {
	return env.Decision == grants.Deny && env.Seq == 0 &&
		(env.Reason == grants.ReasonUnknownVersion || env.Reason == grants.ReasonInvalidRequest && env.Missing == "subject")
}

// Spend spends a grant. An empty IdempotencyKey is filled in.
func (c *Client) Spend(ctx context.Context, r api.SpendRequest) (grants.Envelope, error) {
	r.V = api.Version
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = NewKey()
	}
	bp := getBody(r.SizeHint())
	payload, err := r.AppendJSON(*bp)
	if err != nil {
		putBody(bp, payload)
		return grants.Envelope{}, encodeError(err)
	}
	env, err := c.envelopeFor(ctx, c.workerSubject(api.OpSpend), payload)
	putBody(bp, payload)
	return env, err
}

// Effect reports an outcome.
func (c *Client) Effect(ctx context.Context, r api.EffectRequest) (grants.Envelope, error) {
	r.V = api.Version
	bp := getBody(r.SizeHint())
	payload := r.AppendJSON(*bp)
	env, err := c.envelopeFor(ctx, c.workerSubject(api.OpEffect), payload)
	putBody(bp, payload)
	return env, err
}

// RegisterSource registers a content source's descriptor. The answer is
// a permit envelope naming the authority the issuer assigned (Authority)
// and the origin counters it recorded (Counters), or a refusal. A retry
// of the same registration gets the same answer.
func (c *Client) RegisterSource(ctx context.Context, r api.SourceRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, c.workerSubject(api.OpSource), r)
}

// Approve approves an open review.
func (c *Client) Approve(ctx context.Context, r api.ApproveRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectApprove, r)
}

// OpenReview opens a review for an artifact, as the client's worker (a
// worker of the coordinator lane).
func (c *Client) OpenReview(ctx context.Context, r api.ReviewOpenRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, c.workerSubject(api.OpReview), r)
}

// DecideReview approves or rejects a review: as an operator when reviewer
// is "", else as that reviewer identity (whose NATS user must be allowed
// to publish on writ.review.<reviewer>.>).
func (c *Client) DecideReview(ctx context.Context, reviewer string, r api.ReviewDecideRequest) (grants.Envelope, error) {
	r.V = api.Version
	subj := api.SubjectReviewDecide
	if reviewer != "" {
		subj = api.ReviewerSubject(reviewer, api.ReviewOpDecide)
	}
	return c.envelope(ctx, subj, r)
}

// ReplyReview relays a person's plain-text reply: as an operator when
// reviewer is "", else as that reviewer identity.
func (c *Client) ReplyReview(ctx context.Context, reviewer string, r api.ReviewReplyRequest) (grants.Envelope, error) {
	r.V = api.Version
	subj := api.SubjectReviewReply
	if reviewer != "" {
		subj = api.ReviewerSubject(reviewer, api.ReviewOpReply)
	}
	return c.envelope(ctx, subj, r)
}

// BreakGlass opens a break-glass case (operator).
func (c *Client) BreakGlass(ctx context.Context, r api.BreakGlassRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectBreakGlass, r)
}

// Spawn asks for a child of the client's worker. An empty Child is
// filled in (<worker>-<random>), once, so that retries name the same
// child.
func (c *Client) Spawn(ctx context.Context, r api.SpawnRequest) (grants.Envelope, error) {
	r.V = api.Version
	if r.Child == "" {
		r.Child = ChildID(c.Worker)
	}
	return c.envelope(ctx, c.workerSubject(api.OpSpawn), r)
}

// ChildID returns a fresh child id for parent: the parent's id, a dash
// and eight hex digits (a child's id starts with its parent's; a parent id
// over 55 characters leaves no room, and the issuer refuses the spawn).
func ChildID(parent string) string {
	return parent + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
}

// Restore starts the client's worker's next incarnation, after a
// checkpoint restore: nothing the old incarnation held stays spendable.
func (c *Client) Restore(ctx context.Context) (grants.Envelope, error) {
	return c.envelope(ctx, c.workerSubject(api.OpRestore), api.RestoreRequest{V: api.Version})
}

// Respawn brings a worker back, approval-blocked (operator).
func (c *Client) Respawn(ctx context.Context, r api.RespawnRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectRespawn, r)
}

// Lift lifts a respawned worker's approval block (operator).
func (c *Client) Lift(ctx context.Context, r api.LiftRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectLift, r)
}

// Fleet lists the spawned and respawned workers (operator).
func (c *Client) Fleet(ctx context.Context) (api.Fleet, error) {
	var f api.Fleet
	data, err := c.call(ctx, api.SubjectFleet, api.FleetRequest{V: api.Version})
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("client: decoding fleet: %w", err)
	}
	if f.Error != "" {
		return f, fmt.Errorf("client: fleet: %s", f.Error)
	}
	return f, nil
}

// Revoke bumps a revocation counter.
func (c *Client) Revoke(ctx context.Context, r api.RevokeRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectRevoke, r)
}

// Reinstate lifts a worker's bar.
func (c *Client) Reinstate(ctx context.Context, r api.ReinstateRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, api.SubjectReinstate, r)
}

// SetPolicy applies a policy document.
func (c *Client) SetPolicy(ctx context.Context, doc json.RawMessage) (grants.Envelope, error) {
	return c.envelope(ctx, api.SubjectPolicy, api.PolicyRequest{V: api.Version, Policy: doc})
}

// PolicyShow asks for the policy document of an epoch (0: the one in
// force).
func (c *Client) PolicyShow(ctx context.Context, epoch uint64) (api.PolicyShow, error) {
	var ps api.PolicyShow
	data, err := c.call(ctx, api.SubjectPolicyShow, api.PolicyShowRequest{V: api.Version, Epoch: epoch})
	if err != nil {
		return ps, err
	}
	if err := json.Unmarshal(data, &ps); err != nil {
		return ps, fmt.Errorf("client: decoding policy: %w", err)
	}
	return ps, nil
}

// Status asks the leader for its status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	data, err := c.call(ctx, api.SubjectStatus, api.StatusRequest{V: api.Version})
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("client: decoding status: %w", err)
	}
	if st.State == "Leader" {
		c.Leader.Hint(st.NATSURL)
	}
	return st, nil
}

// envelope sends body, encoded by json.Marshal, and decodes the answer.
func (c *Client) envelope(ctx context.Context, subj string, body any) (grants.Envelope, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return grants.Envelope{}, encodeError(err)
	}
	return c.envelopeFor(ctx, subj, payload)
}

// envelopeFor sends an encoded body and decodes the answer.
func (c *Client) envelopeFor(ctx context.Context, subj string, payload []byte) (grants.Envelope, error) {
	var env grants.Envelope
	_, err := c.send(ctx, subj, payload, &env)
	return env, err
}

// encodeError wraps a request body's encoding error.
func encodeError(err error) error { return fmt.Errorf("client: encoding request: %w", err) }

// call sends body, encoded by json.Marshal, as send does.
func (c *Client) call(ctx context.Context, subj string, body any) ([]byte, error) {
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, encodeError(err)
	}
	return c.send(ctx, subj, payload, nil)
}

// send sends payload and retries on timeouts, "no responders" and
// issuer_unavailable answers until ctx ends. Grant, spend and effect
// bodies are encoded by their AppendJSON methods (the bytes json.Marshal
// writes, without reflection), every other body by json.Marshal. With env
// set, the answer is decoded into it once, for the retry decision and the
// caller alike.
func (c *Client) send(ctx context.Context, subj string, payload []byte, env *grants.Envelope) ([]byte, error) {
	attempt := c.Attempt
	if attempt <= 0 {
		attempt = 2 * time.Second
	}
	backoff := 20 * time.Millisecond
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		msg, err := c.Leader.Request(actx, c.NC, subj, payload, api.HeaderLeaderNATS)
		cancel()
		if err == nil {
			retry, derr := unavailable(msg.Data, env)
			if !retry {
				return msg.Data, derr
			}
			last = fmt.Errorf("issuer answered issuer_unavailable: %s", unavailableDetail(msg.Data))
		} else {
			last = err
			if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
				if ctx.Err() == nil && !errors.Is(err, nats.ErrConnectionClosed) {
					// Permission violations and the like are final.
					return nil, fmt.Errorf("client: %s: %w", subj, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s: %v (last error: %w)", ErrUnavailable, subj, ctx.Err(), last)
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// unavailable reports an issuer_unavailable answer, which is retried. It
// decodes the answer as an envelope once (DecodeEnvelope gives what
// json.Unmarshal gives, value and error alike) and, with env set, stores it
// there; an answer that is not an envelope is only probed for its reason,
// and with env set its decoding error is returned unless it is retried.
func unavailable(data []byte, env *grants.Envelope) (bool, error) {
	e, err := grants.DecodeEnvelope(data)
	switch {
	case err == nil:
		if env != nil {
			*env = e
		}
		return e.Reason == grants.ReasonIssuerUnavail, nil
	case probeUnavailable(data):
		return true, nil
	case env != nil:
		return false, fmt.Errorf("client: decoding answer: %w", err)
	}
	return false, nil
}

// unavailableDetail is what an issuer_unavailable answer says ("capacity:
// issuer is at its in-flight limit: ...").
func unavailableDetail(data []byte) string {
	var probe struct {
		Missing string `json:"missing"`
		Detail  string `json:"detail"`
	}
	_ = json.Unmarshal(data, &probe)
	switch {
	case probe.Missing != "" && probe.Detail != "":
		return probe.Missing + ": " + probe.Detail
	case probe.Detail != "":
		return probe.Detail
	}
	return probe.Missing
}

// probeUnavailable reads only the reason of an answer that is not a whole
// envelope.
func probeUnavailable(data []byte) bool {
	var probe struct {
		Reason grants.Reason `json:"reason"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Reason == grants.ReasonIssuerUnavail
}

// Reviews asks the leader for the open reviews, or for the one id names.
func (c *Client) Reviews(ctx context.Context, id string) (api.Reviews, error) {
	var r api.Reviews
	data, err := c.call(ctx, api.SubjectReviews, api.ReviewsRequest{V: api.Version, ID: id})
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("client: decoding reviews: %w", err)
	}
	return r, nil
}

// PolicyTest asks the leader to judge a request against the policy in
// force without recording anything.
func (c *Client) PolicyTest(ctx context.Context, req api.PolicyTestRequest) (api.PolicyTestAnswer, error) {
	var a api.PolicyTestAnswer
	req.V = api.Version
	data, err := c.call(ctx, api.SubjectPolicyTest, req)
	if err != nil {
		return a, err
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("client: decoding policy test: %w", err)
	}
	return a, nil
}

// Route sends a route lease operation (acquire, renew, release or status)
// in the client's worker's name.
func (c *Client) Route(ctx context.Context, r api.RouteRequest) (grants.Envelope, error) {
	r.V = api.Version
	return c.envelope(ctx, c.workerSubject(api.OpRoute), r)
}

// Routes asks the leader for every route's lease.
func (c *Client) Routes(ctx context.Context) (api.Routes, error) {
	var r api.Routes
	data, err := c.call(ctx, api.SubjectRoutes, api.RoutesRequest{V: api.Version})
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("client: decoding routes: %w", err)
	}
	return r, nil
}
