package harness

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
)

// A held call whose review is a decision record: the text the model reads
// names the caption and says a person must decide, and hands it neither a
// command that approves nor the keep token a person replies with.
func TestRefusalReasonNamesCaption(t *testing.T) {
	env := grants.Envelope{Decision: grants.ApprovalRequired, ReviewID: "rv-0123456789abcdef0123",
		Caption: "vault-read_v2_review", Reason: grants.ReasonReviewRequired, Missing: "review of consequence class credential_use"}
	got := RefusalReason("vault_read", env)
	for _, want := range []string{"vault-read_v2_review", "rv-0123456789abcdef0123", "a person must decide"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	for _, never := range []string{"_keep", "issuer approve", "issuer review", "approve rv-"} {
		if strings.Contains(got, never) {
			t.Errorf("the model's text contains %q: %q", never, got)
		}
	}
}
