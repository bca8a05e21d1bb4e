package raftnode

import (
	"context"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
)

// BenchmarkSequentialPropose measures one caller's commit latency on a
// single node with the largest BatchWait Validate allows. An idle leader
// submits a lone proposal at once (BatchWait only applies while another
// entry is in flight), so ns/op stays near one fsync'd append, far below
// BatchWait; compare against a build of the old batcher to see the change.
func BenchmarkSequentialPropose(b *testing.B) {
	cfg := testConfig(b.TempDir(), freeAddr(b))
	cfg.BatchWait = 50 * time.Millisecond
	n := start(b, cfg)
	waitLeader(b, n)
	setPolicy(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		env, err := n.Propose(ctx, requestCmd(b, "w1", i))
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		if env.Kind != events.KindPermit {
			b.Fatalf("proposal %d: want a permit, got %+v", i, env)
		}
	}
}
