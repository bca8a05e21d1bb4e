package main

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/fsm"
)

const approvalPolicy = `{"version":2,"default_ttl":"1m",
 "lanes":{"coordinator":{"surfaces":["*"],"consequences":["*"]}},
 "surfaces":[{"id":"vault","tools":["vault_read"],"operation":"read","consequence":"credential_use","target":{"field":"name","canon":"digest"}}],
 "review":{"classes":["credential_use"]}}`

// TestApprovalReceipts: tail shows an approval_required answer with its
// review id, the operator's approval (review, call, expiry, who, note),
// the permit it covered and a refused approval; verify folds them and
// reaches the issuer's digest.
func TestApprovalReceipts(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.apply(fsm.Command{Op: fsm.OpSetPolicy, Caller: "operator:alice", Policy: []byte(approvalPolicy)})
	call := []byte(`{"name":"db"}`)
	d, _ := args.Digest("vault_read", call)
	flat, _ := args.Flatten(call)
	req := func(id string) fsm.Command {
		return fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "vault_read", GrantID: id, Digest: d, IdemKey: "k-" + id, Args: flat}
	}
	is.apply(req("g1"))
	rv := fsm.ReviewID("g1")
	is.apply(fsm.Command{Op: fsm.OpApprove, Caller: "operator:alice", ReviewID: rv, TTL: int64(time.Minute), Note: "owner said yes"})
	is.apply(req("g2"))
	is.apply(fsm.Command{Op: fsm.OpApprove, Caller: "operator:alice", ReviewID: rv})
	b.publish(is.receipts()...)

	r := runCLI(t, "tail", "--nats-url", url)
	if r.code != ExitOK {
		t.Fatalf("tail: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		" approval_required - w1 review_required tool=vault_read review=" + rv + "\n",
		" approval - w1 review=" + rv + " tool=vault_read digest=" + d.Short() + " until=",
		" by=operator:alice note=\"owner said yes\"\n",
		" permit g2 w1 approved review=" + rv + "\n",
		" deny - - unknown_review review=" + rv + "\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tail lacks %q:\n%s", want, r.stdout)
		}
	}
	r, rep := verifyJSON(t, url, "--expect-digest", is.s.Digest().String())
	if r.code != ExitOK || !rep.OK || rep.Kinds["approval"] != 1 {
		t.Fatalf("verify: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}
