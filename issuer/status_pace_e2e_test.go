package issuer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// TestStatusPacingServesFreshState: with the state digest paced to a
// small share of the time (a status after a change waits its turn), every
// status still reports the state as of its answer: a grant applied just
// after one status is counted by the next, whose digest moved with it;
// with nothing applied in between, the next status has the same digest.
func TestStatusPacingServesFreshState(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) { c.StatusDigestShare = 0.01 })
	nc := dial(t, env.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := client.New(nc, "w1")
	prev := env.Service.Status()
	for i := 0; i < 3; i++ {
		ans, err := w.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Read", Args: json.RawMessage(`{"file_path":"/srv/app/README.md"}`)})
		if err != nil || ans.Decision != grants.Permit {
			t.Fatalf("grant %d: %+v %v", i, ans, err)
		}
		st := env.Service.Status()
		if st.Grants != prev.Grants+1 || st.Seq <= prev.Seq || st.StateDigest == prev.StateDigest {
			t.Fatalf("status after grant %d: %d grants at seq %d, digest %s; the status before it: %d at seq %d, digest %s",
				i, st.Grants, st.Seq, st.StateDigest, prev.Grants, prev.Seq, prev.StateDigest)
		}
		prev = st
	}
	if again := env.Service.Status(); again.Seq != prev.Seq || again.StateDigest != prev.StateDigest {
		t.Fatalf("status with nothing applied in between moved: seq %d -> %d, digest %s -> %s", prev.Seq, again.Seq, prev.StateDigest, again.StateDigest)
	}
}
