package natsbus

import (
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/internal/testing/benchcpu"
)

// BenchmarkPublisherR3 publishes receipt-sized messages into an R3 receipt
// stream on three embedded servers (sync always, as an issuer runs them) in
// calls of -window messages, as atomic batches and message by message. One
// op is one message; cpu-ns/op is the whole process (the three servers
// and the publisher), read from the runtime's CPU accounting.
func BenchmarkPublisherR3(b *testing.B) {
	for _, window := range []int{8, 32, 256} {
		for _, mode := range []string{"batched", "per-message"} {
			b.Run(fmt.Sprintf("%s/window=%d", mode, window), func(b *testing.B) {
				benchPublish(b, 3, window, mode == "per-message")
			})
		}
	}
}

func benchPublish(b *testing.B, replicas, window int, perMessage bool) {
	ctx := testCtx(b, 5*time.Minute)
	js := startCluster(b, ctx, replicas, replicas, false).js
	p := NewPublisher(js[0], WithWindow(window))
	p.perMessage.Store(perMessage)
	data := make([]byte, 305) // a spend's attempt receipt
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	msgs := make([]Message, b.N)
	for i := range msgs {
		msgs[i] = Message{Seq: uint64(i + 1), Subject: events.SubjectPrefix + "attempt", Data: data}
	}
	b.ResetTimer()
	cpu := benchcpu.Start()
	for i := 0; i < b.N; i += window {
		batch := msgs[i:min(i+window, b.N)]
		if got, err := p.Publish(ctx, batch); err != nil || got != batch[len(batch)-1].Seq {
			b.Fatalf("Publish %d..%d = %d, %v", batch[0].Seq, batch[len(batch)-1].Seq, got, err)
		}
	}
	b.StopTimer()
	cpu.Report(b)
}
