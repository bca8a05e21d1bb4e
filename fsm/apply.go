package fsm

import (
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Apply executes one committed batch: for each command it runs Decide at
// the control-plane time, then seals, chains and folds each resulting event
// with Evolve, and queues it in the outbox. It returns one envelope per
// command, in order. raftIndex is stamped on every event.
func Apply(s *State, raftIndex uint64, b Batch) []grants.Envelope {
	now := b.Time
	if s.clock > now {
		now = s.clock
	}
	s.indexWorkers()
	out := make([]grants.Envelope, len(b.Commands))
	for i, c := range b.Commands {
		if c.Op == OpPublished {
			// Publication bookkeeping, not authority: no event, and not
			// part of Digest.
			s.confirmPublished(c.Seq)
		}
		o := Decide(s, now, b.Node, c)
		if o.Reply != nil {
			out[i] = *o.Reply
			continue
		}
		for j := range o.Events {
			e := &o.Events[j]
			e.RaftIndex = raftIndex
			e.Seq, e.Prev = s.chain.Seq+1, s.chain.Head
			data := e.Seal(nil)
			// Evolve is the only place that moves state, the chain head
			// included.
			if err := Evolve(s, *e); err != nil {
				// Unreachable: Decide only emits events Evolve accepts.
				// Refuse loudly rather than fork state.
				out[i] = grants.Refuse(grants.ReasonInvalidRequest, "", "internal: "+err.Error())
				break
			}
			s.outbox = append(s.outbox, Pending{Seq: e.Seq, Subject: events.Subject(e.Kind), Data: data})
			if j == 0 {
				out[i] = grants.FromEvent(*e)
			}
		}
	}
	return out
}

// confirmPublished drops outbox entries up to seq.
func (s *State) confirmPublished(seq uint64) {
	if seq > s.chain.Seq {
		seq = s.chain.Seq
	}
	if seq <= s.published {
		return
	}
	s.published = seq
	i := 0
	for i < len(s.outbox) && s.outbox[i].Seq <= seq {
		i++
	}
	// Copy so the dropped prefix can be collected.
	s.outbox = append([]Pending(nil), s.outbox[i:]...)
}
