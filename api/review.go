package api

import (
	"fmt"
	"strconv"
	"strings"
)

// Reviews as decision records (receipt format level 4). A worker of the
// coordinator lane opens a review for an artifact on its own subject
// (writ.api.<worker>.review, ReviewOpenRequest). Operators decide on
// writ.op.review.decide (ReviewDecideRequest) and relay a person's
// plain-text reply on writ.op.review.reply (ReviewReplyRequest). A
// reviewer identity (a NATS user that may publish only under
// writ.review.<name>.>) does the same on writ.review.<name>.decide and
// writ.review.<name>.reply; the issuer takes the name from the subject and
// the reviewer's roles from its configuration, never from the body.

// OpReview is the worker operation that opens an artifact review.
const OpReview = "review"

// ReviewerPrefix roots a reviewer identity's subjects.
const ReviewerPrefix = "writ.review."

// Reviewer operations (the last subject token), and the operator subjects
// of the same requests.
const (
	ReviewOpDecide      = "decide"
	ReviewOpReply       = "reply"
	SubjectReviewDecide = OperatorPrefix + "review." + ReviewOpDecide
	SubjectReviewReply  = OperatorPrefix + "review." + ReviewOpReply
)

// ReviewerSubject is the subject a reviewer sends op on.
func ReviewerSubject(reviewer, op string) string { return ReviewerPrefix + reviewer + "." + op }

// ReviewerWildcard matches every reviewer request.
const ReviewerWildcard = ReviewerPrefix + "*.*"

// ParseReviewerSubject splits writ.review.<reviewer>.<op>.
func ParseReviewerSubject(subj string) (reviewer, op string, err error) {
	rest, ok := strings.CutPrefix(subj, ReviewerPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrBadSubject, subj)
	}
	reviewer, op, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(op, ".") {
		return "", "", fmt.Errorf("%w: %q (want writ.review.<reviewer>.<op>)", ErrBadSubject, subj)
	}
	if err := ValidID(reviewer); err != nil {
		return "", "", fmt.Errorf("%w: reviewer: %v", ErrBadSubject, err)
	}
	switch op {
	case ReviewOpDecide, ReviewOpReply:
		return reviewer, op, nil
	}
	return "", "", fmt.Errorf("%w: unknown reviewer operation %q", ErrBadSubject, op)
}

// ReviewOpenRequest opens a review for an artifact: its path, the SHA-256
// of its bytes (64 hex digits), the caption slug (lower-case letters,
// digits and single hyphens), the transition it would authorize
// ("review_ready->send"), at most one of Recipient and DestinationClass,
// and the reviewer role that may decide it ("" for any operator or
// reviewer). Lane is the worker's lane (coordinator).
type ReviewOpenRequest struct {
	V                int    `json:"v"`
	Lane             string `json:"lane"`
	Session          string `json:"session,omitempty"`
	Path             string `json:"path"`
	SHA256           string `json:"sha256"`
	Caption          string `json:"caption"`
	Transition       string `json:"transition"`
	Recipient        string `json:"recipient,omitempty"`
	DestinationClass string `json:"destination_class,omitempty"`
	ReviewerRole     string `json:"reviewer_role,omitempty"`
}

// ReviewDecideRequest approves or rejects (Decision "approve" or "reject")
// the review Review names: its id, its caption or its keep token. An
// approval waits TTLMillis for its use (as ApproveRequest's); Note is
// recorded in the receipt.
type ReviewDecideRequest struct {
	V         int    `json:"v"`
	Review    string `json:"review"`
	Decision  string `json:"decision"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Note      string `json:"note,omitempty"`
}

// ReviewReplyRequest is a person's plain-text reply as a chat gateway
// received it: the channel, the sender, when it was sent (Unix ns) and the
// text, all kept verbatim in the receipt.
type ReviewReplyRequest struct {
	V       int    `json:"v"`
	Channel string `json:"channel"`
	Sender  string `json:"sender"`
	At      int64  `json:"at"`
	Text    string `json:"text"`
}

// Bounds of a reply (the state machine's, repeated here for a client's
// checks).
const (
	MaxReplyText    = 2048
	MaxReplyChannel = 256
	MaxReplySender  = 256
	MaxArtifactPath = 1024
	MaxReviewField  = 256
)

// Captions. A review is captioned <slug>_v<N>_review and approved by its
// keep token <slug>_v<N>_keep: the slug names the artifact (or the tool,
// for a held call), N its version.

// MaxSlug is the longest review slug.
const MaxSlug = 48

// Caption and keep token suffixes.
const (
	captionSuffix = "_review"
	keepSuffix    = "_keep"
)

// ValidSlug reports whether s may name a review: a lower-case letter,
// then up to MaxSlug-1 lower-case letters, digits and single hyphens, not
// ending in one.
func ValidSlug(s string) bool {
	if s == "" || len(s) > MaxSlug || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9':
		case b == '-' && s[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// ReviewCaption is <slug>_v<N>_review.
func ReviewCaption(slug string, version uint64) string {
	return slug + "_v" + strconv.FormatUint(version, 10) + captionSuffix
}

// KeepToken is <slug>_v<N>_keep.
func KeepToken(slug string, version uint64) string {
	return slug + "_v" + strconv.FormatUint(version, 10) + keepSuffix
}

// ParseReviewRef reads a caption or a keep token: its slug, its version
// (from 1, without leading zeros, at most nine digits) and whether it is a
// keep token.
func ParseReviewRef(w string) (slug string, version uint64, keep, ok bool) {
	rest, isKeep := strings.CutSuffix(w, keepSuffix)
	if !isKeep {
		if rest, ok = strings.CutSuffix(w, captionSuffix); !ok {
			return "", 0, false, false
		}
	}
	i := strings.LastIndex(rest, "_v")
	if i < 0 {
		return "", 0, false, false
	}
	slug, num := rest[:i], rest[i+2:]
	if !ValidSlug(slug) || num == "" || num[0] == '0' || len(num) > 9 {
		return "", 0, false, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 {
		return "", 0, false, false
	}
	return slug, n, isKeep, true
}
