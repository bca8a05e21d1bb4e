package raftnode

import (
	"sync"
	"time"

	"github.com/writ-dev/writ/fsm"
)

// stampClock is the state behind Node.stamp.
type stampClock struct {
	mu        sync.Mutex
	lastStamp int64     // the last time this node stamped on a batch
	lastMono  time.Time // when, with a monotonic reading
}

// stamp returns the time a new batch carries: this node's wall clock
// (Config.Clock), but never less than the control-plane clock, nor less
// than the last stamp this node gave plus the monotonic time elapsed since.
//
// The state machine's clock is max(clock, entry time), so it never runs
// backwards whatever the stamps are. The floor here adds the other half of
// the guarantee: a leader whose wall clock is behind the log's clock (it
// jumped back, or it was always slow and just won an election) still moves
// the control-plane clock forward at real speed, so a grant's lifetime is
// not stretched by the time the leader's wall clock needs to catch up. A
// wall clock that jumps forward still moves the log clock forward (grants
// then expire early, which is the safe direction).
func (n *Node) stamp() int64 {
	wall := n.now().UnixNano()
	mono := time.Now() // carries a monotonic reading
	var logClock int64
	n.fsm.view(func(s *fsm.State, _ uint64) { logClock = s.Clock() })
	c := &n.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	floor := logClock
	if c.lastStamp != 0 {
		if f := c.lastStamp + int64(mono.Sub(c.lastMono)); f > floor {
			floor = f
		}
	}
	t := max(wall, floor)
	c.lastStamp, c.lastMono = t, mono
	return t
}

// now is the node's wall clock.
func (n *Node) now() time.Time {
	if n.cfg.Clock != nil {
		return n.cfg.Clock()
	}
	return time.Now()
}
