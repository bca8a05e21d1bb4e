package issuer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/raftnode"
)

// TestReceiptsGoInRounds: with a linger, receipts answered close together
// share publication rounds, and each is still its own stream message at
// its own sequence. Invariants: every answered receipt reaches the stream
// (stream last seq equals the state's seq; the chain and kinds of each
// message are checked by the stream tests); and the rounds that carried
// them are at most half as many as the receipts (without the linger, one
// worker's requests answered one at a time publish a round per receipt).
func TestReceiptsGoInRounds(t *testing.T) {
	tc := struct {
		linger    time.Duration
		maxRounds func(receipts int) int
	}{500 * time.Millisecond, func(n int) int { return n / 2 }}
	{
		{
			env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
				c.PublishLinger = tc.linger
				c.PublishBatch = 8
			})
			nc := dial(t, env.URL)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before := env.Service.Status()
			// One worker, one request at a time: without a linger each
			// answer's receipt is published on its own before the next.
			c := client.New(nc, "w1")
			for i := range 16 {
				env, err := c.Grant(ctx, api.GrantRequest{Lane: "coordinator", Tool: "Bash",
					Args: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i)), IdempotencyKey: fmt.Sprintf("r-%d", i)})
				if err != nil || env.Seq == 0 {
					t.Fatalf("grant: %+v %v", env, err)
				}
			}
			var st api.Status
			testenv.WaitFor(t, 10*time.Second, "every receipt in the stream", func() bool {
				st = env.Service.Status()
				return st.StreamLastSeq == st.Seq
			})
			receipts := int(st.Seq - before.Seq)
			rounds := int(st.PublishRounds - before.PublishRounds)
			t.Logf("%d receipts in %d rounds (linger %s, batch 8)", receipts, rounds, tc.linger)
			if receipts < 16 {
				t.Fatalf("only %d receipts for 16 answers", receipts)
			}
			if rounds < 1 || rounds > tc.maxRounds(receipts) {
				t.Fatalf("invariant receipts share rounds: %d receipts went in %d rounds, want 1..%d", receipts, rounds, tc.maxRounds(receipts))
			}
		}
	}
}
