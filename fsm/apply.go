package fsm

import (
	"slices"
	"strings"

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
	for i := range b.Commands {
		c := &b.Commands[i]
		if c.Op == OpPublished {
			// Publication bookkeeping, not authority: no event, and not
			// part of Digest.
			s.confirmPublished(c.Seq)
		}
		if (c.Op == OpGrantSpend || c.Op == OpEffectSource) && s.GrantSpends() {
			// Two steps in one entry: the second is decided against the
			// state the first one's receipt left (grantspend.go).
			out[i] = s.applyPair(raftIndex, now, b.Node, c)
			s.explainWorkspace(&out[i], c)
			continue
		}
		v := decide(s, now, b.Node, c)
		if c.Op == OpRaiseFormat && v.reply != nil && v.reply.Decision == grants.Permit {
			// Receipt bookkeeping, not authority: no event, and not part
			// of Digest (see ReceiptFormat).
			s.raiseFormat(c.Format)
		}
		out[i], _ = s.commitVerdict(raftIndex, &v)
		s.explainWorkspace(&out[i], c)
	}
	return out
}

// commitVerdict records what decide concluded for one command and returns
// its answer; recorded reports whether it recorded a receipt.
func (s *State) commitVerdict(raftIndex uint64, v *verdict) (env grants.Envelope, recorded bool) {
	if v.reply != nil {
		return *v.reply, false
	}
	if err := s.commit(raftIndex, &v.event); err != nil {
		// Unreachable: Decide only emits events Evolve accepts.
		// Refuse loudly rather than fork state.
		return grants.Refuse(grants.ReasonInvalidRequest, "", "internal: "+err.Error()), false
	}
	for k := range v.more {
		// Further receipts of the same command (a reply decided
		// several reviews, a permit used an approval, ...): each
		// chained and folded in turn; the answer is the first's.
		if err := s.commit(raftIndex, &v.more[k]); err != nil {
			break // unreachable, as above
		}
	}
	env = grants.FromEvent(v.event)
	if v.event.Caption != "" && v.event.ArtifactVersion > 0 {
		env.Caption = Caption(v.event.Caption, v.event.ArtifactVersion)
	}
	return env, true
}

// commit seals, chains and folds one event Decide wrote, and queues it in
// the outbox. Evolve is the only place that moves state, the chain head
// included.
func (s *State) commit(raftIndex uint64, e *events.Event) error {
	e.RaftIndex = raftIndex
	e.Seq, e.Prev = s.chain.Seq+1, s.chain.Head
	data := e.Seal(nil)
	if err := evolve(s, e); err != nil {
		return err
	}
	s.outbox = append(s.outbox, Pending{Seq: e.Seq, Subject: events.Subject(e.Kind), Data: data})
	return nil
}

// explainWorkspace adds to the answer of a call held because its path lies
// outside the lane's workspace which workspace that is ("/etc/hosts is
// outside the workspace /work/w1"), so that the model and the operator
// read the reason. Only the answer carries it: the receipt and the state
// keep what the engine decided, as they always did.
func (s *State) explainWorkspace(env *grants.Envelope, c *Command) {
	if env.Reason != grants.ReasonBoundaryCrossing || !slices.Contains(env.Rules, "boundary:workspace") {
		return
	}
	target := env.Target
	if target == "" {
		// A retry's answer is rebuilt from the idempotency record, which
		// keeps the missing fact but not the target.
		target, _ = strings.CutPrefix(env.Missing, "allowance or preauthorization covering ")
	}
	note := s.policy.OutsideWorkspace(c.Caller, c.Lane, target)
	if note == "" || strings.Contains(env.Detail, note) {
		return
	}
	if env.Detail != "" {
		note = env.Detail + "; " + note
	}
	env.Detail = note
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
	if i == len(s.outbox) {
		// All published: an idle state keeps no array.
		s.outbox = nil
		return
	}
	// Move the rest to the front of the same array and clear the vacated
	// slots, so the dropped receipts can be collected and the next entry's
	// receipts fit without growing a new array; once the array is mostly
	// unused (a backlog was published), reallocate it smaller, as the
	// expiry heap does. Outbox hands out copies: nothing else holds it.
	n := copy(s.outbox, s.outbox[i:])
	clear(s.outbox[n:])
	s.outbox = s.outbox[:n]
	if c := cap(s.outbox); c > shrinkFloor && n < c/4 {
		s.outbox = append(make([]Pending, 0, 2*n), s.outbox...)
	}
}
