package issuer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// FuzzReviewOpenCommand: a worker's review-open body either refuses with a
// documented reason or becomes an OpOpenReview by that worker (identity
// from the subject, never the body) carrying the body's fields, a valid
// slug, a non-zero digest and at most one destination.
func FuzzReviewOpenCommand(f *testing.F) {
	d := events.Sum([]byte("artifact")).String()
	addSeeds(f, "w1",
		`{"v":1,"lane":"coordinator","path":"out/q3.pdf","sha256":"`+d+`","caption":"q3-report","transition":"review_ready->send","recipient":"cfo@example.com","reviewer_role":"finance"}`,
		`{"v":1,"lane":"coordinator","path":"a","sha256":"`+d+`","caption":"q3","transition":"a->b","destination_class":"finance"}`,
		`{"v":1,"lane":"coordinator","path":"a","sha256":"`+d+`","caption":"q3","transition":"a->b","recipient":"x","destination_class":"y"}`,
		`{"v":1,"lane":"coordinator","path":"a","sha256":"abc","caption":"q3","transition":"a->b"}`,
		`{"v":1,"lane":"coordinator","path":"a","sha256":"`+d+`","caption":"Q3 Report","transition":"a->b"}`,
		`{"v":1,"lane":"coordinator","path":"a\u0000b","sha256":"`+d+`","caption":"q3","transition":"a->b"}`,
		`{"v":1,"lane":"coordinator","path":"a","sha256":"`+d+`","caption":"q3","transition":"a->b","worker":"w2"}`,
	)
	f.Fuzz(func(t *testing.T, worker string, body []byte) {
		c, e := reviewOpenCommand(worker, body)
		if e != nil {
			checkRefusal(t, body, e)
			return
		}
		var r api.ReviewOpenRequest
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("accepted a body plain JSON cannot decode: %q: %v", body, err)
		}
		if c.Op != fsm.OpOpenReview || c.Caller != worker || !fsm.ValidSlug(c.Caption) || c.ContentDigest.IsZero() || c.Path == "" {
			t.Fatalf("body %q: command %+v", body, c)
		}
		if c.ContentDigest.String() != strings.ToLower(r.SHA256) || c.Path != r.Path || c.Transition != r.Transition || c.Lane != r.Lane {
			t.Fatalf("body %q: command %+v does not carry the body's fields", body, c)
		}
		if r.Recipient != "" && r.DestinationClass != "" {
			t.Fatalf("body %q: two destinations accepted", body)
		}
	})
}

// FuzzReviewDecideCommand: a decision body refuses or becomes an
// OpDecideReview by the caller the transport named, approve or reject,
// with a note and a lifetime within the bounds.
func FuzzReviewDecideCommand(f *testing.F) {
	addSeeds(f, "operator",
		`{"v":1,"review":"q3-report_v2_keep","decision":"approve","ttl_ms":60000,"note":"ok"}`,
		`{"v":1,"review":"rv-0123456789abcdef0123","decision":"reject"}`,
		`{"v":1,"review":"q3","decision":"maybe"}`,
		`{"v":1,"review":"","decision":"approve"}`,
		`{"v":1,"review":"x","decision":"approve","ttl_ms":-1}`,
		`{"v":1,"review":"x","decision":"approve","caller":"operator:root"}`,
	)
	f.Fuzz(func(t *testing.T, caller string, body []byte) {
		c, e := reviewDecideCommand(caller, []string{"finance"}, body)
		if e != nil {
			checkRefusal(t, body, e)
			return
		}
		if c.Op != fsm.OpDecideReview || c.Caller != caller || (c.Outcome != "approve" && c.Outcome != "reject") || c.ReviewID == "" {
			t.Fatalf("body %q: command %+v", body, c)
		}
		if c.TTL < 0 || len(c.Note) > api.MaxApprovalNote || !utf8.ValidString(c.Note) {
			t.Fatalf("body %q: ttl %d note %q", body, c.TTL, c.Note)
		}
	})
}

// FuzzReviewReplyCommand: a reply body refuses or becomes an
// OpReviewReply carrying the channel, sender, time and text verbatim
// within their bounds.
func FuzzReviewReplyCommand(f *testing.F) {
	addSeeds(f, "reviewer:dana",
		`{"v":1,"channel":"slack:#ops","sender":"dana","at":1796315060998374510,"text":"q3-report_v2_keep"}`,
		`{"v":1,"channel":"sms","sender":"+15550100","at":-1,"text":"keep all three"}`,
		`{"v":1,"channel":"","sender":"dana","at":1,"text":"lgtm"}`,
		`{"v":1,"channel":"c","sender":"dana","at":1,"text":"`+strings.Repeat("k", 2049)+`"}`,
		`{"v":1,"channel":"c","sender":"dana","at":1,"text":"\ud800"}`,
	)
	f.Fuzz(func(t *testing.T, caller string, body []byte) {
		c, e := reviewReplyCommand(caller, nil, body)
		if e != nil {
			checkRefusal(t, body, e)
			return
		}
		var r api.ReviewReplyRequest
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("accepted a body plain JSON cannot decode: %q: %v", body, err)
		}
		if c.Op != fsm.OpReviewReply || c.Caller != caller || c.Channel != r.Channel || c.Sender != r.Sender || c.Text != r.Text || c.ReplyAt != r.At {
			t.Fatalf("body %q: command %+v", body, c)
		}
		if c.Text == "" || len(c.Text) > api.MaxReplyText || len(c.Channel) > api.MaxReplyChannel || len(c.Sender) > api.MaxReplySender {
			t.Fatalf("body %q: out of bounds: %+v", body, c)
		}
	})
}
