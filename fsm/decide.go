package fsm

import (
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// Outcome is what Decide concluded for one command: either events to record
// (the first one is the answer) or, for a retry or a pure bookkeeping
// command, an answer that records nothing.
type Outcome struct {
	Events []events.Event
	Reply  *grants.Envelope
}

// verdict is what the decide functions conclude: Outcome without the
// heap. A command records at most one event, held here by value, so that
// Apply seals and folds it where it lies instead of allocating a slice for
// an event of close to a kilobyte per command.
type verdict struct {
	event events.Event
	more  []events.Event   // further receipts of the same command (reviews), after event
	reply *grants.Envelope // set for an answer that records nothing
}

func record(e events.Event) verdict { return verdict{event: e} }

func reply(env grants.Envelope) verdict { return verdict{reply: &env} }

// Decide judges one command against the state at control-plane time now.
// It does not modify s.
func Decide(s *State, now int64, node string, c Command) Outcome {
	v := decide(s, now, node, &c)
	if v.reply != nil {
		return Outcome{Reply: v.reply}
	}
	return Outcome{Events: append([]events.Event{v.event}, v.more...)}
}

// decide is Decide for a command the caller holds by reference (a command
// is over half a kilobyte); it neither modifies nor keeps *c.
func decide(s *State, now int64, node string, c *Command) verdict {
	switch c.Op {
	case OpRequest:
		v := decideRequest(s, now, node, c)
		if v.reply == nil && v.event.Kind == events.KindPermit && s.WritesFleet() {
			// A spawned worker's grant never outlives the worker.
			s.capExpiry(c.Caller, &v.event)
		}
		return v
	case OpSpend:
		return decideSpend(s, now, node, c)
	case OpEffect:
		return decideEffect(s, now, node, c)
	case OpRevoke:
		return decideRevoke(s, now, node, c)
	case OpSetPolicy:
		return decideSetPolicy(s, now, node, c)
	case OpReinstate:
		return decideReinstate(s, now, node, c)
	case OpSource:
		return decideSource(s, now, node, c)
	case OpApprove:
		return decideApprove(s, now, node, c)
	case OpPublished:
		// Apply moves the watermark before asking; the answer is the
		// watermark in force (a confirmation beyond the chain is capped).
		return reply(grants.Envelope{Decision: grants.Permit, Seq: s.published})
	case OpRaiseFormat:
		return decideRaiseFormat(s, c)
	case OpRefusalSummary:
		return decideRefusalSummary(s, now, node, c)
	case OpOpenReview:
		return decideOpenReview(s, now, node, c)
	case OpDecideReview:
		return decideReview(s, now, node, c)
	case OpReviewReply:
		return decideReply(s, now, node, c)
	case OpRouteAcquire:
		return decideRouteAcquire(s, now, node, c)
	case OpRouteRenew:
		return decideRouteRenew(s, now, node, c)
	case OpRouteRelease:
		return decideRouteRelease(s, now, node, c)
	case OpRouteLapse:
		return decideRouteLapse(s, now, node, c)
	case OpRouteForget:
		return decideRouteForget(s, now, node, c)
	case OpBreakGlass:
		return decideBreakGlass(s, now, node, c)
	case OpSpawn:
		return decideSpawn(s, now, node, c)
	case OpRestore:
		return decideRestore(s, now, node, c)
	case OpRespawn:
		return decideRespawn(s, now, node, c)
	case OpLift:
		return decideLift(s, now, node, c)
	case OpGrantSpend, OpEffectSource:
		return decideFirstStep(s, now, node, c)
	}
	return reply(grants.Refuse(grants.ReasonInvalidRequest, "op", "unknown command "+c.Op.String()))
}

func base(kind events.Kind, now int64, node string, c *Command) events.Event {
	return events.Event{Kind: kind, Time: now, Node: node, Actor: c.Caller}
}

func deny(e events.Event, r grants.Reason, missing, detail string) events.Event {
	e.Decision = string(grants.Deny)
	e.Reason = string(r)
	e.Missing = missing
	e.Recovery = string(grants.RecoveryFor(r))
	e.Detail = detail
	return e
}
