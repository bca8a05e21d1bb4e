package issuer

import (
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Reviews as decision records: the requests that open, decide and answer
// reviews (api/review.go), built into state machine commands. Who decides
// comes from the subject: an operator subject is "operator", a reviewer
// subject writ.review.<name>.<op> is "reviewer:<name>" with the roles
// Config.Reviewers gives that name; a reviewer the configuration does not
// name is refused before anything is proposed.

// plainText checks a text field: valid UTF-8, no control characters but
// newlines and tabs.
func plainText(field, v string) *requestError {
	if !utf8.ValidString(v) {
		return invalid(field, "not valid UTF-8")
	}
	for _, c := range v {
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			return invalid(field, "contains control characters")
		}
	}
	return nil
}

// reviewOpenCommand builds an OpOpenReview from a worker's request.
func reviewOpenCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.ReviewOpenRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	sum, err := hex.DecodeString(r.SHA256)
	if err != nil || len(sum) != len(events.Hash{}) || events.Hash(sum).IsZero() {
		return fsm.Command{}, invalid("sha256", "want the artifact's SHA-256 as 64 hex digits")
	}
	switch {
	case r.Path == "" || len(r.Path) > api.MaxArtifactPath:
		return fsm.Command{}, invalid("path", "required, at most %d bytes", api.MaxArtifactPath)
	case len(r.Transition) > api.MaxReviewField || !strings.Contains(r.Transition, "->"):
		return fsm.Command{}, invalid("transition", "want FROM->TO, e.g. review_ready->send")
	case r.Lane == "":
		return fsm.Command{}, invalid("lane", "required (the coordinator lane opens artifact reviews)")
	case r.Recipient != "" && r.DestinationClass != "":
		return fsm.Command{}, invalid("recipient", "name a recipient or a destination class, not both")
	case !fsm.ValidSlug(r.Caption):
		return fsm.Command{}, invalid("caption", "lower-case letters, digits and single hyphens, starting with a letter, at most %d bytes", fsm.MaxSlug)
	}
	for _, f := range []struct{ name, v string }{{"path", r.Path}, {"transition", r.Transition}, {"recipient", r.Recipient},
		{"destination_class", r.DestinationClass}, {"reviewer_role", r.ReviewerRole}, {"session", r.Session}} {
		if e := plainText(f.name, f.v); e != nil {
			return fsm.Command{}, e
		}
	}
	c := fsm.Command{Op: fsm.OpOpenReview, Caller: worker, Lane: r.Lane, Session: r.Session, Path: r.Path,
		ContentDigest: events.Hash(sum), Caption: r.Caption, Transition: r.Transition, ReviewerRole: r.ReviewerRole}
	switch {
	case r.Recipient != "":
		c.Destination = "recipient:" + r.Recipient
	case r.DestinationClass != "":
		c.Destination = "class:" + r.DestinationClass
	}
	return c, nil
}

// reviewDecideCommand builds an OpDecideReview.
func reviewDecideCommand(caller string, roles []string, data []byte) (fsm.Command, *requestError) {
	var r api.ReviewDecideRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	switch {
	case r.Review == "":
		return fsm.Command{}, invalid("review", "required: a review id, caption or keep token")
	case r.Decision != "approve" && r.Decision != "reject":
		return fsm.Command{}, invalid("decision", "approve or reject")
	case r.TTLMillis < 0 || r.TTLMillis > api.MaxApprovalTTLMillis:
		return fsm.Command{}, invalid("ttl_ms", "must be between 0 (the default, %d) and %d", api.DefaultApprovalTTLMillis, api.MaxApprovalTTLMillis)
	case len(r.Note) > api.MaxApprovalNote:
		return fsm.Command{}, invalid("note", "longer than %d bytes", api.MaxApprovalNote)
	}
	if e := plainText("note", r.Note); e != nil {
		return fsm.Command{}, e
	}
	if e := plainText("review", r.Review); e != nil {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpDecideReview, Caller: caller, Roles: roles, ReviewID: r.Review, Outcome: r.Decision,
		TTL: r.TTLMillis * int64(time.Millisecond), Note: r.Note}, nil
}

// reviewReplyCommand builds an OpReviewReply: the reply verbatim, within
// the bounds the receipt keeps.
func reviewReplyCommand(caller string, roles []string, data []byte) (fsm.Command, *requestError) {
	var r api.ReviewReplyRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	switch {
	case r.Channel == "" || len(r.Channel) > api.MaxReplyChannel:
		return fsm.Command{}, invalid("channel", "required, at most %d bytes", api.MaxReplyChannel)
	case r.Sender == "" || len(r.Sender) > api.MaxReplySender:
		return fsm.Command{}, invalid("sender", "required, at most %d bytes", api.MaxReplySender)
	case r.Text == "" || len(r.Text) > api.MaxReplyText:
		return fsm.Command{}, invalid("text", "required, at most %d bytes", api.MaxReplyText)
	}
	if !utf8.ValidString(r.Channel) || !utf8.ValidString(r.Sender) || !utf8.ValidString(r.Text) {
		return fsm.Command{}, invalid("text", "not valid UTF-8")
	}
	return fsm.Command{Op: fsm.OpReviewReply, Caller: caller, Roles: roles, Channel: r.Channel, Sender: r.Sender,
		ReplyAt: r.At, Text: r.Text}, nil
}

func (s *Service) handleReviewer(m *nats.Msg) { s.spawn(m, reviewerHandler) }

// reviewer answers one request on writ.review.<name>.<op>.
func (s *Service) reviewer(m *nats.Msg) {
	name, op, err := api.ParseReviewerSubject(m.Subject)
	if err != nil {
		s.respond(m, grants.Refuse(grants.ReasonInvalidRequest, "subject", err.Error()))
		return
	}
	roles, ok := s.cfg.Reviewers[name]
	if !ok {
		s.respond(m, grants.Refuse(grants.ReasonUnauthorized, "reviewer identity",
			"no reviewer "+name+" is configured; an operator adds it to the auth file with role reviewer"))
		return
	}
	var (
		cmd  fsm.Command
		rerr *requestError
	)
	switch op {
	case api.ReviewOpDecide:
		cmd, rerr = reviewDecideCommand(fsm.CallerReviewer+name, roles, m.Data)
	case api.ReviewOpReply:
		cmd, rerr = reviewReplyCommand(fsm.CallerReviewer+name, roles, m.Data)
	}
	if rerr != nil {
		s.respond(m, rerr.envelope())
		return
	}
	s.propose(m, cmd)
}
