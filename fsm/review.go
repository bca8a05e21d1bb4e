package fsm

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Operator approvals. An approval_required answer opens a review (its id
// is ReviewID of the request's grant id); the review stays open as long as
// ReviewRetention (an hour) after the answer, longer than the request's
// idempotency record, so that a person can be reached.
// OpApprove closes an open review with an approval event, which records an
// approval instrument for the exact call the review held: the worker, the
// tool and the request digest. The worker's next request for that call
// that the policy judges approval_required is permitted instead, once,
// until the approval expires on the control-plane clock. A denial is never
// turned into a permit, and a quota still refuses.

// Approval lifetimes (nanoseconds of control-plane time) and the note
// bound, from the request wire format's declarations in api.
const (
	DefaultApprovalTTL = api.DefaultApprovalTTLMillis * int64(time.Millisecond)
	MaxApprovalTTL     = api.MaxApprovalTTLMillis * int64(time.Millisecond)
	MaxApprovalNote    = api.MaxApprovalNote
)

// RuleApproved prefixes the rule a permit names when an approval covered
// it: "approved:<review id>".
const RuleApproved = "approved:"

// review is one open review: the call an approval_required answer held.
type review struct {
	ID      string
	Worker  string
	Lane    string
	Session string
	Tool    string
	Digest  events.Hash
	Reason  string
	Seq     uint64 // the approval_required event that opened it
	Until   int64  // closed unapproved when the clock reaches this

	// Decision records (receipt format level 4, see record.go): the
	// caption's slug and version, the artifact an explicit review covers
	// (path and digest), the transition, destination and reviewer role,
	// the epoch it was opened under, and where it is in its lifecycle.
	Slug          string
	Version       uint64
	Path          string
	Artifact      events.Hash
	Transition    string
	Destination   string
	Role          string
	Epoch         uint64
	Status        reviewStatus
	Decider       string // who approved or rejected it
	DeciderKey    string // the approving reviewer's revocation counter ("" for an operator)
	DeciderCount  uint64 // its value when it approved
	ApprovedUntil int64  // the approval lapses unused at this time
	ApprovedEpoch uint64 // the epoch it was approved under
	DecidedSeq    uint64 // the decision's receipt
}

// approvalKey is the exact call an approval covers.
type approvalKey struct {
	Worker string
	Tool   string
	Digest events.Hash
}

// approval is a live approval instrument: one permit of the exact call
// before ExpiresAt. At most one per call: approving another review of the
// same call replaces it.
type approval struct {
	Key       approvalKey
	ReviewID  string
	Lane      string
	ExpiresAt int64
	Seq       uint64 // the approval event
}

func compareApprovalKeys(a, b approvalKey) int {
	if c := strings.Compare(a.Worker, b.Worker); c != 0 {
		return c
	}
	if c := strings.Compare(a.Tool, b.Tool); c != 0 {
		return c
	}
	return bytes.Compare(a.Digest[:], b.Digest[:])
}

// ReviewID is the stable id of the review an approval_required answer asks
// for, derived from the grant id the leader chose for the request: the
// same committed request always names the same review, on every replica.
func ReviewID(grantID string) string {
	sum := events.Sum([]byte("writ.review.v1\x00" + grantID))
	return api.ReviewIDPrefix + hex.EncodeToString(sum[:api.ReviewIDHexDigits/2])
}

// liveReview returns the open review id names at control-plane time now.
func (s *State) liveReview(id string, now int64) (*review, bool) {
	r, ok := s.reviews[id]
	if !ok || now >= r.Until {
		return nil, false
	}
	return r, true
}

// liveApproval returns the approval covering the exact call at now.
func (s *State) liveApproval(k approvalKey, now int64) (*approval, bool) {
	a, ok := s.approvals[k]
	if !ok || now >= a.ExpiresAt {
		return nil, false
	}
	return a, true
}

// ReviewInfo describes an open review.
type ReviewInfo struct {
	ID, Worker, Lane, Session, Tool, Reason string
	Digest                                  events.Hash
	Seq                                     uint64
	Until                                   int64
	// Caption and Keep are set for decision records (receipt format
	// level 4): <slug>_v<N>_review and <slug>_v<N>_keep. Status is open,
	// approved, rejected, consumed, superseded or expired.
	Caption, Keep, Status string
}

// Review returns the open review id names, if the state holds it.
func (s *State) Review(id string) (ReviewInfo, bool) {
	r, ok := s.reviews[id]
	if !ok {
		return ReviewInfo{}, false
	}
	return r.info(), true
}

// Reviews returns the reviews open at the state's clock, oldest first (by
// the seq of the receipt that opened each).
func (s *State) Reviews() []ReviewInfo {
	out := make([]ReviewInfo, 0, len(s.reviews))
	for id, r := range s.reviews {
		if s.clock >= r.Until || r.Status != rsOpen {
			continue
		}
		info, _ := s.Review(id)
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ReviewInfo) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// ApprovalInfo describes a live approval: the review it closed and when it
// lapses unused.
type ApprovalInfo struct {
	ReviewID, Worker, Lane, Tool string
	Digest                       events.Hash
	ExpiresAt                    int64
	Seq                          uint64 // the approval receipt
}

// Approvals returns the approvals live at the state's clock, oldest first.
func (s *State) Approvals() []ApprovalInfo {
	out := make([]ApprovalInfo, 0, len(s.approvals))
	for _, a := range s.approvals {
		if s.clock >= a.ExpiresAt {
			continue
		}
		out = append(out, ApprovalInfo{ReviewID: a.ReviewID, Worker: a.Key.Worker, Lane: a.Lane, Tool: a.Key.Tool,
			Digest: a.Key.Digest, ExpiresAt: a.ExpiresAt, Seq: a.Seq})
	}
	slices.SortFunc(out, func(a, b ApprovalInfo) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// decideApprove judges an operator's approval of a review.
func decideApprove(s *State, now int64, node string, c *Command) verdict {
	switch {
	case c.ReviewID == "":
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "review_id", "review id is required"))
	case c.TTL < 0:
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "ttl", "ttl must not be negative"))
	case len(c.Note) > MaxApprovalNote:
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "note", "note is longer than the limit"))
	}
	e := base(events.KindDeny, now, node, c)
	e.ReviewID = c.ReviewID
	rv, ok := s.liveReview(c.ReviewID, now)
	if ok && rv.record() {
		// A decision record (receipt format level 4): decided as
		// OpDecideReview decides it.
		d := *c
		d.Outcome = "approve"
		return decideReview(s, now, node, &d)
	}
	if !ok {
		return record(deny(e, grants.ReasonUnknownReview, "open review",
			"no open review "+c.ReviewID+" (never opened, already approved, or older than the hour a review stays open)"))
	}
	ttl := c.TTL
	if ttl == 0 {
		ttl = DefaultApprovalTTL
	}
	ttl = min(ttl, MaxApprovalTTL)
	e.Kind = events.KindApproval
	e.Decision = string(grants.Permit)
	e.Worker, e.Lane, e.Session, e.Tool, e.Digest = rv.Worker, rv.Lane, rv.Session, rv.Tool, rv.Digest
	e.RefSeq = rv.Seq
	e.ExpiresAt = AddSat(now, ttl)
	e.Detail = c.Note
	return record(e)
}

// evolveApproval closes the review and records the approval instrument.
func (s *State) evolveApproval(e events.Event) {
	delete(s.reviews, e.ReviewID)
	s.addApproval(&approval{
		Key:      approvalKey{Worker: s.intern.str(e.Worker), Tool: s.intern.str(e.Tool), Digest: e.Digest},
		ReviewID: e.ReviewID, Lane: s.intern.str(e.Lane), ExpiresAt: e.ExpiresAt, Seq: e.Seq,
	})
}

// dropReviewsOf forgets a revoked worker's open reviews and approvals: a
// revocation ends what the worker held, and reinstating it later starts
// clean (the operator approves again if the call is still wanted). Only
// deletions, so the map order does not matter.
func (s *State) dropReviewsOf(worker string) {
	for id, r := range s.reviews {
		if r.Worker == worker {
			delete(s.reviews, id)
		}
	}
	for k := range s.approvals {
		if k.Worker == worker {
			delete(s.approvals, k)
		}
	}
}

// consumeApproval uses up the approval a permit names.
func (s *State) consumeApproval(e events.Event) {
	k := approvalKey{Worker: e.Worker, Tool: e.Tool, Digest: e.Digest}
	if a, ok := s.approvals[k]; ok && a.ReviewID == e.ReviewID {
		delete(s.approvals, k)
	}
}

// approvedPermit turns an approval_required judgement into a permit when a
// live approval covers the exact call (the caller, tool and digest). It
// returns ok false when none does. The lane's lifetime applies as for any
// permit, capped by the approval's expiry, and the policy's quotas are
// still checked (a quota refusal is a deny, which no approval overrides).
func (s *State) approvedPermit(now int64, e events.Event, c *Command, j *policy.Judgement, bound []events.Counter) (events.Event, bool) {
	a, ok := s.liveApproval(approvalKey{Worker: c.Caller, Tool: c.Tool, Digest: c.Digest}, now)
	if !ok {
		return e, false
	}
	return s.coveredPermit(now, e, c, j, bound, a.ReviewID, a.ExpiresAt), true
}

// coveredPermit is the permit an approval (of review id, lapsing at
// until) makes of an approval_required judgement, or the quota refusal
// that still applies.
func (s *State) coveredPermit(now int64, e events.Event, c *Command, j *policy.Judgement, bound []events.Counter, id string, until int64) events.Event {
	p := s.policy
	rules := append([]string(nil), j.Rules...)
	for _, q := range p.QuotaCharges(c.Caller, c.Lane, now) {
		qid, _, _ := strings.Cut(q.Key, "/")
		var limit *policy.Quota
		for i := range p.Quotas {
			if p.Quotas[i].ID == qid {
				limit = &p.Quotas[i]
			}
		}
		if limit == nil {
			continue
		}
		reqs, amt, byt := s.QuotaUsed(q.Key, q.Start, now)
		field := ""
		switch {
		case limit.Requests != nil && reqs >= *limit.Requests:
			field = "requests"
		case limit.Amount != nil && (amt+j.Amount < amt || amt+j.Amount > *limit.Amount):
			field = "amount"
		case limit.Bytes != nil && (byt+j.Bytes < byt || byt+j.Bytes > *limit.Bytes):
			field = "bytes"
		}
		if field != "" {
			e.Rules = append(rules, "quota:"+qid)
			e.Reason, e.Missing, e.Detail = "", "", ""
			return deny(e, grants.ReasonQuotaExhausted, "quotas."+qid+"."+field,
				"window resets at "+policy.Timestamp(AddSat(q.Start, q.Window)).String())
		}
		if s.judgeFeatures()&policy.FeatureCountedQuotas == 0 || limit.Counts(j.Amount, j.Bytes) {
			rules = append(rules, "quota:"+qid)
		}
	}
	ttl := int64(p.DefaultTTL)
	if l, ok := p.Lanes[c.Lane]; ok && l.TTL > 0 {
		ttl = int64(l.TTL)
	}
	if c.TTL > 0 && c.TTL < ttl {
		ttl = c.TTL
	}
	ttl = max(ttl, int64(policy.MinTTL))
	e.Kind = events.KindPermit
	e.Decision = string(grants.Permit)
	e.GrantID = c.GrantID
	e.IssuedAt = now
	e.ExpiresAt = min(AddSat(now, ttl), until)
	e.Rules = append(rules, RuleApproved+id)
	e.ReviewID = id
	e.Counters = bound
	s.recordUsage(&e)
	return e
}
