package raftnode

import (
	"errors"
	"fmt"
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
// waiting proposal, gathers whatever else is queued (waiting at most
// BatchWait for more, up to BatchMax), stamps the batch with this leader's
// clock and hands it to raft without waiting for the commit, so several
// batches can be in flight; raft.Apply preserves their order.
func (n *Node) batchLoop() {
	defer n.wg.Done()
	var timer *time.Timer
	for {
		var first proposal
		select {
		case first = <-n.proposals:
		case <-n.stop:
			n.drain()
			return
		}
		batch := []proposal{first}
		if n.cfg.BatchWait > 0 {
			if timer == nil {
				timer = time.NewTimer(n.cfg.BatchWait)
			} else {
				timer.Reset(n.cfg.BatchWait)
			}
		}
	gather:
		for len(batch) < n.cfg.BatchMax {
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
				continue
			default:
			}
			if n.cfg.BatchWait == 0 {
				break
			}
			select {
			case p := <-n.proposals:
				batch = append(batch, p)
			case <-timer.C:
				timer = nil
				break gather
			case <-n.stop:
				break gather
			}
		}
		if timer != nil && !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		n.submit(batch)
	}
}

func (n *Node) submit(batch []proposal) {
	b := fsm.Batch{Time: n.stamp(), Node: n.cfg.NodeID, Commands: make([]fsm.Command, len(batch))}
	for i, p := range batch {
		b.Commands[i] = p.cmd
	}
	f := n.raft.Apply(b.Encode(), n.cfg.ApplyTimeout)
	n.inflight.Add(1)
	go func() {
		defer n.inflight.Done()
		err := f.Error()
		if err != nil {
			err = mapRaftErr(err)
			for _, p := range batch {
				p.done <- proposalResult{err: err}
			}
			return
		}
		res, _ := f.Response().(applyResult)
		for i, p := range batch {
			switch {
			case res.err != nil:
				p.done <- proposalResult{err: res.err}
			case i < len(res.envs):
				p.done <- proposalResult{env: res.envs[i]}
			default:
				p.done <- proposalResult{err: fmt.Errorf("raftnode: state machine returned %d answers for %d commands", len(res.envs), len(batch))}
			}
		}
	}()
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
