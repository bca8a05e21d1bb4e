package fsm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
)

// notFromStateMachine are the reasons and recovery classes the state
// machine cannot produce, with where they come from instead.
var notFromStateMachine = map[string]string{
	string(grants.ReasonUnauthorized):        "transport: the issuer refuses the subject",
	string(grants.ReasonIssuerUnavail):       "transport: nothing was committed",
	string(grants.ReasonUnknownVersion):      "issuer: the request body's version",
	string(grants.ReasonRequestTooLarge):     "issuer: the request body's size",
	string(grants.ReasonOwnerStale):          "route ownership is a later issue",
	string(grants.ReasonDestRevoked):         "no grant binds a destination counter yet",
	string(grants.RecoverReacquireOwnership): "route ownership is a later issue",
	string(grants.RecoverRetryAuthority):     "transport: issuer_unavailable",
	string(grants.ReasonRateLimited):         "issuer: admission control answers it undecided; the state machine writes it only as a refusal summary's count (TestRefusalSummary)",
	string(grants.RecoverRetryLater):         "issuer: with rate_limited",
}

// TestScriptsCoverReasons: the transcripts in testdata/scripts between
// them show every reason code and recovery class the state machine can
// produce, every decision, and every kind of rule the policy engine names
// as grounds.
func TestScriptsCoverReasons(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scripts", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, transcript, _ := strings.Cut(string(b), "\n"+scriptSep+"\n")
		all.WriteString(transcript)
	}
	text := all.String()
	want := []string{"approval_required reason=", "\ndeny reason=", "\npermit grant="}
	for _, ri := range grants.Reasons {
		if _, ok := notFromStateMachine[string(ri.Reason)]; !ok {
			want = append(want, "reason="+string(ri.Reason)+" ")
		}
		if _, ok := notFromStateMachine[string(ri.Recovery)]; !ok {
			want = append(want, "recovery="+string(ri.Recovery))
		}
	}
	for _, rule := range []string{"lane:", "surface:", "lanes.", "surfaces", "workers.", "deny:", "allow:", "preauth:",
		"shape:", "boundary:protected:", "boundary:workspace", "boundary:egress", "boundary:trust_domain",
		"boundary:class:", "review", "ledger", "quota:"} {
		want = append(want, "rules="+rule, ","+rule)
	}
	for _, w := range want {
		if strings.HasPrefix(w, ",") {
			continue // checked together with its rules= form below
		}
		if !strings.Contains(text, w) && !strings.Contains(text, ","+strings.TrimPrefix(w, "rules=")) {
			t.Errorf("no transcript shows %q", w)
		}
	}
}
