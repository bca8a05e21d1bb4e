package clustertests

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/issuer"
)

// TestReceiptFormatWaitsForEveryVoter plays a rolling upgrade on a
// three-node cluster: while one voter reports only the legacy receipt
// format (issuer serve --receipt-format 1, as a voter of an earlier build
// does), the leader never raises the level and every replica writes the
// legacy permits; once that voter comes back offering level 2, the
// leader raises it, the next permit carries its usage facts, every
// replica reaches the same digest and the whole stream, both forms, passes
// the auditor.
func TestReceiptFormatWaitsForEveryVoter(t *testing.T) {
	var held atomic.Bool
	held.Store(true)
	c := cluster.StartWith(t, 3, cluster.Options{NodeArgs: func(nd *cluster.Node) []string {
		if nd.Index == 2 && held.Load() {
			return []string{"--receipt-format", "1"}
		}
		return nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// n3 follows, as a not yet upgraded follower does (a leader held at
	// level 1 never raises it, trivially): restarting it while it leads
	// hands the leadership to another node.
	for try := 0; c.Leader() == 2; try++ {
		if try == 3 {
			t.Fatal("n3 keeps winning the election")
		}
		c.Stop(2)
		c.Leader()
		c.Restart(2)
		c.WaitConverged()
	}
	first := cluster.Mint(t, ctx, c.Client(c.Leader(), worker), 1, "format-1")
	c.WaitConverged()
	// Watch the leader ask n3 which level it writes: after two more
	// rounds, the first has run to its end without raising the level.
	asked := make(chan struct{}, 16)
	sub, err := c.Conn(0).Subscribe(api.SubjectStatus+"."+c.Nodes[2].ID, func(*nats.Msg) {
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Conn(0).Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-asked:
		case <-time.After(4 * issuer.DefaultFormatCheck):
			t.Fatal("the leader does not ask n3 for its receipt format")
		}
	}
	_ = sub.Unsubscribe()
	for i := range c.Nodes {
		if st := c.Status(i); st.ReceiptFormatLevel != fsm.ReceiptFormatLegacy {
			t.Fatalf("%s raised the level to %d while n3 reports 1", st.Node, st.ReceiptFormatLevel)
		}
	}
	if e := receiptAt(t, c.Conn(0), first.Seq); e.Kind != events.KindPermit || e.Charged {
		t.Fatalf("a permit at level 1: %+v", e)
	}

	// n3 is upgraded: restarted, it offers its build's highest level.
	held.Store(false)
	c.Stop(2)
	c.Restart(2)
	var level uint64
	deadline := time.Now().Add(cluster.ConvergeTimeout)
	for level != fsm.MaxReceiptFormat {
		if time.Now().After(deadline) {
			t.Fatalf("the level never reached %d (at %d)", fsm.MaxReceiptFormat, level)
		}
		time.Sleep(100 * time.Millisecond)
		if st, err := c.LeaderStatus(); err == nil {
			level = st.ReceiptFormatLevel
		}
	}
	second := cluster.Mint(t, ctx, c.Client(c.Leader(), worker), 2, "format-2")
	if e := receiptAt(t, c.Conn(0), second.Seq); e.Kind != events.KindPermit || !e.Charged {
		t.Fatalf("a permit at level 2: %+v", e)
	}
	st := c.WaitConverged()
	for i := range c.Nodes {
		if s := c.Status(i); s.ReceiptFormatLevel != fsm.MaxReceiptFormat || s.ReceiptFormat != fsm.MaxReceiptFormat {
			t.Fatalf("%s: level %d, build %d", s.Node, s.ReceiptFormatLevel, s.ReceiptFormat)
		}
	}
	c.WaitPublished()
	c.CheckedStream(t, st)
}
