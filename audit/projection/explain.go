package projection

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Explanation is the chain of receipts that authorized or refused one
// side effect, as the projection knows it at Seq.
type Explanation struct {
	// Subject is what was asked about: "grant g1", "seq 42", "review rv-..".
	Subject string `json:"subject"`
	// Seq and Head: the projection's head when explained.
	Seq  uint64      `json:"projection_seq"`
	Head events.Hash `json:"projection_head"`
	// Decision is the receipt that decided the request: a permit, deny or
	// approval_required.
	Decision *Step `json:"decision,omitempty"`
	// Epoch is the policy epoch the decision was made under, and the
	// receipt that applied it.
	Epoch *Step `json:"epoch,omitempty"`
	// Grounds are the decision's provenance grounds, one per sink field.
	Grounds []Ground `json:"grounds,omitempty"`
	// Sources are the registrations of the sources the grounds name.
	Sources []Step `json:"sources,omitempty"`
	// Review is the review the request was held for or consumed.
	Review *Review `json:"review,omitempty"`
	// Approval is the approval the permit consumed (an approval or
	// review_approved receipt), and Consumed the review_consumed receipt
	// that records its use (receipt format level 4 and above).
	Approval *Step `json:"approval,omitempty"`
	Consumed *Step `json:"consumed,omitempty"`
	// ReviewSteps are the review's other receipts (opened, rejected,
	// expired, superseded, the held calls), when a review is explained.
	ReviewSteps []Step `json:"review_steps,omitempty"`
	// Grant is the grant's projection (a permit only).
	Grant *Grant `json:"grant,omitempty"`
	// Route is the route generation a grant was bound to, and how that
	// generation stood against the grant's attempt.
	Route *RouteBinding `json:"route,omitempty"`
	// Attempt, Effects and Refusals: the spend, every effect report and
	// every spend or effect refused against the grant.
	Attempt  *Step  `json:"attempt,omitempty"`
	Effects  []Step `json:"effects,omitempty"`
	Refusals []Step `json:"refusals,omitempty"`
	// Closure is permitted, cancelled, unverified, or the collapsed
	// outcome (confirmed, failed, unknown, contested).
	Closure string `json:"closure,omitempty"`
	// Later are the receipts after the decision that would refuse the
	// same grant now: revocations that moved a counter it bound, a
	// revoke that cancelled it, a policy epoch change; and its expiry.
	Later []Step `json:"later,omitempty"`
	// RefusedNow says whether the grant would be refused if presented now.
	RefusedNow bool `json:"refused_now"`
	// Event is the receipt asked about when it is not part of a grant's
	// chain (a revoke, an epoch, a source, ...).
	Event *Step `json:"event,omitempty"`
	// Sentence sums the chain up for an incident report.
	Sentence string `json:"sentence"`
}

// Step is one receipt of a chain, with the fields that matter for it.
type Step struct {
	Seq    uint64            `json:"seq"`
	Time   int64             `json:"time"`
	Kind   events.Kind       `json:"kind"`
	Hash   events.Hash       `json:"hash"`
	Fields map[string]string `json:"fields,omitempty"`
}

// Ground is one parsed grounds line of a decision.
type Ground struct {
	Field     string `json:"field,omitempty"`
	Source    string `json:"source,omitempty"`
	Authority string `json:"authority,omitempty"`
	Counter   string `json:"counter,omitempty"`
	Transform string `json:"transform,omitempty"`
	// Raw is the line as recorded.
	Raw string `json:"raw"`
}

// ParseGround reads a grounds line "field=F source=S authority=A
// counter=K=N transform=T" (any subset, any order; unknown parts are kept
// only in Raw).
func ParseGround(line string) Ground {
	g := Ground{Raw: line}
	for _, part := range strings.Fields(line) {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		switch k {
		case "field":
			g.Field = v
		case "source":
			g.Source = v
		case "authority":
			g.Authority = v
		case "counter":
			g.Counter = v
		case "transform":
			g.Transform = v
		}
	}
	return g
}

// ExplainArg explains what arg names: "seq:N" or a bare number (a
// receipt), "grant:ID", "review:ID" (an id, a caption or a keep token),
// or a bare id looked up as a grant, then as a review id, caption or keep
// token.
func (d *DB) ExplainArg(arg string) (*Explanation, error) {
	kind, id, ok := strings.Cut(arg, ":")
	if !ok {
		kind, id = "", arg
	}
	switch kind {
	case "seq":
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a sequence number", id)
		}
		return d.ExplainSeq(n)
	case "grant":
		return d.ExplainGrant(id)
	case "review":
		return d.ExplainReview(id)
	case "":
	default:
		// An id with a colon in it.
		id = arg
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil && n > 0 {
		return d.ExplainSeq(n)
	}
	x, err := d.ExplainGrant(id)
	if !errors.Is(err, ErrNotFound) {
		return x, err
	}
	x, rerr := d.ExplainReview(id)
	if errors.Is(rerr, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q is neither a grant nor a review (id, caption or keep token) in the projection (at seq %d); give a receipt sequence, or catch the projection up with 'auditor project'", ErrNotFound, id, d.statusSeq())
	}
	return x, rerr
}

func (d *DB) statusSeq() uint64 {
	st, _ := d.Status()
	return st.Seq
}

// ExplainGrant explains the latest grant with this id.
func (d *DB) ExplainGrant(id string) (*Explanation, error) {
	g, err := d.Grant(id)
	if err != nil {
		return nil, err
	}
	x := &Explanation{Subject: "grant " + id}
	err = d.db.View(func(tx *bbolt.Tx) error { return d.explainGrant(tx, x, &g) })
	return x, err
}

// ExplainReview explains a review, named by its id, caption or keep
// token: its decision record (the call held for it or the artifact it
// covers, who decided it and how, every receipt of it) and the grant
// that consumed it.
func (d *DB) ExplainReview(ref string) (*Explanation, error) {
	r, err := d.Review(ref)
	if errors.Is(err, ErrNotFound) {
		if rr, rerr := d.ReviewRef(ref); rerr == nil {
			r, err = rr, nil
		}
	}
	if err != nil {
		return nil, err
	}
	x := &Explanation{Subject: "review " + ref}
	if r.Caption != "" && ref != r.Caption {
		x.Subject += " (" + r.Caption + ")"
	}
	err = d.db.View(func(tx *bbolt.Tx) error { return d.explainReview(tx, x, &r) })
	return x, err
}

func (d *DB) explainReview(tx *bbolt.Tx, x *Explanation, r *Review) error {
	if r.GrantID != "" {
		if _, g, err := latestGrant(tx.Bucket(bGrants), r.GrantID); err == nil && g != nil && g.PermitSeq == r.PermitSeq {
			if err := d.explainGrant(tx, x, g); err != nil {
				return err
			}
			x.Review = r
			reviewSteps(tx, x, r)
			return nil
		}
	}
	switch n := len(r.RequiredSeqs); {
	case n > 0:
		if err := d.explainRefusal(tx, x, r.RequiredSeqs[n-1]); err != nil {
			return err
		}
	case r.OpenedSeq != 0:
		d.stamp(tx, x)
		if e, err := eventIn(tx, r.OpenedSeq); err == nil {
			x.Decision = step(&e)
			d.explainDecision(tx, x, &e)
		}
		x.RefusedNow = r.Status != ReviewApproved
	default:
		d.stamp(tx, x)
	}
	x.Review = r
	if r.ApprovalSeq != 0 {
		x.Approval = stepAt(tx, r.ApprovalSeq)
	}
	if r.ConsumedSeq != 0 {
		x.Consumed = stepAt(tx, r.ConsumedSeq)
	}
	reviewSteps(tx, x, r)
	x.Sentence = reviewSentence(r)
	return nil
}

// reviewSteps fills the receipts of the review the explanation does not
// show already.
func reviewSteps(tx *bbolt.Tx, x *Explanation, r *Review) {
	shown := map[uint64]bool{}
	for _, st := range []*Step{x.Decision, x.Approval, x.Consumed} {
		if st != nil {
			shown[st.Seq] = true
		}
	}
	for _, s := range r.Seqs {
		if !shown[s] {
			if st := stepAt(tx, s); st != nil {
				x.ReviewSteps = append(x.ReviewSteps, *st)
			}
		}
		shown[s] = true
	}
	for _, s := range r.RequiredSeqs {
		if !shown[s] {
			if st := stepAt(tx, s); st != nil {
				x.ReviewSteps = append(x.ReviewSteps, *st)
			}
		}
	}
	sort.SliceStable(x.ReviewSteps, func(i, j int) bool { return x.ReviewSteps[i].Seq < x.ReviewSteps[j].Seq })
}

// ExplainSeq explains the receipt at seq: the chain of its grant, the
// refusal it records, or the receipt itself.
func (d *DB) ExplainSeq(seq uint64) (*Explanation, error) {
	x := &Explanation{Subject: fmt.Sprintf("seq %d", seq)}
	err := d.db.View(func(tx *bbolt.Tx) error {
		e, err := eventIn(tx, seq)
		if err != nil {
			return err
		}
		switch e.Kind {
		case events.KindPermit, events.KindAttempt, events.KindEffect:
			if g, ok := grantAt(tx, e.GrantID, seq); ok {
				return d.explainGrant(tx, x, g)
			}
		case events.KindDeny, events.KindApprovalRequired, events.KindSpendRefused, events.KindEffectRefused:
			return d.explainRefusal(tx, x, seq)
		case events.KindApproval, events.KindReviewOpened, events.KindReviewApproved, events.KindReviewRejected,
			events.KindReviewConsumed, events.KindReviewExpired, events.KindReviewSuperseded:
			if v := tx.Bucket(bReviews).Get([]byte(e.ReviewID)); v != nil {
				var r Review
				if err := unmarshal(v, &r); err != nil {
					return err
				}
				x.Subject = fmt.Sprintf("seq %d (%s of review %s)", seq, e.Kind, r.Label())
				if err := d.explainReview(tx, x, &r); err != nil {
					return err
				}
				x.Event = step(&e)
				return nil
			}
		case events.KindReviewOrphaned:
			d.stamp(tx, x)
			x.Event = step(&e)
			x.Sentence = orphanSentence(&e)
			return nil
		}
		d.stamp(tx, x)
		x.Event = step(&e)
		x.Sentence = fmt.Sprintf("Receipt seq %d (%s) at %s%s authorizes no side effect by itself.",
			seq, e.Kind, ts(e.Time), who(&e))
		return nil
	})
	return x, err
}

// grantAt is the grant whose permit is the latest at or before seq.
func grantAt(tx *bbolt.Tx, id string, seq uint64) (*Grant, bool) {
	var found *Grant
	_ = scanPrefix(tx.Bucket(bGrants), id, func(s uint64, v []byte) (bool, error) {
		if s > seq {
			return false, nil
		}
		var g Grant
		if err := unmarshal(v, &g); err != nil {
			return false, err
		}
		found = &g
		return true, nil
	})
	return found, found != nil
}

func (d *DB) stamp(tx *bbolt.Tx, x *Explanation) {
	m := tx.Bucket(bMeta)
	x.Seq = getU64(m.Get(kSeq))
	copy(x.Head[:], m.Get(kHead))
}

func (d *DB) explainGrant(tx *bbolt.Tx, x *Explanation, g *Grant) error {
	d.stamp(tx, x)
	permit, err := eventIn(tx, g.PermitSeq)
	if err != nil {
		return err
	}
	x.Grant = g
	x.Decision = step(&permit)
	d.explainDecision(tx, x, &permit)
	if g.ReviewID != "" {
		if v := tx.Bucket(bReviews).Get([]byte(g.ReviewID)); v != nil {
			var r Review
			if err := unmarshal(v, &r); err == nil {
				x.Review = &r
				if r.ApprovalSeq != 0 && r.ApprovalSeq < g.PermitSeq {
					x.Approval = stepAt(tx, r.ApprovalSeq)
				}
				if r.ConsumedSeq > g.PermitSeq {
					x.Consumed = stepAt(tx, r.ConsumedSeq)
				}
			}
		}
	}
	if g.AttemptSeq != 0 {
		x.Attempt = stepAt(tx, g.AttemptSeq)
	}
	headTime := int64(getU64(tx.Bucket(bMeta).Get(kTime)))
	if g.Route != "" {
		x.Route = routeBinding(tx, g, headTime)
	}
	for _, s := range g.Effects {
		if st := stepAt(tx, s); st != nil {
			x.Effects = append(x.Effects, *st)
		}
	}
	for _, list := range [][]uint64{g.SpendRefused, g.EffectRefused} {
		for _, s := range list {
			if st := stepAt(tx, s); st != nil {
				x.Refusals = append(x.Refusals, *st)
			}
		}
	}
	x.Closure = g.Closure()

	// What would refuse the grant now.
	rb := tx.Bucket(bRevokes)
	for _, c := range permit.Counters {
		_ = scanPrefix(rb, c.Key, func(s uint64, v []byte) (bool, error) {
			if s > g.PermitSeq && getU64(v) != c.Value {
				x.Later = append(x.Later, Step{Seq: s, Kind: events.KindRevoke, Fields: map[string]string{
					"counter": c.Key, "bound": strconv.FormatUint(c.Value, 10), "now": strconv.FormatUint(getU64(v), 10)}})
				return false, nil // the first move is enough
			}
			return true, nil
		})
	}
	_ = scanPrefix(tx.Bucket(bCancels), g.ID, func(s uint64, _ []byte) (bool, error) {
		if s > g.PermitSeq {
			x.Later = append(x.Later, Step{Seq: s, Kind: events.KindRevoke, Fields: map[string]string{"cancelled": g.ID}})
			return false, nil
		}
		return true, nil
	})
	if rt := x.Route; rt != nil && rt.EndSeq > g.PermitSeq {
		// The end of the generation it bound: its spend is refused
		// owner_stale from then on.
		x.Later = append(x.Later, Step{Seq: rt.EndSeq, Kind: rt.EndKind, Fields: map[string]string{
			"route": rt.Route, "route_gen": strconv.FormatUint(rt.Gen, 10), "ended": rt.Ended}})
	}
	c := tx.Bucket(bEpochs).Cursor()
	if k, v := c.Seek(u64(g.PermitSeq + 1)); k != nil {
		x.Later = append(x.Later, Step{Seq: getU64(k), Kind: events.KindEpoch, Fields: map[string]string{
			"epoch": strconv.FormatUint(getU64(v), 10), "bound_epoch": strconv.FormatUint(g.Epoch, 10)}})
	}
	sort.SliceStable(x.Later, func(i, j int) bool { return x.Later[i].Seq < x.Later[j].Seq })
	for i := range x.Later {
		if st := stepAt(tx, x.Later[i].Seq); st != nil {
			x.Later[i].Time, x.Later[i].Hash = st.Time, st.Hash
		}
	}
	expired := headTime >= g.ExpiresAt
	if expired {
		x.Later = append(x.Later, Step{Kind: events.KindPermit, Time: g.ExpiresAt, Fields: map[string]string{"expired": ts(g.ExpiresAt)}})
	}
	x.RefusedNow = len(x.Later) > 0
	x.Sentence = grantSentence(x, g, expired)
	return nil
}

// explainDecision fills the epoch, grounds and sources of a decision.
func (d *DB) explainDecision(tx *bbolt.Tx, x *Explanation, e *events.Event) {
	c := tx.Bucket(bEpochs).Cursor()
	k, _ := c.Seek(u64(e.Seq))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k != nil {
		x.Epoch = stepAt(tx, getU64(k))
	}
	seen := map[string]bool{}
	for _, line := range e.Grounds {
		gr := ParseGround(line)
		x.Grounds = append(x.Grounds, gr)
		if gr.Source == "" || seen[gr.Source] {
			continue
		}
		seen[gr.Source] = true
		if v := tx.Bucket(bSources).Get([]byte(gr.Source)); v != nil {
			var s Source
			if unmarshal(v, &s) == nil {
				for _, r := range s.Registered {
					if r < e.Seq {
						if st := stepAt(tx, r); st != nil {
							x.Sources = append(x.Sources, *st)
						}
					}
				}
			}
		}
	}
}

func (d *DB) explainRefusal(tx *bbolt.Tx, x *Explanation, seq uint64) error {
	d.stamp(tx, x)
	e, err := eventIn(tx, seq)
	if err != nil {
		return err
	}
	x.Decision = step(&e)
	d.explainDecision(tx, x, &e)
	if e.ReviewID != "" {
		if v := tx.Bucket(bReviews).Get([]byte(e.ReviewID)); v != nil {
			var r Review
			if unmarshal(v, &r) == nil {
				x.Review = &r
			}
		}
	}
	x.RefusedNow = true
	what := "request"
	switch e.Kind {
	case events.KindSpendRefused:
		what = "spend of grant " + e.GrantID
	case events.KindEffectRefused:
		what = "effect report for grant " + e.GrantID
	}
	epoch := ""
	if x.Epoch != nil {
		epoch = " under policy epoch " + x.Epoch.Fields["epoch"]
	}
	if e.Kind == events.KindApprovalRequired {
		x.Sentence = fmt.Sprintf("A %s%s (tool %s) was held for review %s at seq %d (%s) with reason %s%s; %s",
			what, who(&e), dash(e.Tool), e.ReviewID, e.Seq, ts(e.Time), dash(e.Reason), epoch, reviewState(x.Review))
		return nil
	}
	x.Sentence = fmt.Sprintf("A %s%s (tool %s) was refused at seq %d (%s) with reason %s%s; no side effect was authorized.",
		what, who(&e), dash(e.Tool), e.Seq, ts(e.Time), dash(e.Reason), epoch)
	return nil
}

func reviewState(r *Review) string {
	if r == nil {
		return "the review is not in the projection."
	}
	approved := ""
	if r.ApprovalSeq != 0 {
		approved = fmt.Sprintf("it was approved by %s%s at seq %d", r.Approver, how(r), r.ApprovalSeq)
	}
	switch {
	case r.PermitSeq != 0 && r.ConsumedSeq != 0:
		return fmt.Sprintf("%s and the approval was consumed by grant %s at seq %d (review_consumed at seq %d).", approved, r.GrantID, r.PermitSeq, r.ConsumedSeq)
	case r.PermitSeq != 0:
		return fmt.Sprintf("%s and the approval was consumed by grant %s at seq %d.", approved, r.GrantID, r.PermitSeq)
	case r.Status == ReviewRejected:
		return fmt.Sprintf("it was rejected by %s%s at seq %d; it authorizes nothing.", r.Rejecter, how(r), r.RejectedSeq)
	case r.Status == ReviewExpired && approved != "":
		return fmt.Sprintf("%s, until %s, and the approval lapsed unused (review_expired at seq %d).", approved, ts(r.ApprovedTill), r.ExpiredSeq)
	case r.Status == ReviewSuperseded && approved != "":
		return fmt.Sprintf("%s, and a new version of the artifact superseded it at seq %d before any use; it authorizes nothing.", approved, r.SupersededSeq)
	case r.Status == ReviewSuperseded:
		return fmt.Sprintf("a new version of the artifact superseded it at seq %d before anyone decided it; it authorizes nothing.", r.SupersededSeq)
	case r.ApprovalSeq != 0:
		return fmt.Sprintf("%s, until %s, and no permit has consumed the approval.", approved, ts(r.ApprovedTill))
	}
	return "it still waits for a person to approve it."
}

// how says how a review was decided: by command, or by a plain-text
// reply, quoted.
func how(r *Review) string {
	if r.Reply == nil {
		return " by command"
	}
	return " by the reply " + quoteReply(r.Reply)
}

// quoteReply is a reply as recorded: the text quoted, its sender and
// channel.
func quoteReply(p *Reply) string {
	return fmt.Sprintf("%s from %s on %s", strconv.Quote(p.Text), dash(p.Sender), dash(p.Channel))
}

func reviewSentence(r *Review) string {
	if r.OpenedSeq != 0 {
		v := ""
		if r.ArtifactVersion != 0 {
			v = fmt.Sprintf(" version %d", r.ArtifactVersion)
		}
		return fmt.Sprintf("Review %s (%s) was opened by worker %s at seq %d for the artifact %s%s (sha256 %s), to authorize %s toward %s, for %s to decide; %s",
			r.Label(), r.ID, r.Worker, r.OpenedSeq, dash(r.ArtifactPath), v, r.ArtifactDigest.Short(), dash(r.Transition),
			dash(r.Destination), orAny(r.ReviewerRole), reviewState(r))
	}
	label := r.ID
	if r.Caption != "" {
		label = r.Caption + " (" + r.ID + ")"
	}
	return fmt.Sprintf("Review %s held a call by worker %s (tool %s); %s", label, r.Worker, dash(r.Tool), reviewState(r))
}

func orAny(role string) string {
	if role == "" {
		return "any operator or reviewer"
	}
	return "an operator or a reviewer of role " + role
}

func orphanSentence(e *events.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Receipt seq %d (%s) at %s records a reply", e.Seq, e.Kind, ts(e.Time))
	if r := replyOf(e); r != nil {
		fmt.Fprintf(&b, " %s relayed by %s", quoteReply(r), dash(e.Actor))
	}
	fmt.Fprintf(&b, " that bound to no review (missing %s)", dash(e.Missing))
	if e.RefSeq != 0 {
		fmt.Fprintf(&b, ", a repeat of the reply recorded at seq %d", e.RefSeq)
	}
	if len(e.Candidates) > 0 {
		fmt.Fprintf(&b, "; live then: %s", strings.Join(e.Candidates, ", "))
	}
	b.WriteString("; it is evidence and decided nothing.")
	return b.String()
}

func grantSentence(x *Explanation, g *Grant, expired bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Grant %s (worker %s, lane %s, tool %s) was permitted at seq %d", g.ID, g.Worker, dash(g.Lane), dash(g.Tool), g.PermitSeq)
	if x.Epoch != nil {
		fmt.Fprintf(&b, " under policy epoch %s", x.Epoch.Fields["epoch"])
	}
	if rules := x.Decision.Fields["rules"]; rules != "" {
		fmt.Fprintf(&b, " by rules %s", rules)
	}
	if x.Approval != nil {
		label, by := g.ReviewID, " by command"
		if x.Review != nil {
			label, by = x.Review.Label(), how(x.Review)
		}
		fmt.Fprintf(&b, " after review %s was approved by %s%s at seq %d", label, x.Approval.Fields["actor"], by, x.Approval.Seq)
		if x.Consumed != nil {
			fmt.Fprintf(&b, " (consumed, seq %d)", x.Consumed.Seq)
		}
	}
	if len(x.Grounds) > 0 {
		fmt.Fprintf(&b, " on %d provenance ground(s)", len(x.Grounds))
	}
	if x.Route != nil {
		fmt.Fprintf(&b, " under generation %d of route %s", x.Route.Gen, x.Route.Route)
		if x.Route.Lease != nil {
			fmt.Fprintf(&b, " (%s's lease)", x.Route.Lease.Owner)
		}
	}
	switch {
	case g.AttemptSeq == 0 && g.CancelledSeq != 0:
		fmt.Fprintf(&b, ", cancelled by the revoke at seq %d before any attempt", g.CancelledSeq)
	case g.AttemptSeq == 0:
		b.WriteString(", and has not been spent")
	default:
		fmt.Fprintf(&b, ", spent at seq %d", g.AttemptSeq)
		switch g.Closure() {
		case grants.OutcomeContested:
			if len(g.Stale) > 0 {
				fmt.Fprintf(&b, ", and its effect is contested: reported at seq %d after the route generation it bound had ended (route_stale), so it is late and never clean", g.Stale[0])
				break
			}
			fmt.Fprintf(&b, ", and its effect is contested (verifiers %s disagree, last report seq %d)", strings.Join(g.Verifiers, ", "), g.Effects[len(g.Effects)-1])
		case ClosureUnverified:
			b.WriteString(", and no verifier has reported its effect (unverified)")
		default:
			fmt.Fprintf(&b, ", and its effect was %s by %s (seq %d)", g.Outcome, strings.Join(g.Verifiers, ", "), g.Effects[len(g.Effects)-1])
		}
	}
	if x.Route != nil {
		b.WriteString("; " + x.Route.sentence())
	}
	switch {
	case len(x.Later) > 0 && x.Later[0].Seq != 0 && g.AttemptSeq != 0 && x.Later[0].Seq > g.AttemptSeq:
		fmt.Fprintf(&b, "; the %s at seq %d, after the attempt, would refuse it now.", x.Later[0].Kind, x.Later[0].Seq)
	case len(x.Later) > 0 && x.Later[0].Seq != 0:
		fmt.Fprintf(&b, "; the %s at seq %d would refuse it now.", x.Later[0].Kind, x.Later[0].Seq)
	case expired:
		fmt.Fprintf(&b, "; it expired at %s.", ts(g.ExpiresAt))
	default:
		b.WriteString("; nothing recorded since would refuse it now.")
	}
	return b.String()
}

// step describes one receipt with its kind's telling fields.
func step(e *events.Event) *Step {
	f := map[string]string{}
	put := func(k, v string) {
		if v != "" {
			f[k] = v
		}
	}
	put("grant", e.GrantID)
	put("worker", e.Worker)
	put("lane", e.Lane)
	put("session", e.Session)
	put("tool", e.Tool)
	if !e.Digest.IsZero() {
		put("request_digest", e.Digest.String())
	}
	if e.Epoch != 0 {
		put("epoch", strconv.FormatUint(e.Epoch, 10))
	}
	put("decision", e.Decision)
	put("reason", e.Reason)
	put("missing", e.Missing)
	put("recovery", e.Recovery)
	put("rules", strings.Join(e.Rules, ","))
	put("consequence", e.Consequence)
	put("surface", e.Surface)
	put("operation", e.Operation)
	put("target_label", e.TargetLabel)
	if e.Target != "" {
		// A target may name a recipient or a path: shown as a digest.
		put("target_digest", events.Sum([]byte(e.Target)).Short())
	}
	put("instrument", e.Instrument)
	put("instrument_left", e.InstrumentLeft)
	put("review", e.ReviewID)
	put("actor", e.Actor)
	put("outcome", e.Outcome)
	put("verifier", e.Verifier)
	put("idempotency_key_digest", shortSum(e.IdemKey))
	if e.RefSeq != 0 {
		put("ref_seq", strconv.FormatUint(e.RefSeq, 10))
	}
	if e.IssuedAt != 0 {
		put("issued_at", ts(e.IssuedAt))
	}
	if e.ExpiresAt != 0 {
		put("expires_at", ts(e.ExpiresAt))
	}
	if len(e.Counters) > 0 {
		parts := make([]string, len(e.Counters))
		for i, c := range e.Counters {
			parts[i] = fmt.Sprintf("%s=%d", c.Key, c.Value)
		}
		put("counters", strings.Join(parts, ","))
	}
	put("cancelled", strings.Join(e.Cancelled, ","))
	if id, _, _, _ := e.SourceDescriptor(); id != "" {
		put("source", id)
	}
	put("channel", e.Channel)
	put("authority", e.Authority)
	if !e.PolicyDigest.IsZero() {
		put("policy_digest", e.PolicyDigest.String())
	}
	put("node", e.Node)
	// A review's record: what it covers, and a person's reply verbatim
	// (the decision itself, so shown like the actor, not as a payload).
	if e.Caption != "" {
		put("caption", fsm.Caption(e.Caption, max(e.ArtifactVersion, 1)))
	}
	put("artifact_path", e.ArtifactPath)
	if e.ArtifactVersion != 0 {
		put("artifact_version", strconv.FormatUint(e.ArtifactVersion, 10))
	}
	if !e.ArtifactDigest.IsZero() {
		put("artifact_digest", e.ArtifactDigest.String())
	}
	put("transition", e.Transition)
	put("destination", e.Destination)
	put("reviewer_role", e.ReviewerRole)
	put("reply_channel", e.ReplyChannel)
	put("reply_sender", e.ReplySender)
	if e.ReplyAt != 0 {
		put("reply_at", strconv.FormatInt(e.ReplyAt, 10))
	}
	if e.ReplyText != "" {
		put("reply_text", strconv.Quote(e.ReplyText))
	}
	put("candidates", strings.Join(e.Candidates, ","))
	return &Step{Seq: e.Seq, Time: e.Time, Kind: e.Kind, Hash: e.Hash, Fields: f}
}

func shortSum(s string) string {
	if s == "" {
		return ""
	}
	return events.Sum([]byte(s)).Short()
}

func stepAt(tx *bbolt.Tx, seq uint64) *Step {
	e, err := eventIn(tx, seq)
	if err != nil {
		return nil
	}
	return step(&e)
}

func who(e *events.Event) string {
	switch {
	case e.Worker != "" && e.Lane != "":
		return fmt.Sprintf(" by worker %s in lane %s", e.Worker, e.Lane)
	case e.Worker != "":
		return " by worker " + e.Worker
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ts formats a control-plane time.
func ts(t int64) string { return time.Unix(0, t).UTC().Format(time.RFC3339Nano) }
