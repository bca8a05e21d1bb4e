package raftnode

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

type proposal struct {
	cmd  fsm.Command
	done chan proposalResult
}

type proposalResult struct {
	env grants.Envelope
	err error
}

// batchLoop coalesces proposals into log entries. It takes the first
// waiting proposal and whatever else is queued, then:
//
//   - nothing in flight: submits at once (an idle cluster adds no wait);
//   - fewer than Config.Pipeline entries in flight: waits at most
//     BatchWait for company;
//   - Config.Pipeline in flight: keeps gathering until one is applied.
//
// Under load one entry thus carries every request that arrived during a
// commit round, instead of a trickle of small entries that each pay raft's
// per-entry costs (msgpack on the leader and every follower, a boltdb
// commit, an FSM call, a publish wake-up).
//
// A batch never exceeds BatchMax. It stamps the batch with this leader's
// clock and hands it to raft without waiting for the commit; raft.Apply
// preserves the order of in-flight entries.
func (n *Node) batchLoop() {
	defer n.wg.Done()
	var timer *time.Timer
	// inflight counts submitted entries raft has not answered for; freed
	// is signalled (coalescing) whenever one is answered.
	var inflight atomic.Int64
	freed := make(chan struct{}, 1)
	// batch and cmds are reused from entry to entry: submit keeps only
	// the proposals' answer channels.
	var (
		batch []proposal
		cmds  []fsm.Command
	)
	for {
		var first proposal
		select {
		case first = <-n.proposals:
		case <-n.stop:
			n.drain()
			return
		}
		batch = append(batch[:0], first)
		timerSet := false
	gather:
		for len(batch) < n.cfg.BatchMax {
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
				continue
			default:
			}
			switch k := inflight.Load(); {
			case k == 0:
				break gather
			case k < int64(n.cfg.Pipeline):
				if n.cfg.BatchWait == 0 {
					break gather
				}
				if !timerSet {
					if timer == nil {
						timer = time.NewTimer(n.cfg.BatchWait)
					} else {
						timer.Reset(n.cfg.BatchWait)
					}
					timerSet = true
				}
				select {
				case p := <-n.proposals:
					batch = append(batch, p)
				case <-freed:
				case <-timer.C:
					timerSet = false
					break gather
				case <-n.stop:
					break gather
				}
			default: // the pipeline is full: gather until an entry is answered
				select {
				case p := <-n.proposals:
					batch = append(batch, p)
				case <-freed:
				case <-n.stop:
					break gather
				}
			}
		}
		if timerSet && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		inflight.Add(1)
		cmds = n.submit(batch, cmds, func() {
			inflight.Add(-1)
			select {
			case freed <- struct{}{}:
			default:
			}
		})
		clear(batch)
		clear(cmds)
	}
}

// submit hands batch to raft, encoding it through cmds (returned for
// reuse); answered is called once raft has answered for it (committed and
// applied, or failed). Only the answer channels outlive the call.
func (n *Node) submit(batch []proposal, cmds []fsm.Command, answered func()) []fsm.Command {
	dones := make([]chan proposalResult, len(batch))
	cmds = cmds[:0]
	for i, p := range batch {
		cmds = append(cmds, p.cmd)
		dones[i] = p.done
	}
	b := fsm.Batch{Time: n.stamp(), Node: n.cfg.NodeID, Commands: cmds}
	f := n.raft.Apply(b.Encode(), n.cfg.ApplyTimeout)
	n.inflight.Add(1)
	go func() {
		defer n.inflight.Done()
		err := f.Error()
		answered()
		if err != nil {
			err = mapRaftErr(err)
			for _, done := range dones {
				done <- proposalResult{err: err}
			}
			return
		}
		res, _ := f.Response().(applyResult)
		for i, done := range dones {
			switch {
			case res.err != nil:
				done <- proposalResult{err: res.err}
			case i < len(res.envs):
				done <- proposalResult{env: res.envs[i]}
			default:
				done <- proposalResult{err: fmt.Errorf("raftnode: state machine returned %d answers for %d commands", len(res.envs), len(dones))}
			}
		}
	}()
	return cmds
}

func (n *Node) drain() {
	for {
		select {
		case p := <-n.proposals:
			p.done <- proposalResult{err: ErrClosed}
		default:
			return
		}
	}
}

func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	}
	return err
}
