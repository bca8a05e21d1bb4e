package harness

import (
	"fmt"
	"strings"

	"github.com/writ-dev/writ/grants"
)

// recoveryAdvice says, for the model and the person reading along, what
// the one safe next step of each recovery class means for a tool call.
var recoveryAdvice = map[grants.Recovery]string{
	grants.RecoverNone:                 "do not retry this call; only an operator can change this (policy, reinstatement)",
	grants.RecoverRequestNewGrant:      "the call may be retried; the retry asks for a fresh grant",
	grants.RecoverRefreshApproval:      "get the review approved again, then retry the call",
	grants.RecoverRerenderArtifact:     "re-render the artifact and have the new version reviewed, then retry",
	grants.RecoverNarrowDestination:    "retry with a narrower destination",
	grants.RecoverReacquireOwnership:   "re-acquire ownership of the route before retrying",
	grants.RecoverReconcileConsumption: "this call's grant was already used; check what the first attempt did instead of retrying",
	grants.RecoverRetryAuthority:       "writ could not be reached; retry the call later",
	grants.RecoverFixRequest:           "the request itself is malformed; change it before retrying",
}

// RecoveryAdvice returns the advice for a recovery class.
func RecoveryAdvice(r grants.Recovery) string {
	if a, ok := recoveryAdvice[r]; ok {
		return a
	}
	return "do not retry this call until the refusal is understood"
}

// meaning returns the reason table's explanation of r, or "".
func meaning(r grants.Reason) string {
	for _, ri := range grants.Reasons {
		if ri.Reason == r {
			return ri.Meaning
		}
	}
	return ""
}

// RefusalReason is the one-line text of a deny or approval_required answer:
// what was refused, the reason code and what it means, the missing fact and
// the recovery — or, for an approval, the review id and the exact operator
// command that approves it.
func RefusalReason(tool string, env grants.Envelope) string {
	var b strings.Builder
	rec := env.Recovery
	if rec == "" {
		rec = grants.RecoveryFor(env.Reason)
	}
	if env.Decision == grants.ApprovalRequired {
		fmt.Fprintf(&b, "writ requires approval for this %s call", tool)
		if env.ReviewID != "" {
			fmt.Fprintf(&b, ": review %s is open", env.ReviewID)
		}
		if env.Reason != grants.ReasonNone {
			fmt.Fprintf(&b, " (reason %s", env.Reason)
			if env.Missing != "" {
				fmt.Fprintf(&b, "; missing: %s", env.Missing)
			}
			b.WriteString(")")
		} else if env.Missing != "" {
			fmt.Fprintf(&b, " (missing: %s)", env.Missing)
		}
		b.WriteString(". ")
		if env.ReviewID != "" {
			fmt.Fprintf(&b, "An operator approves it with `%s`; then retry the call.", ApproveCommand(env.ReviewID))
		} else {
			b.WriteString("No review id was given; ask an operator.")
		}
		b.WriteString(" An approval given in this harness's own prompt would bind to nothing in writ, so the call is denied until then.")
	} else {
		code := string(env.Reason)
		if code == "" {
			code = "unspecified"
		}
		fmt.Fprintf(&b, "writ denied this %s call: %s", tool, code)
		if m := meaning(env.Reason); m != "" {
			fmt.Fprintf(&b, " (%s)", m)
		}
		b.WriteString(".")
		if env.Missing != "" {
			fmt.Fprintf(&b, " Missing: %s.", env.Missing)
		}
		fmt.Fprintf(&b, " Recovery: %s — %s.", rec, RecoveryAdvice(rec))
	}
	if env.Detail != "" {
		fmt.Fprintf(&b, " Detail: %s.", strings.TrimSuffix(env.Detail, "."))
	}
	if env.Seq != 0 {
		fmt.Fprintf(&b, " [receipt %d]", env.Seq)
	}
	return OneLine(b.String())
}

// PermitReason is the reason of an "allow" answer: the grant that was
// spent.
func PermitReason(tool string, env grants.Envelope) string {
	s := fmt.Sprintf("writ grant %s spent for this %s call", env.GrantID, tool)
	if env.Seq != 0 {
		s += fmt.Sprintf(" [receipt %d]", env.Seq)
	}
	return s
}
