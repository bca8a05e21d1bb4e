package issuer

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Fleets: spawns and restores from workers, respawns and lifts from
// operators, and the fleet listing. The state machine judges every one of
// them (fsm/fleet.go); what is checked here is the form of the request.

// spawnCommand builds an OpSpawn from a worker's spawn request.
func spawnCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.SpawnRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkID("child", r.Child, true); e != nil {
		return fsm.Command{}, e
	}
	if e := checkID("lane", r.Lane, true); e != nil {
		return fsm.Command{}, e
	}
	if e := checkID("parent_lane", r.ParentLane, false); e != nil {
		return fsm.Command{}, e
	}
	if r.TTLMillis < 0 || r.TTLMillis > api.MaxSpawnTTLMillis {
		return fsm.Command{}, invalid("ttl_ms", "must be 0 (an hour) up to %d (24h)", api.MaxSpawnTTLMillis)
	}
	if r.UserKey != "" && !validUserKey(r.UserKey) {
		return fsm.Command{}, invalid("user_key", "must be a public user nkey (U followed by 55 base32 characters, checksum included)")
	}
	for _, l := range []struct {
		field string
		v     []string
	}{{"tools", r.Tools}, {"classes", r.Classes}, {"targets", r.Targets}} {
		if len(l.v) > api.MaxSpawnScope {
			return fsm.Command{}, invalid(l.field, "at most %d entries", api.MaxSpawnScope)
		}
		for _, v := range l.v {
			if e := checkText(l.field, v, api.MaxScopeEntryLen, true); e != nil {
				return fsm.Command{}, e
			}
		}
	}
	return fsm.Command{Op: fsm.OpSpawn, Caller: worker, Key: r.Child, Lane: r.Lane, ParentLane: r.ParentLane,
		ScopeTools: r.Tools, ScopeClasses: r.Classes, ScopeTargets: r.Targets,
		TTL: r.TTLMillis * int64(time.Millisecond), UserKey: r.UserKey}, nil
}

// restoreCommand builds an OpRestore: the caller starts its next
// incarnation.
func restoreCommand(worker string, data []byte) (fsm.Command, *requestError) {
	var r api.RestoreRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	return fsm.Command{Op: fsm.OpRestore, Caller: worker}, nil
}

// maxFleetNote bounds a respawn's or a lift's note.
const maxFleetNote = 1024

func fleetNote(note string) *requestError {
	if e := checkText("note", note, maxFleetNote, false); e != nil {
		return e
	}
	if !utf8.ValidString(note) {
		return invalid("note", "not valid UTF-8")
	}
	return nil
}

// respawnCommand builds an OpRespawn from an operator's request.
func respawnCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.RespawnRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkID("worker", r.Worker, true); e != nil {
		return fsm.Command{}, e
	}
	if e := checkID("lane", r.Lane, true); e != nil {
		return fsm.Command{}, e
	}
	if e := fleetNote(r.Note); e != nil {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpRespawn, Caller: operator, Key: r.Worker, Lane: r.Lane, Note: r.Note}, nil
}

// liftCommand builds an OpLift from an operator's request.
func liftCommand(operator string, data []byte) (fsm.Command, *requestError) {
	var r api.LiftRequest
	if err := decodeStrict(data, &r); err != nil {
		return fsm.Command{}, err
	}
	if e := checkID("worker", r.Worker, true); e != nil {
		return fsm.Command{}, e
	}
	if e := fleetNote(r.Note); e != nil {
		return fsm.Command{}, e
	}
	return fsm.Command{Op: fsm.OpLift, Caller: operator, Key: r.Worker, Note: r.Note}, nil
}

// spawnLaneWidens refuses, before anything is proposed, a spawn whose
// lane is wider than its parent's under the applied policy: the recorded
// parent's lane, or the lane a root parent says it runs in. It only ever
// refuses, so a policy changing between this view and the entry's apply
// cannot widen anything: the state machine still judges the spawn, and
// every call of the child under each ancestor's lane.
func (s *Service) spawnLaneWidens(cmd *fsm.Command) (grants.Envelope, bool) {
	var field, detail, parentLane string
	s.node.View(func(st *fsm.State, _ uint64) {
		parentLane = cmd.ParentLane
		if m, ok := st.Member(cmd.Caller); ok {
			parentLane = m.Lane
		}
		if parentLane == "" {
			return
		}
		pol, _ := st.Policy()
		field, detail = pol.LaneWidens(cmd.Lane, parentLane)
	})
	if field == "" {
		return grants.Envelope{}, false
	}
	return grants.Refuse(grants.ReasonScopeWidens, field,
		fmt.Sprintf("child %s's lane %s is wider than its parent %s's lane %s: %s", cmd.Key, cmd.Lane, cmd.Caller, parentLane, detail)), true
}

func (s *Service) handleFleet(m *nats.Msg) { s.spawn(m, fleetHandler) }

// fleet answers api.SubjectFleet from the applied state.
func (s *Service) fleet(m *nats.Msg) {
	var r api.FleetRequest
	if err := decodeStrict(m.Data, &r); err != nil {
		s.respondJSON(m, api.Fleet{Error: err.Error()})
		return
	}
	var out api.Fleet
	s.node.View(func(st *fsm.State, _ uint64) { out = ListFleet(st) })
	s.respondJSON(m, out)
}

// ListFleet lists the state's spawned and respawned workers.
func ListFleet(st *fsm.State) api.Fleet {
	out := api.Fleet{Clock: st.Clock(), Workers: []api.FleetWorker{}}
	for _, w := range st.Fleet() {
		out.Workers = append(out.Workers, api.FleetWorker{
			Worker: w.Worker, Parent: w.Parent, Lane: w.Lane, Tools: w.Tools, Classes: w.Classes, Targets: w.Targets,
			IssuedAt: w.IssuedAt, ExpiresAt: w.ExpiresAt, Incarnation: w.Incarnation, Blocked: w.Blocked, Revoked: w.Revoked,
		})
	}
	return out
}
