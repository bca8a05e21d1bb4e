package fsm

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// Policy epochs: Decide checks an OpSetPolicy document and emits its
// canonical form; Evolve parses that form and puts it in force.

func decideSetPolicy(s *State, now int64, node string, c *Command) verdict {
	p, err := policy.Parse(c.Policy)
	if err != nil {
		// The state machine's answer names the first problem, as it always
		// has (its answers are pinned); the issuer refuses a bad document
		// before proposing it, with every problem listed.
		var ve *policy.ValidationError
		if errors.As(err, &ve) {
			err = ve.Problems[0]
		}
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "policy", err.Error()))
	}
	// The epoch event carries the canonical form and Evolve parses that, so
	// the canonical form must itself parse, to the same canonical form.
	// Otherwise Decide would emit an event Evolve refuses (for example a
	// document near the size limit whose canonical form, with HTML-escaped
	// or U+FFFD-replaced characters, is over it).
	canon := p.Canonical()
	if p2, err := policy.Parse(canon); err != nil || !bytes.Equal(p2.Canonical(), canon) {
		detail := "canonical form does not re-parse to itself"
		if err != nil {
			detail = "canonical form does not parse: " + err.Error()
		}
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "policy", detail))
	}
	e := base(events.KindEpoch, now, node, c)
	e.Decision = string(grants.Permit)
	e.Epoch = s.epoch + 1
	e.Policy = canon
	e.PolicyDigest = events.Sum(e.Policy)
	return record(e)
}

// epochPolicy parses the policy an epoch event carries; Evolve refuses
// the event (the state unchanged) when it does not parse.
func epochPolicy(e *events.Event) (*policy.Policy, error) {
	p, err := policy.Parse(e.Policy)
	if err != nil {
		return nil, fmt.Errorf("%w: seq %d: %v", ErrReplay, e.Seq, err)
	}
	return p, nil
}

// evolveEpoch puts the epoch's policy (parsed by epochPolicy) in force.
func (s *State) evolveEpoch(e *events.Event, pol *policy.Policy) {
	// The digest of what is in force, computed as Restore computes it
	// (Decide's events carry the same value in PolicyDigest).
	s.epoch, s.policy, s.polDigest = e.Epoch, pol, events.Sum(pol.Canonical())
}
