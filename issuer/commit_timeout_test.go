package issuer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// A request whose entry is not confirmed committed within CommitTimeout
// is answered issuer_unavailable (missing "commit"), about when the
// timeout passes; the entry still commits, and a retry with the same
// idempotency key gets the original grant.
func TestCommitTimeoutAnswersUnavailable(t *testing.T) {
	const timeout = 300 * time.Millisecond
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.CommitTimeout = timeout
	})
	nc := dial(t, env.URL)
	subj := api.WorkerSubject("w1", api.OpGrant)
	body := grantBody(1)

	// Hold the state machine: Apply waits for the write lock while this
	// View holds the read lock, so nothing is applied until release.
	held, free := make(chan struct{}), make(chan struct{})
	go env.Node.View(func(*fsm.State, uint64) {
		close(held)
		<-free
	})
	<-held
	var once sync.Once
	release := func() { once.Do(func() { close(free) }) }
	t.Cleanup(release)

	t0 := time.Now()
	got, err := request(nc, subj, body)
	took := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	want := grants.Refuse(grants.ReasonIssuerUnavail, "commit", "the entry was not confirmed committed: "+grants.KeptUnconfirmed)
	if got.Decision != want.Decision || got.Reason != want.Reason || got.Missing != want.Missing ||
		got.Recovery != want.Recovery || got.Detail != want.Detail || got.Seq != 0 {
		t.Fatalf("answer while apply is held:\n got %+v\nwant %+v", got, want)
	}
	if took < timeout || took > timeout+3*time.Second {
		t.Fatalf("answered after %s with CommitTimeout %s", took, timeout)
	}
	release()

	first, err := request(nc, subj, body)
	if err != nil || first.Decision != grants.Permit || first.GrantID == "" {
		t.Fatalf("retry after release: %+v %v", first, err)
	}
	again, err := request(nc, subj, body)
	if err != nil || again.GrantID != first.GrantID || again.Seq != first.Seq {
		t.Fatalf("second retry: want the original grant %s (seq %d), got %+v %v", first.GrantID, first.Seq, again, err)
	}
	if n := env.Service.Status().Grants; n != 1 {
		t.Fatalf("the state holds %d grants, want the one the timed-out request minted", n)
	}
}
