package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

// Reviews as decision records (receipt format level 4,
// ReceiptFormatReviews). A review is opened by an approval_required
// answer (for the exact call it held) or explicitly for an artifact
// (OpOpenReview, by a worker of the coordinator lane: the artifact's path
// and SHA-256, the transition it would authorize, where to, and the
// reviewer role that may decide it). Each carries a caption unique among
// live reviews, <slug>_v<N>_review, and a keep token <slug>_v<N>_keep; a
// new version of an artifact (same slug, another digest) opens v<N+1> and
// supersedes the reviews of the earlier versions still undecided or
// unused (review_superseded).
//
// Decisions (OpDecideReview, OpReviewReply, and OpApprove on a review
// opened at this level) come from operators ("operator:<name>") and
// reviewers ("reviewer:<name>", holding the review's role in Roles, as
// the transport established); a worker, whatever its lane, never decides,
// and a reviewer never decides a review its own identity opened. A
// decision is a receipt (review_approved, review_rejected) that keeps,
// for a reply, the text, channel, sender and time verbatim.
//
// The record stays in the state, with its status, until its retention
// ends (ReviewRetention after it was opened): an approval is bound to its
// use when the permit is minted, and binds only if there is one such
// review, the artifact digest is the approved one, the approving
// reviewer still holds the role (its revocation counter did not move),
// the policy epoch is the one it was approved under, it was not used, and
// it has not lapsed. Otherwise the request is refused approval_unbindable,
// naming the missing fact (grants.Missing*). A used approval is recorded
// as review_consumed with the permit.

// ReceiptFormatReviews is the level from which reviews are decision
// records (see format.go).
const ReceiptFormatReviews uint64 = 4

// WritesReviews reports whether the level in force is at least
// ReceiptFormatReviews.
func (s *State) WritesReviews() bool { return s.ReceiptFormat() >= ReceiptFormatReviews }

// Bounds of what a review and a reply carry.
const (
	MaxArtifactPath  = api.MaxArtifactPath
	MaxReviewField   = api.MaxReviewField // transition, destination, role
	MaxReviewerRoles = 16
	MaxReplyText     = api.MaxReplyText
	MaxReplyChannel  = api.MaxReplyChannel
	MaxReplySender   = api.MaxReplySender
)

// Caller prefixes the transport gives the people who may decide reviews.
const (
	CallerOperator = "operator:"
	CallerReviewer = "reviewer:"
)

// LaneCoordinator is the lane whose workers may open artifact reviews.
const LaneCoordinator = "coordinator"

// reviewStatus is where a review record is in its lifecycle.
type reviewStatus uint8

const (
	rsOpen       reviewStatus = iota // awaiting a decision
	rsApproved                       // approved, not used yet
	rsRejected                       // rejected: final
	rsConsumed                       // approved and used by a permit: final
	rsSuperseded                     // a later version replaced it: final
	rsExpired                        // its approval lapsed unused: final
	rsLast       = rsExpired
)

var statusNames = [...]string{"open", "approved", "rejected", "consumed", "superseded", "expired"}

func (st reviewStatus) String() string {
	if int(st) < len(statusNames) {
		return statusNames[st]
	}
	return "status(" + strconv.Itoa(int(st)) + ")"
}

// record reports whether the review is a decision record (opened at level
// 4 or above: it has a caption).
func (r *review) record() bool { return r.Slug != "" }

// artifact reports whether the review was opened for an artifact.
func (r *review) artifact() bool { return !r.Artifact.IsZero() }

func (r *review) caption() string { return Caption(r.Slug, r.Version) }
func (r *review) keep() string    { return KeepToken(r.Slug, r.Version) }

// replaceReview puts a changed copy of a review in the map (records in
// the map are never modified: Freeze shares them) and schedules its
// removal at the same time as before.
func (s *State) replaceReview(r *review) {
	s.reviews[r.ID] = r
	s.schedule(r.Until, r.Seq, expireReview, r)
}

// recordsBy returns the retained review records that match, oldest first.
func (s *State) recordsBy(match func(*review) bool) []*review {
	var out []*review
	for _, r := range s.reviews {
		if r.record() && match(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *review) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// nextVersion is the version a new review of slug gets: one more than any
// retained review of that slug.
func (s *State) nextVersion(slug string) uint64 {
	var n uint64
	for _, r := range s.reviews {
		if r.Slug == slug && r.Version > n {
			n = r.Version
		}
	}
	return n + 1
}

// refused answers without recording anything.
func refused(r grants.Reason, missing, detail string) verdict {
	return reply(grants.Refuse(r, missing, detail))
}

func belowReviews(s *State) verdict {
	return refused(grants.ReasonUnknownVersion, "receipt format",
		fmt.Sprintf("reviews as decision records are written from receipt format %d; the format is %d", ReceiptFormatReviews, s.ReceiptFormat()))
}

// validTransition accepts "<from>-><to>" with both sides non-empty.
func validTransition(t string) bool {
	from, to, ok := strings.Cut(t, "->")
	return ok && from != "" && to != "" && !strings.Contains(to, "->") && len(t) <= MaxReviewField
}

// validDestination accepts "", "recipient:<r>" and "class:<c>".
func validDestination(d string) bool {
	if d == "" {
		return true
	}
	kind, v, ok := strings.Cut(d, ":")
	return ok && v != "" && (kind == "recipient" || kind == "class") && len(d) <= MaxReviewField
}

// decideOpenReview opens a review for an artifact.
func decideOpenReview(s *State, now int64, node string, c *Command) verdict {
	switch {
	case !s.WritesReviews():
		return belowReviews(s)
	case c.Caller == "" || isOperator(c.Caller) || strings.HasPrefix(c.Caller, CallerReviewer):
		return refused(grants.ReasonUnauthorized, "coordinator worker", "reviews are opened by a worker of the coordinator lane")
	case c.Lane != LaneCoordinator:
		return refused(grants.ReasonLaneMismatch, "lane="+LaneCoordinator, "only the coordinator lane opens reviews for artifacts")
	case s.barred[c.Caller]:
		return refused(grants.ReasonWorkerRevoked, "worker reinstated", "worker "+c.Caller+" is revoked")
	case s.policy == nil:
		return refused(grants.ReasonDeniedByPolicy, "policy applied", "no policy has been applied yet")
	case !ValidSlug(c.Caption):
		return refused(grants.ReasonInvalidRequest, "caption", "the caption slug must be lower-case letters, digits and single hyphens, starting with a letter, at most 48 bytes")
	case c.ContentDigest.IsZero():
		return refused(grants.ReasonInvalidRequest, "artifact digest", "the artifact's sha256 is required")
	case c.Path == "" || len(c.Path) > MaxArtifactPath:
		return refused(grants.ReasonInvalidRequest, "artifact path", "the artifact path is required (at most 1024 bytes)")
	case !validTransition(c.Transition):
		return refused(grants.ReasonInvalidRequest, "transition", "the transition must read <from>-><to>, e.g. review_ready->send")
	case !validDestination(c.Destination):
		return refused(grants.ReasonInvalidRequest, "destination", "the destination must be recipient:<r> or class:<c>")
	case len(c.ReviewerRole) > MaxReviewField:
		return refused(grants.ReasonInvalidRequest, "reviewer role", "the reviewer role is too long")
	}
	if pinned, ok := s.policy.Workers[c.Caller]; ok && pinned != c.Lane {
		return refused(grants.ReasonLaneMismatch, "lane="+pinned, "the policy places "+c.Caller+" in lane "+pinned)
	}
	// The live artifact reviews of this slug (a held call's review that
	// happens to share the slug is another series: its captions only
	// take versions from the same count).
	live := s.recordsBy(func(r *review) bool { return r.Slug == c.Caption && r.artifact() && now < r.Until })
	var old []*review
	for _, r := range live {
		if r.Worker != c.Caller && (r.Status == rsOpen || r.Status == rsApproved) {
			return refused(grants.ReasonInvalidRequest, "caption",
				"the caption "+c.Caption+" belongs to a live review of another worker; choose another slug")
		}
		if r.Status != rsOpen && r.Status != rsApproved {
			continue
		}
		if r.Artifact == c.ContentDigest && r.Transition == c.Transition && r.Destination == c.Destination && r.Role == c.ReviewerRole {
			// The same artifact put up again: the review it has.
			env := grants.Envelope{Decision: grants.Permit, ReviewID: r.ID, Kind: events.KindReviewOpened, Seq: r.Seq,
				Detail: r.caption() + " is already open for this artifact (" + r.Status.String() + ")"}
			return reply(env)
		}
		old = append(old, r)
	}
	version := s.nextVersion(c.Caption)
	e := base(events.KindReviewOpened, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker, e.Lane, e.Session = c.Caller, c.Lane, c.Session
	e.ReviewID = ReviewID("artifact\x00" + c.Caller + "\x00" + c.Caption + "\x00" + strconv.FormatUint(version, 10))
	e.Caption, e.ArtifactVersion, e.ArtifactDigest, e.ArtifactPath = c.Caption, version, c.ContentDigest, c.Path
	e.Transition, e.Destination, e.ReviewerRole = c.Transition, c.Destination, c.ReviewerRole
	e.Epoch = s.epoch
	e.ExpiresAt = AddSat(now, ReviewRetention)
	e.Detail = Caption(c.Caption, version) + " is open; a person decides it (keep token " + KeepToken(c.Caption, version) + ")"
	v := record(e)
	for _, r := range old {
		e.Candidates = append(e.Candidates, r.ID)
		se := base(events.KindReviewSuperseded, now, node, c)
		se.Decision = string(grants.Deny)
		se.Worker, se.Lane, se.ReviewID, se.RefSeq = r.Worker, r.Lane, r.ID, r.Seq
		se.Caption, se.ArtifactVersion, se.ArtifactDigest = r.Slug, r.Version, r.Artifact
		se.Detail = r.caption() + " is superseded by " + Caption(c.Caption, version)
		v.more = append(v.more, se)
	}
	v.event.Candidates = e.Candidates
	return v
}

// evolveReviewOpened records an artifact review.
func (s *State) evolveReviewOpened(e *events.Event) {
	s.addReview(&review{
		ID: e.ReviewID, Worker: s.intern.str(e.Worker), Lane: s.intern.str(e.Lane), Session: s.intern.str(e.Session),
		Seq: e.Seq, Until: e.ExpiresAt, Slug: s.intern.str(e.Caption), Version: e.ArtifactVersion,
		Path: e.ArtifactPath, Artifact: e.ArtifactDigest, Transition: s.intern.str(e.Transition),
		Destination: e.Destination, Role: s.intern.str(e.ReviewerRole), Epoch: e.Epoch,
	})
}

// evolveReviewStatus moves a review to the status its receipt records.
func (s *State) evolveReviewStatus(e *events.Event) {
	if e.ReplyText != "" {
		s.noteReply(e)
	}
	r, ok := s.reviews[e.ReviewID]
	if !ok {
		return
	}
	n := *r
	switch e.Kind {
	case events.KindReviewApproved:
		n.Status = rsApproved
		n.Decider, n.ApprovedUntil, n.ApprovedEpoch, n.DecidedSeq = s.intern.str(e.Actor), e.ExpiresAt, e.Epoch, e.Seq
		n.DeciderKey, n.DeciderCount = "", 0
		if len(e.Counters) > 0 {
			n.DeciderKey, n.DeciderCount = s.intern.str(e.Counters[0].Key), e.Counters[0].Value
		}
	case events.KindReviewRejected:
		n.Status, n.Decider, n.DecidedSeq = rsRejected, s.intern.str(e.Actor), e.Seq
	case events.KindReviewConsumed:
		n.Status = rsConsumed
	case events.KindReviewSuperseded:
		n.Status = rsSuperseded
	case events.KindReviewExpired:
		n.Status = rsExpired
	}
	s.replaceReview(&n)
}

// isOperator reports whether caller is an operator: "operator" (the
// issuer's operator subjects name no one) or "operator:<name>".
func isOperator(caller string) bool {
	return caller == "operator" || strings.HasPrefix(caller, CallerOperator) && len(caller) > len(CallerOperator)
}

// mayDecide says whether caller (with the reviewer roles the transport
// gave it) may decide r, and if not why.
func mayDecide(caller string, roles []string, r *review) (bool, string) {
	switch {
	case isOperator(caller):
		return true, ""
	case strings.HasPrefix(caller, CallerReviewer) && len(caller) > len(CallerReviewer):
		name := caller[len(CallerReviewer):]
		if name == r.Worker {
			return false, "a reviewer may not decide a review its own identity opened"
		}
		if r.Role != "" && !slices.Contains(roles, r.Role) {
			return false, "reviewer " + name + " does not hold the role " + r.Role + " this review asks for"
		}
		return true, ""
	}
	return false, "only an operator or a reviewer decides a review; a worker never does, in any lane (a person must decide)"
}

// resolveReview finds the retained review records a reference names: an
// id, a caption or a keep token.
func (s *State) resolveReview(ref string) []*review {
	if r, ok := s.reviews[ref]; ok && r.record() {
		return []*review{r}
	}
	pr, ok := parseReplyRef(ref)
	if !ok {
		return nil
	}
	return s.recordsBy(func(r *review) bool { return r.Slug == pr.Slug && r.Version == pr.Version })
}

// replyFacts is the verbatim reply a decision came from, if any.
type replyFacts struct {
	Channel, Sender, Text string
	At                    int64
}

func (rf *replyFacts) stamp(e *events.Event) {
	if rf == nil {
		return
	}
	e.ReplyChannel, e.ReplySender, e.ReplyText, e.ReplyAt = rf.Channel, rf.Sender, rf.Text, rf.At
}

// decisionEvent is the receipt of approving (or rejecting) r.
func (s *State) decisionEvent(now int64, node string, c *Command, r *review, approve bool, rf *replyFacts) events.Event {
	kind, dec := events.KindReviewRejected, grants.Deny
	if approve {
		kind, dec = events.KindReviewApproved, grants.Permit
	}
	e := base(kind, now, node, c)
	e.Decision = string(dec)
	e.ReviewID, e.RefSeq = r.ID, r.Seq
	e.Worker, e.Lane, e.Session, e.Tool, e.Digest = r.Worker, r.Lane, r.Session, r.Tool, r.Digest
	e.Caption, e.ArtifactVersion, e.ArtifactDigest, e.ReviewerRole = r.Slug, r.Version, r.Artifact, r.Role
	e.Epoch = s.epoch
	e.Detail = c.Note
	if approve {
		ttl := c.TTL
		if ttl <= 0 {
			ttl = DefaultApprovalTTL
		}
		e.ExpiresAt = min(AddSat(now, min(ttl, MaxApprovalTTL)), r.Until)
		if name, ok := strings.CutPrefix(c.Caller, CallerReviewer); ok {
			key := revocation.Key(revocation.ScopeReviewer, name)
			e.Counters = []events.Counter{{Key: key, Value: s.counters.Get(key)}}
		}
	}
	rf.stamp(&e)
	return e
}

// decidable reports whether r can take a decision now: open, or (to
// approve again) approved and not used.
func decidable(r *review, now int64, approve bool) (bool, string) {
	switch {
	case now >= r.Until:
		return false, r.caption() + " is closed (older than the hour a review stays open)"
	case r.Status == rsOpen:
		return true, ""
	case r.Status == rsApproved && approve:
		return true, "" // a refresh: a new approval under the current epoch
	}
	return false, r.caption() + " is " + r.Status.String() + " and takes no decision"
}

// decideReview approves or rejects the review c.ReviewID names.
func decideReview(s *State, now int64, node string, c *Command) verdict {
	if !s.WritesReviews() {
		return belowReviews(s)
	}
	var approve bool
	switch c.Outcome {
	case "approve":
		approve = true
	case "reject":
	default:
		return refused(grants.ReasonInvalidRequest, "decision", "the decision is approve or reject")
	}
	switch {
	case c.ReviewID == "":
		return refused(grants.ReasonInvalidRequest, "review", "a review id, caption or keep token is required")
	case c.TTL < 0:
		return refused(grants.ReasonInvalidRequest, "ttl", "ttl must not be negative")
	case len(c.Note) > MaxApprovalNote:
		return refused(grants.ReasonInvalidRequest, "note", "note is longer than the limit")
	case len(c.Roles) > MaxReviewerRoles:
		return refused(grants.ReasonInvalidRequest, "roles", "too many reviewer roles")
	}
	found := s.resolveReview(c.ReviewID)
	live := found[:0:0]
	for _, r := range found {
		if ok, _ := decidable(r, now, approve); ok {
			live = append(live, r)
		}
	}
	switch {
	case len(found) == 0:
		return refused(grants.ReasonUnknownReview, "open review", "no review is named "+c.ReviewID)
	case len(live) == 0:
		_, why := decidable(found[len(found)-1], now, approve)
		return refused(grants.ReasonUnknownReview, "open review", why)
	case len(live) > 1:
		return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous, "more than one review is named "+c.ReviewID+": "+captions(live)+"; use the review id")
	}
	r := live[0]
	if ok, why := mayDecide(c.Caller, c.Roles, r); !ok {
		return refused(grants.ReasonUnauthorized, "operator or reviewer", why)
	}
	return record(s.decisionEvent(now, node, c, r, approve, nil))
}

func captions(rs []*review) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.caption()
	}
	return strings.Join(out, ", ")
}

// replySeen remembers a reply already decoded, so that the same reply
// seen again is evidence only.
type replySeen struct {
	Key   events.Hash
	Seq   uint64 // the first receipt that carried it
	Until int64
}

// replyKey identifies a reply: channel, sender, time and text.
func replyKey(channel, sender string, at int64, text string) events.Hash {
	return events.Sum([]byte("writ.reply.v1\x00" + channel + "\x00" + sender + "\x00" + strconv.FormatInt(at, 10) + "\x00" + text))
}

// noteReply records the reply an event carries (the first event wins).
func (s *State) noteReply(e *events.Event) {
	k := replyKey(e.ReplyChannel, e.ReplySender, e.ReplyAt, e.ReplyText)
	if _, ok := s.replies[k]; ok {
		return
	}
	r := &replySeen{Key: k, Seq: e.Seq, Until: AddSat(e.Time, ReviewRetention)}
	s.replies[k] = r
	s.schedule(r.Until, r.Seq, expireReply, r)
}

// decideReply decodes a plain-text reply and binds it.
func decideReply(s *State, now int64, node string, c *Command) verdict {
	switch {
	case !s.WritesReviews():
		return belowReviews(s)
	case c.Channel == "" || len(c.Channel) > MaxReplyChannel:
		return refused(grants.ReasonInvalidRequest, "channel", "the reply's channel is required (at most 256 bytes)")
	case c.Sender == "" || len(c.Sender) > MaxReplySender:
		return refused(grants.ReasonInvalidRequest, "sender", "the reply's sender is required (at most 256 bytes)")
	case c.Text == "" || len(c.Text) > MaxReplyText:
		return refused(grants.ReasonInvalidRequest, "text", "the reply's text is required (at most 2048 bytes)")
	case len(c.Roles) > MaxReviewerRoles:
		return refused(grants.ReasonInvalidRequest, "roles", "too many reviewer roles")
	case !isOperator(c.Caller) && !strings.HasPrefix(c.Caller, CallerReviewer):
		return refused(grants.ReasonUnauthorized, "operator or reviewer", "replies are relayed by an operator or a reviewer identity; a worker never decides a review")
	}
	rf := &replyFacts{Channel: c.Channel, Sender: c.Sender, Text: c.Text, At: c.ReplyAt}
	orphan := func(missing, detail string, cands []*review) events.Event {
		e := base(events.KindReviewOrphaned, now, node, c)
		e = deny(e, "", missing, detail)
		e.Recovery = ""
		for _, r := range cands {
			e.Candidates = append(e.Candidates, r.caption())
		}
		rf.stamp(&e)
		return e
	}
	if seen, ok := s.replies[replyKey(c.Channel, c.Sender, c.ReplyAt, c.Text)]; ok && now < seen.Until {
		e := orphan("new reply", fmt.Sprintf("the same reply was recorded at seq %d; nothing decided again", seen.Seq), nil)
		e.RefSeq = seen.Seq
		return record(e)
	}
	in := DecodeReply(c.Text)
	// The live reviews this caller may decide, for a sender who did not
	// open them.
	cands := s.recordsBy(func(r *review) bool {
		ok, _ := mayDecide(c.Caller, c.Roles, r)
		return ok && now < r.Until && r.Status == rsOpen && r.Worker != c.Sender
	})
	if in.Verdict == VerdictUnclear {
		return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous,
			"the reply both accepts and refuses; nothing decided (live: "+orNone(captions(cands))+")")
	}
	var evs []events.Event
	if len(in.Refs) > 0 {
		if in.Verdict == VerdictNone {
			return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous,
				"the reply names "+refTokens(in.Refs)+" but neither approves nor rejects; nothing decided")
		}
		for _, ref := range in.Refs {
			var hit []*review
			for _, r := range cands {
				if r.Slug == ref.Slug && r.Version == ref.Version {
					hit = append(hit, r)
				}
			}
			switch len(hit) {
			case 1:
				evs = append(evs, s.decisionEvent(now, node, c, hit[0], in.Verdict == VerdictApprove, rf))
			case 0:
				same := s.recordsBy(func(r *review) bool {
					return r.Slug == ref.Slug && now < r.Until && r.Status == rsOpen
				})
				evs = append(evs, orphan("live review "+ref.Token(),
					ref.Token()+" names no live review "+c.Sender+" may decide; a token binds to its own version only", same))
			default:
				return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous, ref.Token()+" names "+captions(hit)+"; decide by review id")
			}
		}
	} else {
		switch {
		case in.Verdict == VerdictNone:
			evs = append(evs, orphan("decision word", "the reply neither approves nor rejects a review", nil))
		case len(cands) == 0:
			evs = append(evs, orphan("live review", "the reply binds to no live review "+c.Sender+" may decide", nil))
		case in.All && (in.Count == 0 || in.Count == len(cands)):
			for _, r := range cands {
				evs = append(evs, s.decisionEvent(now, node, c, r, in.Verdict == VerdictApprove, rf))
			}
		case in.All:
			return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous, fmt.Sprintf(
				"the reply means %d reviews and %d are live: %s; name each keep token", in.Count, len(cands), captions(cands)))
		case len(cands) == 1 && in.Count <= 1:
			evs = append(evs, s.decisionEvent(now, node, c, cands[0], in.Verdict == VerdictApprove, rf))
		default:
			return refused(grants.ReasonApprovalUnbindable, grants.MissingAmbiguous,
				"the reply could mean any of "+captions(cands)+"; which review is missing: reply with its keep token")
		}
	}
	v := record(evs[0])
	v.more = evs[1:]
	return v
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func refTokens(refs []ReplyRef) string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Token()
	}
	return strings.Join(out, ", ")
}

// bindFailure is an approval that exists but does not bind.
type bindFailure struct {
	r       *review
	missing string
	detail  string
}

// heldApproval finds the approved record review covering the exact call
// (worker, tool, digest) and checks that it binds at now. ok false: no
// approved record covers the call.
func (s *State) heldApproval(now int64, c *Command) (*review, *bindFailure, bool) {
	rs := s.recordsBy(func(r *review) bool {
		return !r.artifact() && r.Status == rsApproved && r.Worker == c.Caller && r.Tool == c.Tool && r.Digest == c.Digest
	})
	switch len(rs) {
	case 0:
		return nil, nil, false
	case 1:
		return rs[0], s.binds(rs[0], now, c), true
	}
	return rs[0], &bindFailure{r: rs[0], missing: grants.MissingAmbiguous,
		detail: "more than one approved review covers this call: " + captions(rs)}, true
}

// binds is the bindability test of one approved review at now.
func (s *State) binds(r *review, now int64, c *Command) *bindFailure {
	switch {
	case r.Status == rsConsumed:
		return &bindFailure{r, grants.MissingSpent, r.caption() + " was already used; a person must approve again"}
	case r.Status == rsSuperseded || (r.artifact() && c.ContentDigest != r.Artifact):
		return &bindFailure{r, grants.MissingArtifactDigest, r.caption() + " approved another version of the artifact; render it again and ask for a new review"}
	case r.Status == rsExpired || now >= r.ApprovedUntil || now >= r.Until:
		return &bindFailure{r, grants.MissingExpired, r.caption() + "'s approval lapsed unused; a person must approve again"}
	case r.ApprovedEpoch != s.epoch:
		return &bindFailure{r, grants.MissingEpoch, fmt.Sprintf("%s was approved under policy epoch %d; the epoch is %d", r.caption(), r.ApprovedEpoch, s.epoch)}
	case r.DeciderKey != "" && s.counters.Get(r.DeciderKey) != r.DeciderCount:
		return &bindFailure{r, grants.MissingReviewer, r.caption() + " was approved by " + r.Decider + ", who no longer holds the role"}
	}
	return nil
}

// unbindable refuses a request whose approval does not bind, and records
// that an approval which lapsed is expired.
func (s *State) unbindable(e events.Event, f *bindFailure, now int64, node string, c *Command) verdict {
	e.ReviewID = f.r.ID
	e.Caption, e.ArtifactVersion = f.r.Slug, f.r.Version
	e = deny(e, grants.ReasonApprovalUnbindable, f.missing, f.detail)
	if f.missing == grants.MissingArtifactDigest {
		e.Recovery = string(grants.RecoverRerenderArtifact)
	}
	v := record(e)
	if f.missing == grants.MissingExpired && f.r.Status == rsApproved {
		x := base(events.KindReviewExpired, now, node, c)
		x.Decision = string(grants.Deny)
		x.Worker, x.ReviewID, x.RefSeq = f.r.Worker, f.r.ID, f.r.DecidedSeq
		x.Caption, x.ArtifactVersion, x.ExpiresAt = f.r.Slug, f.r.Version, min(f.r.ApprovedUntil, f.r.Until)
		v.more = append(v.more, x)
	}
	return v
}

// consumedEvent records that the permit decided with seq used r.
func consumedEvent(now int64, node string, c *Command, r *review, permitSeq uint64) events.Event {
	e := base(events.KindReviewConsumed, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker, e.Lane, e.Tool, e.GrantID = r.Worker, r.Lane, c.Tool, c.GrantID
	e.ReviewID, e.RefSeq = r.ID, permitSeq
	e.Caption, e.ArtifactVersion, e.Transition = r.Slug, r.Version, r.Transition
	return e
}

// recordPermit turns a judgement into a permit covered by the approved
// record review r (the quotas still apply), followed by review_consumed.
func (s *State) recordPermit(now int64, node string, e events.Event, c *Command, j *policy.Judgement, bound []events.Counter, r *review) verdict {
	pe := s.coveredPermit(now, e, c, j, bound, r.ID, r.ApprovedUntil)
	v := record(pe)
	if pe.Kind == events.KindPermit {
		v.more = append(v.more, consumedEvent(now, node, c, r, s.chain.Seq+1))
	}
	return v
}

// decideArtifactUse decides a request naming an artifact review
// (c.ReviewID, with the artifact's digest now in c.ContentDigest) once the
// policy did not deny it.
func (s *State) decideArtifactUse(now int64, node string, e events.Event, c *Command, j *policy.Judgement, bound []events.Counter) verdict {
	rs := s.resolveReview(c.ReviewID)
	mine := rs[:0:0]
	for _, r := range rs {
		if r.Worker == c.Caller && r.artifact() {
			mine = append(mine, r)
		}
	}
	switch len(mine) {
	case 0:
		return record(deny(e, grants.ReasonUnknownReview, "review "+c.ReviewID, "no artifact review of "+c.Caller+" is named "+c.ReviewID))
	case 1:
	default:
		return s.unbindable(e, &bindFailure{mine[0], grants.MissingAmbiguous, c.ReviewID + " names " + captions(mine)}, now, node, c)
	}
	r := mine[0]
	switch r.Status {
	case rsOpen, rsRejected:
		e.ReviewID = r.ID
		return record(deny(e, grants.ReasonReviewRequired, "approval of "+r.caption(),
			r.caption()+" is "+r.Status.String()+"; a person must approve it"))
	}
	if f := s.binds(r, now, c); f != nil {
		return s.unbindable(e, f, now, node, c)
	}
	return s.recordPermit(now, node, e, c, j, bound, r)
}

// RecordInfo describes a review record (opened at receipt format level 4
// or above) for listings: its caption, keep token, status and what it
// covers.
type RecordInfo struct {
	ReviewInfo
	Slug                          string
	Version                       uint64
	ArtifactPath                  string
	Artifact                      events.Hash
	Transition, Destination, Role string
	Epoch, ApprovedEpoch          uint64
	Decider                       string
	ApprovedUntil                 int64
	DecidedSeq                    uint64
}

func (r *review) info() ReviewInfo {
	return ReviewInfo{ID: r.ID, Worker: r.Worker, Lane: r.Lane, Session: r.Session, Tool: r.Tool,
		Reason: r.Reason, Digest: r.Digest, Seq: r.Seq, Until: r.Until,
		Caption: r.captionOrEmpty(), Keep: r.keepOrEmpty(), Status: r.Status.String()}
}

func (r *review) captionOrEmpty() string {
	if !r.record() {
		return ""
	}
	return r.caption()
}

func (r *review) keepOrEmpty() string {
	if !r.record() {
		return ""
	}
	return r.keep()
}

// IsReviewRef reports whether ref reads as a caption or a keep token.
func IsReviewRef(ref string) bool {
	_, ok := parseReplyRef(ref)
	return ok
}

// Records returns every retained review record (any status), oldest
// first.
func (s *State) Records() []RecordInfo {
	rs := s.recordsBy(func(r *review) bool { return s.clock < r.Until })
	out := make([]RecordInfo, len(rs))
	for i, r := range rs {
		out[i] = r.recordInfo()
	}
	return out
}

// Record returns the retained review record a reference names (id,
// caption or keep token) when exactly one matches.
func (s *State) Record(ref string) (RecordInfo, bool) {
	rs := s.resolveReview(ref)
	if len(rs) != 1 {
		return RecordInfo{}, false
	}
	return rs[0].recordInfo(), true
}

func (r *review) recordInfo() RecordInfo {
	return RecordInfo{ReviewInfo: r.info(),
		Slug: r.Slug, Version: r.Version, ArtifactPath: r.Path, Artifact: r.Artifact, Transition: r.Transition,
		Destination: r.Destination, Role: r.Role, Epoch: r.Epoch, ApprovedEpoch: r.ApprovedEpoch,
		Decider: r.Decider, ApprovedUntil: r.ApprovedUntil, DecidedSeq: r.DecidedSeq}
}
