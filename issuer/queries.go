package issuer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Read-only operator queries. They read the state this leader has applied
// (node.View) and answer; nothing is proposed, so nothing reaches the log
// or the receipt stream.

func (s *Service) handleReviews(m *nats.Msg) { s.spawn(m, reviewsHandler) }

func (s *Service) handlePolicyTest(m *nats.Msg) { s.spawn(m, policyTestHandler) }

// reviews answers one writ.op.reviews request.
func (s *Service) reviews(m *nats.Msg) {
	var r api.ReviewsRequest
	if err := decodeStrict(m.Data, &r); err != nil {
		s.respondJSON(m, api.Reviews{Error: err.Error()})
		return
	}
	if r.ID != "" && !fsm.IsReviewRef(r.ID) {
		if err := checkReviewID(r.ID); err != nil {
			s.respondJSON(m, api.Reviews{Error: err.Error() + " (or a caption or keep token)"})
			return
		}
	}
	var out api.Reviews
	s.node.View(func(st *fsm.State, _ uint64) { out = ListReviews(st) })
	if r.ID == "" {
		s.respondJSON(m, out)
		return
	}
	i := slices.IndexFunc(out.Reviews, func(rv api.Review) bool { return rv.ID == r.ID || rv.Caption == r.ID || rv.Keep == r.ID })
	if i < 0 {
		s.respondJSON(m, api.Reviews{Clock: out.Clock, Error: "no open or approved review " + r.ID +
			" (never opened, its approval used or expired, or older than the hour a review stays open)"})
		return
	}
	rv := out.Reviews[i]
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	if e, err := s.receipt(ctx, rv.Seq); err == nil && e.ReviewID == rv.ID && e.Kind == events.KindApprovalRequired {
		rv.Rules, rv.Missing, rv.Detail = e.Rules, e.Missing, e.Detail
		rv.Surface, rv.Target, rv.Grounds = e.Surface, e.Target, e.Grounds
	}
	s.respondJSON(m, api.Reviews{Clock: out.Clock, Reviews: []api.Review{rv}})
}

// receipt reads the receipt at seq from the stream (stream sequence is
// receipt sequence).
func (s *Service) receipt(ctx context.Context, seq uint64) (events.Event, error) {
	st, err := s.js.Stream(ctx, events.StreamName)
	if err != nil {
		return events.Event{}, err
	}
	msg, err := st.GetMsg(ctx, seq)
	if err != nil {
		return events.Event{}, err
	}
	e, err := events.Decode(msg.Data)
	if err != nil {
		return events.Event{}, err
	}
	if e.Seq != seq {
		return events.Event{}, fmt.Errorf("stream message %d holds receipt %d", seq, e.Seq)
	}
	return e, nil
}

// ListReviews lists the state's open reviews, then its approved ones
// whose approval is still waiting, each oldest first.
func ListReviews(st *fsm.State) api.Reviews {
	out := api.Reviews{Clock: st.Clock(), Reviews: []api.Review{}}
	for _, r := range st.Reviews() {
		if r.Caption != "" {
			continue // a decision record: listed below
		}
		out.Reviews = append(out.Reviews, api.Review{
			ID: r.ID, State: "open", Worker: r.Worker, Lane: r.Lane, Session: r.Session, Tool: r.Tool,
			Digest: r.Digest.String(), Reason: r.Reason, Seq: r.Seq,
			OpenedAt: r.Until - fsm.ReviewRetention, Until: r.Until,
		})
	}
	for _, a := range st.Approvals() {
		out.Reviews = append(out.Reviews, api.Review{
			ID: a.ReviewID, State: "approved", Worker: a.Worker, Lane: a.Lane, Tool: a.Tool,
			Digest: a.Digest.String(), Seq: a.Seq, ApprovalExpires: a.ExpiresAt,
		})
	}
	for _, r := range st.Records() {
		rv := api.Review{
			ID: r.ID, State: r.Status, Worker: r.Worker, Lane: r.Lane, Session: r.Session, Tool: r.Tool,
			Reason: r.Reason, Seq: r.Seq, OpenedAt: r.Until - fsm.ReviewRetention, Until: r.Until,
			ApprovalExpires: r.ApprovedUntil, Caption: r.Caption, Keep: r.Keep, ArtifactPath: r.ArtifactPath,
			Transition: r.Transition, Destination: r.Destination, ReviewerRole: r.Role, DecidedBy: r.Decider,
		}
		if !r.Digest.IsZero() {
			rv.Digest = r.Digest.String()
		}
		if !r.Artifact.IsZero() {
			rv.ArtifactSHA256 = r.Artifact.String()
		}
		out.Reviews = append(out.Reviews, rv)
	}
	return out
}

// policyTest answers one writ.op.policy.test request: the decision the
// policy in force would give the request now.
func (s *Service) policyTest(m *nats.Msg) {
	var r api.PolicyTestRequest
	if err := decodeStrict(m.Data, &r); err != nil {
		s.respondJSON(m, api.PolicyTestAnswer{Error: err.Error()})
		return
	}
	var a api.PolicyTestAnswer
	s.node.View(func(st *fsm.State, _ uint64) {
		now := max(time.Now().UnixNano(), st.Clock())
		a = JudgeRequest(st, now, s.node.ID(), r.Worker, &r.Request)
	})
	s.respondJSON(m, a)
}

// JudgeRequest decides the grant request r from worker against st at
// control-plane time now with the state machine's own code (fsm.Decide,
// which does not modify st), and reports the decision it would record.
// The request is checked and built exactly as a worker's is, except that
// no idempotency record is consulted. Nothing is recorded.
func JudgeRequest(st *fsm.State, now int64, node, worker string, r *api.GrantRequest) api.PolicyTestAnswer {
	var a api.PolicyTestAnswer
	a.Epoch = st.Epoch()
	if _, d := st.Policy(); !d.IsZero() {
		a.PolicyDigest = d.String()
	}
	if err := api.ValidID(worker); err != nil {
		a.Error = "worker: " + err.Error()
		return a
	}
	req := *r
	req.V = api.Version
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = "policy-test"
	}
	cmd, rerr := grantRequestCommand(worker, &req)
	if rerr != nil {
		a.Error = rerr.detail
		return a
	}
	cmd.IdemKey = "" // a dry run neither replays nor conflicts with a worker's answer
	out := fsm.Decide(st, now, node, cmd)
	if out.Reply != nil {
		env := out.Reply
		a.Decision, a.Reason, a.Missing, a.Detail = string(env.Decision), string(env.Reason), env.Missing, env.Detail
		a.Rules, a.Grounds = env.Rules, env.Grounds
		return a
	}
	e := out.Events[0]
	a.Decision, a.Reason, a.Missing, a.Detail = e.Decision, e.Reason, e.Missing, e.Detail
	a.Rules, a.Grounds = e.Rules, e.Grounds
	a.Surface, a.Operation, a.Consequence, a.Target = e.Surface, e.Operation, e.Consequence, e.Target
	if e.Decision == string(grants.Permit) {
		a.ExpiresInMS = (e.ExpiresAt - now) / int64(time.Millisecond)
	}
	return a
}

// JudgeWithPolicy is JudgeRequest against a fresh state holding only p:
// no grants, usage, sources, reviews or approvals.
func JudgeWithPolicy(p *policy.Policy, now int64, worker string, r *api.GrantRequest) api.PolicyTestAnswer {
	st := fsm.New()
	// Judged as a cluster of this build judges: at its highest receipt
	// format level, which turns on every judging feature it has.
	env := fsm.Apply(st, 1, fsm.Batch{Time: now, Node: "policy-test", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator", Policy: p.Canonical()},
		{Op: fsm.OpRaiseFormat, Caller: "issuer:policy-test", Format: fsm.MaxReceiptFormat},
	}})
	if env[0].Decision != grants.Permit {
		return api.PolicyTestAnswer{Error: "policy: " + env[0].Detail}
	}
	a := JudgeRequest(st, now, "policy-test", worker, r)
	a.Epoch = 0 // not an epoch of any issuer
	return a
}

func (s *Service) respondJSON(m *nats.Msg, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encoding answer", "subject", m.Subject, "err", err)
		return
	}
	_ = m.Respond(data)
}
