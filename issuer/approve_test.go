package issuer

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
)

// Every review id the state machine makes has the shape api checks, or an
// operator could not approve it; and api refuses ids of any other shape.
func TestReviewIDShapeAgrees(t *testing.T) {
	for _, g := range []string{"g1", "", "0b5b2a8e-7c1f-4a0e-9f0a-1b2c3d4e5f61", strings.Repeat("x", 300)} {
		if rv := fsm.ReviewID(g); !api.ValidReviewID(rv) {
			t.Errorf("fsm.ReviewID(%q) = %q, which api.ValidReviewID refuses", g, rv)
		}
	}
	for _, bad := range []string{"", "rv-", "rv-0123456789ABCDEF0123", "xx-0123456789abcdef0123",
		"rv-0123456789abcdef012", "rv-0123456789abcdef01234", "rv-0123456789abcdef012g"} {
		if api.ValidReviewID(bad) {
			t.Errorf("api.ValidReviewID(%q) holds", bad)
		}
	}
}

func TestApproveCommand(t *testing.T) {
	rv := fsm.ReviewID("g1")
	for _, tc := range []struct {
		body    string
		missing string // "" = accepted
		ttl     time.Duration
	}{
		{`{"v":1,"review_id":"` + rv + `"}`, "", 10 * time.Minute},
		{`{"v":1,"review_id":"` + rv + `","ttl_ms":120000,"note":"ok\nthanks"}`, "", 2 * time.Minute},
		{`{"v":1,"review_id":"` + rv + `","ttl_ms":86400000}`, "", 24 * time.Hour},
		{`{"v":1,"review_id":"` + rv + `","ttl_ms":86400001}`, "ttl_ms", 0},
		{`{"v":1,"review_id":"` + rv + `","ttl_ms":-1}`, "ttl_ms", 0},
		{`{"v":1,"review_id":"` + rv + `","ttl_ms":9300000000000000}`, "ttl_ms", 0},
		{`{"v":1}`, "review_id", 0},
		{`{"v":1,"review_id":"rv-XYZ"}`, "review_id", 0},
		{`{"v":1,"review_id":"rv-0123456789ABCDEF0123"}`, "review_id", 0},
		{`{"v":1,"review_id":"xx-0123456789abcdef0123"}`, "review_id", 0},
		{`{"v":1,"review_id":"rv-0123456789abcdef01234"}`, "review_id", 0},
		{`{"v":1,"review_id":"` + rv + `","note":"` + strings.Repeat("n", api.MaxApprovalNote+1) + `"}`, "note", 0},
		{`{"v":1,"review_id":"` + rv + `","note":"a\u0000b"}`, "note", 0},
		{"{\"v\":1,\"review_id\":\"" + rv + "\",\"note\":\"\xff\"}", "note", 0},
		{`{"v":1,"review_id":"` + rv + `","worker":"w1"}`, "body", 0},
	} {
		c, e := approveCommand("operator", []byte(tc.body))
		if tc.missing == "" {
			if e != nil {
				t.Errorf("%s: refused %+v", tc.body, e)
				continue
			}
			if c.Op != fsm.OpApprove || c.Caller != "operator" || c.ReviewID != rv || c.TTL != int64(tc.ttl) {
				t.Errorf("%s: command %+v", tc.body, c)
			}
			continue
		}
		if e == nil || e.missing != tc.missing {
			t.Errorf("%s: want a refusal naming %s, got %+v", tc.body, tc.missing, e)
		}
	}
}
