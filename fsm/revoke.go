package fsm

import (
	"fmt"
	"sort"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/revocation"
)

// Revocation and reinstatement: Decide bumps a counter (cancelling a
// revoked worker's outstanding grants) or lifts a bar, and Evolve records
// the counter, the bar and the cancelled grants.

func decideRevoke(s *State, now int64, node string, c *Command) verdict {
	scope, id, err := revocation.ParseKey(c.Key)
	if err == nil && scope == revocation.ScopeIncarnation {
		// Only the state machine moves an incarnation (restore, respawn):
		// refused as it was before the scope existed.
		err = fmt.Errorf("%w: unknown scope %q in %q", revocation.ErrBadKey, scope, c.Key)
	}
	if err != nil {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "key", err.Error()))
	}
	e := base(events.KindRevoke, now, node, c)
	e.Decision = string(grants.Permit)
	e.Counters = []events.Counter{{Key: c.Key, Value: s.counters.Get(c.Key) + 1}}
	if scope == revocation.ScopeWorker {
		e.Worker = id
		e.Cancelled = s.outstanding(id, now)
		if s.WritesRoutes() {
			e.Routes = s.endLeasesOf(id, now)
		}
		if s.WritesFleet() {
			// The worker's whole subtree, in this one entry.
			s.revokeSubtree(&e, now)
		}
	}
	return record(e)
}

// outstanding returns the ids of a worker's unspent, unexpired grants at
// control-plane time now, sorted. An expired grant is not outstanding: it
// can no longer be spent, so a revocation has nothing to cancel.
func (s *State) outstanding(worker string, now int64) []string {
	var ids []string
	if s.byWorker == nil {
		// Not indexed (a state only Evolve has moved): look at every grant.
		for id, g := range s.grants {
			if g.Worker == worker && g.Status == grants.StatusPermitted && now < g.ExpiresAt {
				ids = append(ids, id)
			}
		}
	}
	for g := range s.byWorker[worker].ids() {
		// The set holds exactly the worker's grants in s.grants (see
		// putGrant and dropGrant); the lookup only double-checks.
		if s.grants[g.ID] == g && g.Worker == worker && g.Status == grants.StatusPermitted && now < g.ExpiresAt {
			ids = append(ids, g.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// evolveRevoke moves the event's counters, bars a revoked worker (and
// drops its reviews and approvals) and revokes the grants it cancelled.
func (s *State) evolveRevoke(e *events.Event) {
	for _, c := range e.Counters {
		s.counters.Set(c.Key, c.Value)
		if scope, id, err := revocation.ParseKey(c.Key); err == nil && scope == revocation.ScopeWorker {
			s.barred[id] = true
			s.dropReviewsOf(id)
		}
	}
	s.evolveRevokedRoutes(e)
	for _, id := range e.Cancelled {
		if g := s.grants[id]; g != nil && g.Status == grants.StatusPermitted {
			g.Status, g.RevokedSeq = grants.StatusRevoked, e.Seq
			s.touchGrant(g.ID)
		}
	}
}

func decideReinstate(s *State, now int64, node string, c *Command) verdict {
	if c.Key == "" {
		return reply(grants.Refuse(grants.ReasonInvalidRequest, "worker", "worker id is required"))
	}
	if !s.barred[c.Key] {
		return reply(grants.Envelope{Decision: grants.Permit, Detail: "worker " + c.Key + " is not revoked"})
	}
	e := base(events.KindReinstate, now, node, c)
	e.Decision = string(grants.Permit)
	e.Worker = c.Key
	return record(e)
}

// evolveReinstate lifts a worker's bar.
func (s *State) evolveReinstate(e *events.Event) { delete(s.barred, e.Worker) }
