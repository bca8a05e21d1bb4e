package fsm_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// TestReopenedReviewExpiresLikeRestored: a review opened again under the
// same id at the same time (a replayed stream can reuse a grant id, and
// the review id derives from it) leaves its first expiry item stale; the
// live state and a state restored from its snapshot, which holds only the
// current review, must still remove every entry in the same order.
func TestReopenedReviewExpiresLikeRestored(t *testing.T) {
	t0 := int64(1000 * time.Second)
	sudo := func(grant, key string) fsm.Command {
		c := fsm.Command{Op: fsm.OpRequest, Caller: "w2", Lane: "specialist", Tool: "Bash", IdemKey: key, GrantID: grant}
		c.Digest, _ = grants.DigestArgs(c.Tool, []byte(`{"command":"sudo ls"}`))
		c.Args, _ = policy.FlattenArgs([]byte(`{"command":"sudo ls"}`))
		return c
	}
	s := fsm.New()
	fsm.Apply(s, 1, fsm.Batch{Time: t0, Node: "n1", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: scriptPolicy("v2.yaml")}}})
	envs := fsm.Apply(s, 2, fsm.Batch{Time: t0 + 1, Node: "n1", Commands: []fsm.Command{
		sudo("g1", "k1"), sudo("g2", "k2"), sudo("g1", "k3")}})
	for i, e := range envs {
		if e.Decision != grants.ApprovalRequired {
			t.Fatalf("request %d answered %+v; the test needs approval_required", i, e)
		}
	}
	if envs[0].ReviewID != envs[2].ReviewID {
		t.Fatalf("review ids %s and %s: the test needs the same one", envs[0].ReviewID, envs[2].ReviewID)
	}
	restored, err := fsm.Restore(s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	liveRm, liveLeft := fsm.ExpiryRemovals(s)
	restRm, restLeft := fsm.ExpiryRemovals(restored)
	if len(liveLeft) > 0 || len(restLeft) > 0 {
		t.Fatalf("entries never removed: %v, %v", liveLeft, restLeft)
	}
	if !reflect.DeepEqual(liveRm, restRm) {
		t.Fatalf("removal order differs:\nlive     %v\nrestored %v", liveRm, restRm)
	}
}
