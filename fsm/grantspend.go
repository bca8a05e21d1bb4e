package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/grants"
)

// Combined ops (receipt format level 11). A caller about to run a call
// asks for its grant and spends it in one log entry (OpGrantSpend), and
// after the call reports its outcome and registers its result in one
// entry (OpEffectSource). Each is two steps that Apply takes in turn, the
// second decided against the state the first one's receipt left, by the
// very decide functions of the separate ops: every check is theirs, and
// the receipts are theirs, each its own kind, sequence number and stream
// message. A log replayed through the separate ops would write the same
// receipts but for their raft index and time.

// refuseBelowGrantSpend is the answer to a combined op below receipt
// format level 11: the caller falls back to the separate ops.
func refuseBelowGrantSpend(s *State, c *Command) verdict {
	return reply(grants.Refuse(grants.ReasonUnknownVersion, "receipt format "+fmt.Sprint(ReceiptFormatGrantSpend), fmt.Sprintf(
		"%s needs receipt format %d and the cluster writes %d; send the separate requests", c.Op, ReceiptFormatGrantSpend, s.ReceiptFormat())))
}

// decideFirstStep is Decide for a combined op: its first step alone (a
// grant request, or an effect), which is all a caller that does not apply
// the entry can judge (a dry run). Apply takes both steps (applyPair).
func decideFirstStep(s *State, now int64, node string, c *Command) verdict {
	if !s.GrantSpends() {
		return refuseBelowGrantSpend(s, c)
	}
	first, _ := splitPair(c)
	return decide(s, now, node, &first)
}

// SplitCombined returns the two commands a combined op (OpGrantSpend,
// OpEffectSource) stands for: the request and the spend, whose grant id is
// the one the request's answer names; the effect and the source. An issuer
// below receipt format 11 proposes them in turn.
func SplitCombined(c Command) (first, second Command) { return splitPair(&c) }

// splitPair returns the two commands a combined op stands for.
func splitPair(c *Command) (first, second Command) {
	switch c.Op {
	case OpGrantSpend:
		first = *c
		first.Op = OpRequest
		// The spend's grant id is the one the request's answer names
		// (a replayed request names the grant it minted then).
		second = Command{
			Op: OpSpend, Caller: c.Caller, Digest: c.Digest, IdemKey: c.IdemKey,
			Args: c.Args, Cwd: c.Cwd, Resolved: c.Resolved,
		}
	case OpEffectSource:
		first = Command{Op: OpEffect, Caller: c.Caller, GrantID: c.GrantID, Outcome: c.Outcome, Verifier: c.Verifier}
		second = Command{
			Op: OpSource, Caller: c.Caller, SourceID: c.SourceID, Session: c.Session, Tool: c.Tool,
			Channel: c.Channel, Scope: c.Scope, ContentDigest: c.ContentDigest, Path: c.Path,
			Origins: c.Origins, ModelMade: c.ModelMade,
		}
	}
	return first, second
}

// applyPair takes the two steps of a combined op (Apply, at level 11).
//
// OpGrantSpend: the request is decided as an OpRequest; a refusal (deny,
// approval_required) is the answer and nothing is spent. A permit, fresh
// or replayed by its idempotency key, is spent as an OpSpend would spend
// it, and the spend's answer (an attempt, the original attempt of a
// retry, or a spend refusal) is the answer, with the permit's target
// where the answer lacks it.
//
// OpEffectSource: the effect is decided as an OpEffect and its answer is
// the answer; the source is then decided as an OpSource whatever the
// effect's answer (the separate registration would have been sent as
// well), and its answer is the answer's Source.
func (s *State) applyPair(raftIndex uint64, now int64, node string, c *Command) grants.Envelope {
	first, second := splitPair(c)
	v := decide(s, now, node, &first)
	env, _ := s.commitVerdict(raftIndex, &v)
	if c.Op == OpGrantSpend {
		if env.Decision != grants.Permit || env.GrantID == "" {
			return env
		}
		second.GrantID = env.GrantID
		sv := decide(s, now, node, &second)
		senv, _ := s.commitVerdict(raftIndex, &sv)
		if senv.Decision == grants.Permit && senv.Target == "" {
			senv.Target = env.Target
		}
		return senv
	}
	sv := decide(s, now, node, &second)
	senv, _ := s.commitVerdict(raftIndex, &sv)
	env.Source = &senv
	return env
}
