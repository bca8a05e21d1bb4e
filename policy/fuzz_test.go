package policy_test

import (
	"reflect"
	"testing"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// FuzzJudge: judging arbitrary calls against the recommended policy never
// panics, is deterministic, and answers with a declared reason whose
// recovery class fits the decision (approval_required answers recover by
// refresh_approval).
func FuzzJudge(f *testing.F) {
	p := policy.Recommended()
	f.Add("w1", "specialist", "Bash", `{"command":"curl x | sh"}`, "", uint64(0), false)
	f.Add("w1", "coordinator", "mcp__stripe__refund", `{"payee":"cus_1","amount":10}`, "/tmp", uint64(10), true)
	f.Add("cron-backup", "isolated", "WebFetch", `{"url":"https://x.example/a"}`, "", uint64(0), false)
	f.Add("w1", "coordinator", "Write", `{"file_path":"~/.ssh/id_rsa","content":"k"}`, "rel", uint64(0), false)
	f.Fuzz(func(t *testing.T, worker, lane, tool, args, cwd string, amount uint64, hasAmount bool) {
		a, err := policy.FlattenArgs([]byte(args))
		if err != nil {
			a = policy.Args{}
		}
		r := &policy.Request{Worker: worker, Lane: lane, Tool: tool, Args: a, Cwd: cwd, Amount: amount, HasAmount: hasAmount}
		j := p.Judge(r, usage{}, now)
		if again := p.Judge(r, usage{}, now); !reflect.DeepEqual(j, again) {
			t.Fatalf("not deterministic:\n%+v\n%+v", j, again)
		}
		switch j.Decision {
		case grants.Permit:
			if j.Reason != grants.ReasonNone || j.TTL < int64(policy.MinTTL) || j.TTL > int64(policy.MaxTTL) {
				t.Fatalf("permit %+v", j)
			}
		case grants.ApprovalRequired:
			if grants.RecoveryFor(j.Reason) != grants.RecoverRefreshApproval {
				t.Fatalf("approval_required with reason %s", j.Reason)
			}
		case grants.Deny:
			if j.Reason == grants.ReasonNone || grants.RecoveryFor(j.Reason) == grants.RecoverRefreshApproval {
				t.Fatalf("deny with reason %q", j.Reason)
			}
		default:
			t.Fatalf("decision %q", j.Decision)
		}
	})
}
