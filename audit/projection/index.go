package projection

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Closure states of a grant, from its permit to its effects.
const (
	// ClosurePermitted: minted, not attempted (yet).
	ClosurePermitted = "permitted"
	// ClosureCancelled: a revocation cancelled it before any attempt.
	ClosureCancelled = "cancelled"
	// ClosureUnverified: attempted, and no verifier has reported an
	// effect: what happened is not known to the control plane.
	ClosureUnverified = "unverified"
	// The collapsed outcome of its effects otherwise: confirmed, failed,
	// unknown or contested (grants.Outcome*).
)

// Grant is the projection of one grant: its permit, attempt, effects and
// everything refused against it. Sequences are 0 when absent.
type Grant struct {
	ID          string `json:"grant_id"`
	Worker      string `json:"worker"`
	Lane        string `json:"lane,omitempty"`
	Tool        string `json:"tool,omitempty"`
	Consequence string `json:"consequence,omitempty"`
	ReviewID    string `json:"review_id,omitempty"`
	// Route and RouteGen: the route generation the grant is bound to
	// (work under a route lease); "" and 0 otherwise.
	Route       string      `json:"route,omitempty"`
	RouteGen    uint64      `json:"route_gen,omitempty"`
	Digest      events.Hash `json:"digest"`
	Epoch       uint64      `json:"epoch"`
	PermitSeq   uint64      `json:"permit_seq"`
	IssuedAt    int64       `json:"issued_at"`
	ExpiresAt   int64       `json:"expires_at"`
	AttemptSeq  uint64      `json:"attempt_seq,omitempty"`
	AttemptTime int64       `json:"attempt_time,omitempty"`
	// Effects are every effect receipt of the grant, in order: a
	// correction is a later receipt, never an edit.
	Effects       []uint64 `json:"effects,omitempty"`
	SpendRefused  []uint64 `json:"spend_refused,omitempty"`
	EffectRefused []uint64 `json:"effect_refused,omitempty"`
	CancelledSeq  uint64   `json:"cancelled_seq,omitempty"`
	// Outcome is the effects collapsed (audit.CombineOutcome): repeats
	// collapse, unknown yields to a definite outcome, two different
	// definite outcomes or a contested report make it contested.
	Outcome string `json:"outcome,omitempty"`
	// Verifiers names each verifier that reported, in order of first
	// report.
	Verifiers []string `json:"verifiers,omitempty"`
	// Anomalies are effect receipts that did not count: not tied to this
	// grant's attempt, another worker, another request digest, or no
	// verifier. 'auditor verify' reports each as a violation.
	Anomalies []string `json:"anomalies,omitempty"`
	// Stale are effect receipts reported after the route generation the
	// grant bound had ended (route_stale): recorded, never clean. Each
	// makes the outcome contested.
	Stale []uint64 `json:"stale_effects,omitempty"`
}

// Closure is the grant's state: permitted, cancelled, unverified, or its
// collapsed outcome.
func (g *Grant) Closure() string {
	switch {
	case g.AttemptSeq == 0 && g.CancelledSeq != 0:
		return ClosureCancelled
	case g.AttemptSeq == 0:
		return ClosurePermitted
	case g.Outcome == "":
		return ClosureUnverified
	}
	return g.Outcome
}

// Contested reports whether the grant's effects disagree.
func (g *Grant) Contested() bool { return g.Outcome == grants.OutcomeContested }

// Row is one refusal or held call: deny, spend_refused, effect_refused,
// approval_required or refusal_summary.
type Row struct {
	Seq      uint64      `json:"seq"`
	Time     int64       `json:"time"`
	Kind     events.Kind `json:"kind"`
	Worker   string      `json:"worker,omitempty"`
	Lane     string      `json:"lane,omitempty"`
	Tool     string      `json:"tool,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	GrantID  string      `json:"grant_id,omitempty"`
	ReviewID string      `json:"review_id,omitempty"`
	// Count is how many requests a refusal summary stands for (1 for
	// every other row).
	Count uint64 `json:"count"`
}

// Review statuses, as the receipts of a review leave it.
const (
	ReviewOpen       = "open"
	ReviewApproved   = "approved"
	ReviewRejected   = "rejected"
	ReviewConsumed   = "consumed"
	ReviewExpired    = "expired"
	ReviewSuperseded = "superseded"
)

// Review is the projection of one review, the decision record: what it
// covers (a held call, or an artifact's path, version and digest), the
// transition it would authorize and where to, who may decide it, who
// decided it and how (by command, or by a plain-text reply kept
// verbatim), and the permit that consumed it. Below receipt format level
// 4 a review has only held calls, an approval and a permit.
type Review struct {
	ID           string      `json:"review_id"`
	Status       string      `json:"status"`
	Caption      string      `json:"caption,omitempty"`
	Worker       string      `json:"worker"`
	Lane         string      `json:"lane,omitempty"`
	Tool         string      `json:"tool,omitempty"`
	Digest       events.Hash `json:"digest"`
	Reason       string      `json:"reason,omitempty"`
	RequiredSeqs []uint64    `json:"required_seqs,omitempty"`
	// An artifact review: opened explicitly by a worker (OpenedSeq).
	OpenedSeq       uint64      `json:"opened_seq,omitempty"`
	ArtifactPath    string      `json:"artifact_path,omitempty"`
	ArtifactVersion uint64      `json:"artifact_version,omitempty"`
	ArtifactDigest  events.Hash `json:"artifact_digest,omitzero"`
	Transition      string      `json:"transition,omitempty"`
	Destination     string      `json:"destination,omitempty"`
	ReviewerRole    string      `json:"reviewer_role,omitempty"`
	// Supersedes are the earlier versions this one superseded.
	Supersedes []string `json:"supersedes,omitempty"`
	// The approval (an approval or review_approved receipt): its seq, who
	// gave it and until when it waits for its use.
	ApprovalSeq  uint64 `json:"approval_seq,omitempty"`
	Approver     string `json:"approver,omitempty"`
	ApprovedTill int64  `json:"approved_until,omitempty"`
	// The rejection (review_rejected) and who gave it.
	RejectedSeq uint64 `json:"rejected_seq,omitempty"`
	Rejecter    string `json:"rejecter,omitempty"`
	// DecidedAt is when the last decision was recorded (issuer clock).
	DecidedAt int64 `json:"decided_at,omitempty"`
	// Reply is the plain-text reply that decided it, verbatim; nil when
	// a command decided it.
	Reply *Reply `json:"reply,omitempty"`
	// The permit that used the approval, and its review_consumed receipt
	// (level 4; 0 below).
	PermitSeq     uint64 `json:"permit_seq,omitempty"`
	GrantID       string `json:"grant_id,omitempty"`
	ConsumedSeq   uint64 `json:"consumed_seq,omitempty"`
	ExpiredSeq    uint64 `json:"expired_seq,omitempty"`
	SupersededSeq uint64 `json:"superseded_seq,omitempty"`
	// Seqs is every receipt that names the review, in order.
	Seqs []uint64 `json:"seqs,omitempty"`
}

// Reply is a person's plain-text reply as the transport relayed it: the
// channel, the sender as the channel names them, when it was sent (unix
// ns, the transport's stamp) and the text, all verbatim, with the
// identity that relayed it and the receipt that recorded it.
type Reply struct {
	Seq     uint64 `json:"seq"`
	Actor   string `json:"actor,omitempty"`
	Channel string `json:"channel,omitempty"`
	Sender  string `json:"sender,omitempty"`
	At      int64  `json:"at,omitempty"`
	Text    string `json:"text"`
}

// Orphan is a review_orphaned receipt: a reply that bound to no live
// review, or repeated one already recorded (RefSeq). Evidence only: it
// decided nothing.
type Orphan struct {
	Seq        uint64   `json:"seq"`
	Time       int64    `json:"time"`
	Reply      Reply    `json:"reply"`
	Missing    string   `json:"missing,omitempty"`
	RefSeq     uint64   `json:"ref_seq,omitempty"`
	Candidates []string `json:"candidates,omitempty"`
}

// Open reports whether the review still waits for a person.
func (r *Review) Open() bool { return r.Status == ReviewOpen }

// Label is the review's caption, or its id when it has none (below
// level 4).
func (r *Review) Label() string {
	if r.Caption != "" {
		return r.Caption
	}
	return r.ID
}

// ByReply reports whether a plain-text reply decided the review.
func (r *Review) ByReply() bool { return r.Reply != nil }

func replyOf(e *events.Event) *Reply {
	if e.ReplyText == "" && e.ReplySender == "" && e.ReplyChannel == "" {
		return nil
	}
	return &Reply{Seq: e.Seq, Actor: e.Actor, Channel: e.ReplyChannel, Sender: e.ReplySender, At: e.ReplyAt, Text: e.ReplyText}
}

// Source is the projection of one content source.
type Source struct {
	ID         string   `json:"source_id"`
	Channel    string   `json:"channel,omitempty"`
	Authority  string   `json:"authority,omitempty"`
	Registered []uint64 `json:"registered,omitempty"`
	Refused    []uint64 `json:"refused,omitempty"`
}

// Worker is the fleet view of one worker.
type Worker struct {
	ID       string `json:"worker"`
	Lane     string `json:"lane,omitempty"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	LastTime int64  `json:"last_time"`
	Events   uint64 `json:"events"`
	Permits  uint64 `json:"permits"`
	Attempts uint64 `json:"attempts"`
	Effects  uint64 `json:"effects"`
	Refusals uint64 `json:"refusals"`
	Held     uint64 `json:"approval_required"`
}

// index folds one receipt into the index buckets of tx. Each kind that
// has more to index than the timelines has one case; a kind without one
// is kept raw and in the worker and lane timelines.
func index(tx *bbolt.Tx, e *events.Event, raw []byte) error {
	seqKey := u64(e.Seq)
	if err := tx.Bucket(bEvents).Put(seqKey, raw); err != nil {
		return err
	}
	lane := e.Lane
	var err error
	switch e.Kind {
	case events.KindPermit:
		err = indexPermit(tx, e)
	case events.KindAttempt, events.KindEffect, events.KindSpendRefused, events.KindEffectRefused:
		lane, err = indexGrantEvent(tx, e)
	case events.KindDeny, events.KindApprovalRequired, events.KindRefusalSummary:
		err = putRow(tx, e, lane)
		if err == nil && e.Kind == events.KindApprovalRequired && e.ReviewID != "" {
			_, err = indexReview(tx, e)
		}
		if err == nil && e.Kind == events.KindDeny && e.Channel != "" {
			if id, _, _, _ := e.SourceDescriptor(); id != "" {
				err = updateSource(tx, id, func(s *Source) { s.Refused = append(s.Refused, e.Seq) })
			}
		}
	case events.KindApproval, events.KindReviewOpened, events.KindReviewApproved, events.KindReviewRejected,
		events.KindReviewConsumed, events.KindReviewExpired, events.KindReviewSuperseded:
		lane, err = indexReview(tx, e)
	case events.KindReviewOrphaned:
		o := Orphan{Seq: e.Seq, Time: e.Time, Missing: e.Missing, RefSeq: e.RefSeq, Candidates: e.Candidates}
		if r := replyOf(e); r != nil {
			o.Reply = *r
		}
		err = putJSON(tx.Bucket(bOrphans), u64(e.Seq), &o)
	case events.KindSource:
		id, _, _, _ := e.SourceDescriptor()
		err = updateSource(tx, id, func(s *Source) {
			s.Channel, s.Authority = e.Channel, e.Authority
			s.Registered = append(s.Registered, e.Seq)
		})
	case events.KindRevoke:
		err = indexRevoke(tx, e)
		if err == nil && len(e.Routes) > 0 {
			err = indexRevokedRoutes(tx, e)
		}
	case events.KindRouteAcquired, events.KindRouteRenewed, events.KindRouteReleased, events.KindRouteLapsed, events.KindRouteTaken,
		events.KindRouteForgotten:
		err = indexRoute(tx, e)
	case events.KindEpoch:
		err = tx.Bucket(bEpochs).Put(seqKey, u64(e.Epoch))
	case events.KindBreakGlass:
		c := Case{ID: e.CaseID, Scope: e.GlassScope, Worker: e.Worker, Actor: e.Actor, Reason: e.Detail,
			IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt, Seq: e.Seq}
		err = putJSON(tx.Bucket(bGlass), key(e.CaseID, e.Seq), &c)
	}
	if err != nil {
		return err
	}
	kind := binary.BigEndian.AppendUint16(nil, uint16(e.Kind))
	if e.Worker != "" {
		if err := tx.Bucket(bWorkers).Put(key(e.Worker, e.Seq), kind); err != nil {
			return err
		}
		if err := updateWorker(tx, e, lane); err != nil {
			return err
		}
	}
	if lane != "" {
		if err := tx.Bucket(bLanes).Put(key(lane, e.Seq), kind); err != nil {
			return err
		}
	}
	return nil
}

func indexPermit(tx *bbolt.Tx, e *events.Event) error {
	g := Grant{
		ID: e.GrantID, Worker: e.Worker, Lane: e.Lane, Tool: e.Tool, Consequence: e.Consequence,
		ReviewID: e.ReviewID, Digest: e.Digest, Epoch: e.Epoch, PermitSeq: e.Seq,
		IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt, Route: e.Route, RouteGen: e.RouteGen,
	}
	if err := putGrant(tx, key(e.GrantID, e.Seq), &g); err != nil {
		return err
	}
	if e.Route != "" {
		if err := bindRoute(tx, e); err != nil {
			return err
		}
	}
	if e.ReviewID != "" {
		return updateReview(tx, e.ReviewID, func(r *Review) {
			r.PermitSeq, r.GrantID, r.Status = e.Seq, e.GrantID, ReviewConsumed
			r.Seqs = append(r.Seqs, e.Seq)
		})
	}
	return nil
}

// indexGrantEvent ties an attempt, effect or refusal against a grant to
// the grant's latest permit and returns the grant's lane.
func indexGrantEvent(tx *bbolt.Tx, e *events.Event) (string, error) {
	b := tx.Bucket(bGrants)
	k, g, err := latestGrant(b, e.GrantID)
	if err != nil {
		return "", err
	}
	lane := e.Lane
	if g != nil && lane == "" {
		lane = g.Lane
	}
	if e.Kind == events.KindSpendRefused || e.Kind == events.KindEffectRefused {
		if err := putRow(tx, e, lane); err != nil {
			return "", err
		}
	}
	if g == nil {
		return lane, nil // a refusal against a grant never permitted
	}
	switch e.Kind {
	case events.KindAttempt:
		if g.AttemptSeq == 0 {
			g.AttemptSeq, g.AttemptTime = e.Seq, e.Time
		}
	case events.KindSpendRefused:
		g.SpendRefused = append(g.SpendRefused, e.Seq)
	case events.KindEffectRefused:
		g.EffectRefused = append(g.EffectRefused, e.Seq)
	case events.KindEffect:
		closeEffect(g, e)
	}
	return lane, putGrant(tx, k, g)
}

// closeEffect applies the effect closure rules to one effect receipt.
func closeEffect(g *Grant, e *events.Event) {
	g.Effects = append(g.Effects, e.Seq)
	var why string
	switch {
	case g.AttemptSeq == 0 || e.RefSeq != g.AttemptSeq:
		why = fmt.Sprintf("names attempt seq %d, the grant's attempt is seq %d", e.RefSeq, g.AttemptSeq)
	case e.Worker != g.Worker:
		why = fmt.Sprintf("reported by %q, the grant is %q's", e.Worker, g.Worker)
	case !e.Digest.IsZero() && e.Digest != g.Digest:
		why = fmt.Sprintf("request digest %s differs from the permit's %s", e.Digest.Short(), g.Digest.Short())
	case e.Verifier == "":
		why = "names no verifier"
	}
	if why != "" {
		g.Anomalies = append(g.Anomalies, fmt.Sprintf("effect seq %d not counted: %s", e.Seq, why))
		return
	}
	if e.RouteStale {
		// Reported once the grant's route generation had ended: another
		// owner may have done the work since, so the report is late and
		// the outcome contested, never clean.
		g.Stale = append(g.Stale, e.Seq)
		g.Outcome = CombineOutcome(g.Outcome, grants.OutcomeContested)
	} else {
		g.Outcome = CombineOutcome(g.Outcome, e.Outcome)
	}
	for _, v := range g.Verifiers {
		if v == e.Verifier {
			return
		}
	}
	g.Verifiers = append(g.Verifiers, e.Verifier)
}

// CombineOutcome is how an effect report changes a grant's collapsed
// outcome ("" for none yet), as the issuer and audit.Verifier collapse it.
func CombineOutcome(prev, next string) string {
	switch {
	case next == grants.OutcomeContested, prev == grants.OutcomeContested:
		return grants.OutcomeContested
	case prev == "", prev == next, prev == grants.OutcomeUnknown:
		return next
	case next == grants.OutcomeUnknown:
		return prev
	}
	return grants.OutcomeContested
}

func indexRevoke(tx *bbolt.Tx, e *events.Event) error {
	rb, cb, gb := tx.Bucket(bRevokes), tx.Bucket(bCancels), tx.Bucket(bGrants)
	for _, c := range e.Counters {
		if err := rb.Put(key(c.Key, e.Seq), u64(c.Value)); err != nil {
			return err
		}
	}
	for _, id := range e.Cancelled {
		if err := cb.Put(key(id, e.Seq), nil); err != nil {
			return err
		}
		k, g, err := latestGrant(gb, id)
		if err != nil {
			return err
		}
		if g != nil && g.AttemptSeq == 0 && g.CancelledSeq == 0 {
			g.CancelledSeq = e.Seq
			if err := putGrant(tx, k, g); err != nil {
				return err
			}
		}
	}
	return nil
}

func putRow(tx *bbolt.Tx, e *events.Event, lane string) error {
	r := Row{Seq: e.Seq, Time: e.Time, Kind: e.Kind, Worker: e.Worker, Lane: lane, Tool: e.Tool,
		Reason: e.Reason, GrantID: e.GrantID, ReviewID: e.ReviewID, Count: 1}
	if e.Kind == events.KindRefusalSummary {
		r.Count = e.Amount
	}
	return putJSON(tx.Bucket(bRefusals), u64(e.Seq), &r)
}

// indexReview folds a receipt of a review into its decision record. A
// new review kind is one case here. It returns the lane the receipt is
// timed in: its own, or the review's.
func indexReview(tx *bbolt.Tx, e *events.Event) (string, error) {
	if e.ReviewID == "" {
		return e.Lane, nil
	}
	caption := ""
	if e.Caption != "" {
		// The receipt carries the slug and the version.
		caption = fsm.Caption(e.Caption, max(e.ArtifactVersion, 1))
		if err := tx.Bucket(bCaptions).Put([]byte(caption), []byte(e.ReviewID)); err != nil {
			return "", err
		}
	}
	lane := e.Lane
	err := updateReview(tx, e.ReviewID, func(r *Review) {
		r.Seqs = append(r.Seqs, e.Seq)
		if r.Worker == "" {
			r.Worker, r.Lane, r.Tool, r.Digest = e.Worker, e.Lane, e.Tool, e.Digest
		}
		if r.Status == "" {
			r.Status = ReviewOpen
		}
		if caption != "" {
			r.Caption = caption
		}
		if e.ArtifactPath != "" {
			r.ArtifactPath = e.ArtifactPath
		}
		if e.ArtifactVersion != 0 {
			r.ArtifactVersion = e.ArtifactVersion
		}
		if !e.ArtifactDigest.IsZero() {
			r.ArtifactDigest = e.ArtifactDigest
		}
		if e.Transition != "" {
			r.Transition = e.Transition
		}
		if e.Destination != "" {
			r.Destination = e.Destination
		}
		if e.ReviewerRole != "" {
			r.ReviewerRole = e.ReviewerRole
		}
		switch e.Kind {
		case events.KindApprovalRequired:
			r.Worker, r.Lane, r.Tool, r.Digest, r.Reason = e.Worker, e.Lane, e.Tool, e.Digest, e.Reason
			r.RequiredSeqs = append(r.RequiredSeqs, e.Seq)
		case events.KindReviewOpened:
			r.Worker, r.Lane, r.OpenedSeq, r.Status = e.Worker, e.Lane, e.Seq, ReviewOpen
			r.Supersedes = e.Candidates
		case events.KindApproval, events.KindReviewApproved:
			r.ApprovalSeq, r.Approver, r.ApprovedTill, r.DecidedAt = e.Seq, e.Actor, e.ExpiresAt, e.Time
			r.Reply, r.Status = replyOf(e), ReviewApproved
		case events.KindReviewRejected:
			r.RejectedSeq, r.Rejecter, r.DecidedAt = e.Seq, e.Actor, e.Time
			r.Reply, r.Status = replyOf(e), ReviewRejected
		case events.KindReviewConsumed:
			r.ConsumedSeq, r.Status = e.Seq, ReviewConsumed
			if e.RefSeq != 0 {
				r.PermitSeq = e.RefSeq
			}
			if e.GrantID != "" {
				r.GrantID = e.GrantID
			}
		case events.KindReviewExpired:
			r.ExpiredSeq, r.Status = e.Seq, ReviewExpired
		case events.KindReviewSuperseded:
			r.SupersededSeq, r.Status = e.Seq, ReviewSuperseded
		}
		if lane == "" {
			lane = r.Lane
		}
	})
	return lane, err
}

func updateReview(tx *bbolt.Tx, id string, f func(*Review)) error {
	if id == "" {
		return nil
	}
	b := tx.Bucket(bReviews)
	r := Review{ID: id}
	if v := b.Get([]byte(id)); v != nil {
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
	}
	f(&r)
	return putJSON(b, []byte(id), &r)
}

func updateSource(tx *bbolt.Tx, id string, f func(*Source)) error {
	if id == "" {
		return nil
	}
	b := tx.Bucket(bSources)
	s := Source{ID: id}
	if v := b.Get([]byte(id)); v != nil {
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
	}
	f(&s)
	return putJSON(b, []byte(id), &s)
}

func updateWorker(tx *bbolt.Tx, e *events.Event, lane string) error {
	b := tx.Bucket(bWorkerSum)
	w := Worker{ID: e.Worker, FirstSeq: e.Seq}
	if v := b.Get([]byte(e.Worker)); v != nil {
		if err := json.Unmarshal(v, &w); err != nil {
			return err
		}
	}
	if lane != "" {
		w.Lane = lane
	}
	w.LastSeq, w.LastTime = e.Seq, e.Time
	w.Events++
	switch e.Kind {
	case events.KindPermit:
		w.Permits++
	case events.KindAttempt:
		w.Attempts++
	case events.KindEffect:
		w.Effects++
	case events.KindDeny, events.KindSpendRefused, events.KindEffectRefused:
		w.Refusals++
	case events.KindRefusalSummary:
		w.Refusals += e.Amount
	case events.KindApprovalRequired:
		w.Held++
	}
	return putJSON(b, []byte(e.Worker), &w)
}

// latestGrant finds the record of the latest permit of grant id.
func latestGrant(b *bbolt.Bucket, id string) ([]byte, *Grant, error) {
	if id == "" {
		return nil, nil, nil
	}
	prefix := append([]byte(id), 0)
	var last, val []byte
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
		last, val = k, v
	}
	if last == nil {
		return nil, nil, nil
	}
	var g Grant
	if err := json.Unmarshal(val, &g); err != nil {
		return nil, nil, err
	}
	return bytes.Clone(last), &g, nil
}

// putGrant writes a grant record and keeps the grant sets in step with
// it: open (permitted or unverified), contested, and with anomalies.
func putGrant(tx *bbolt.Tx, k []byte, g *Grant) error {
	if err := putJSON(tx.Bucket(bGrants), k, g); err != nil {
		return err
	}
	c := g.Closure()
	for _, m := range []struct {
		b  []byte
		in bool
	}{
		{bOpen, c == ClosurePermitted || c == ClosureUnverified},
		{bContested, c == grants.OutcomeContested},
		{bAnomalous, len(g.Anomalies) > 0},
	} {
		var err error
		if m.in {
			err = tx.Bucket(m.b).Put(k, nil)
		} else {
			err = tx.Bucket(m.b).Delete(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func putJSON(b *bbolt.Bucket, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}

func unmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
