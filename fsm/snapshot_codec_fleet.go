package fsm

import (
	"fmt"
	"sort"

	"github.com/writ-dev/writ/events"
)

// Fleet records in a snapshot: one nested record per spawned or
// respawned worker (tag stFleet), in id order, after the route records.
// A state that never saw a spawn or a respawn writes none, so its
// snapshot and digest are what earlier builds wrote. Incarnations are
// revocation counters and travel with them.

// stFleet is the snapshot tag of fleet records (snapshot sections 30-33
// are the fleet's).
const stFleet = 30

// stWorkerKey is the snapshot tag of the NATS user keys spawns recorded
// (receipt format level 12): one nested record per keyed worker, in id
// order, after the fleet records. A state without keys writes none.
const stWorkerKey = 32

// Worker key record tags (append only).
const (
	wkWorker = iota + 1
	wkKey
)

// writeWorkerKeys appends the worker key records to w.
func (s *State) writeWorkerKeys(w *events.Writer, scratch []byte) []byte {
	var ids []string
	for id, m := range s.fleet {
		if m.UserKey != "" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		rw := events.NewWriter(scratch[:0])
		rw.String(wkWorker, id)
		rw.String(wkKey, s.fleet[id].UserKey)
		scratch = rw.Bytes()
		writeRecord(w, stWorkerKey, scratch)
	}
	return scratch
}

// restoreWorkerKey decodes one worker key record, strictly: known tags,
// a recorded worker without a key yet, a well-formed key, ids ascending.
func (s *State) restoreWorkerKey(b []byte, last *string) error {
	var id, key string
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case wkWorker:
			d.str(&id)
		case wkKey:
			d.str(&key)
		default:
			d.err = fmt.Errorf("unknown worker key record tag %d", f.Tag)
		}
	}
	if err := d.done(rd); err != nil {
		return err
	}
	m := s.fleet[id]
	switch {
	case m == nil:
		return fmt.Errorf("worker key record for %q, which the fleet does not record", id)
	case !ValidUserKey(key):
		return fmt.Errorf("worker key record for %q: malformed key %q", id, key)
	case m.UserKey != "" || *last != "" && id <= *last:
		return fmt.Errorf("worker key record %q is out of order or repeated", id)
	case s.userKeys[key] != "":
		return fmt.Errorf("worker key record %q: key %s is recorded for %q too", id, key, s.userKeys[key])
	}
	*last = id
	m.UserKey = key
	s.recordUserKey(key, id)
	return nil
}

// Fleet record tags (append only).
const (
	flID = iota + 1
	flParent
	flParentLane
	flLane
	flTool    // one per tool pattern
	flClass   // one per consequence class
	flTarget  // one per target pattern
	flIssued  // issued at
	flExpires // expires at (absent: no end)
	flBlocked // 1 when approval-blocked
	flSeq
	flScoped // bit 0: tools restricted, bit 1: classes, bit 2: targets
)

// writeFleet appends the fleet records to w.
func (s *State) writeFleet(w *events.Writer, scratch []byte) []byte {
	if len(s.fleet) == 0 {
		return scratch
	}
	ids := make([]string, 0, len(s.fleet))
	for id := range s.fleet {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := s.fleet[id]
		rw := events.NewWriter(scratch[:0])
		rw.String(flID, m.ID)
		rw.String(flParent, m.Parent)
		rw.String(flParentLane, m.ParentLane)
		rw.String(flLane, m.Lane)
		rw.Strings(flTool, m.Tools)
		rw.Strings(flClass, m.Classes)
		rw.Strings(flTarget, m.Targets)
		rw.Int(flIssued, m.IssuedAt)
		rw.Int(flExpires, m.ExpiresAt)
		rw.Bool(flBlocked, m.Blocked)
		rw.Uint(flSeq, m.Seq)
		var scoped uint64
		for i, l := range [][]string{m.Tools, m.Classes, m.Targets} {
			if l != nil {
				scoped |= 1 << i
			}
		}
		rw.Uint(flScoped, scoped)
		scratch = rw.Bytes()
		writeRecord(w, stFleet, scratch)
	}
	return scratch
}

// restoreMember decodes one fleet record, strictly (known tags, an id, a
// lane, ids ascending).
func (s *State) restoreMember(b []byte, last *string) error {
	m := &member{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	var scoped uint64
	add := func(dst *[]string) {
		var v string
		d.str(&v)
		*dst = append(*dst, v)
	}
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case flID:
			d.str(&m.ID)
		case flParent:
			d.shared(&m.Parent, &s.intern)
		case flParentLane:
			d.shared(&m.ParentLane, &s.intern)
		case flLane:
			d.shared(&m.Lane, &s.intern)
		case flTool:
			add(&m.Tools)
		case flClass:
			add(&m.Classes)
		case flTarget:
			add(&m.Targets)
		case flIssued:
			d.int(&m.IssuedAt)
		case flExpires:
			d.int(&m.ExpiresAt)
		case flBlocked:
			var v uint64
			d.uint(&v)
			if d.err == nil && v != 1 {
				d.err = fmt.Errorf("fleet flag value %d", v)
			}
			m.Blocked = v == 1
		case flSeq:
			d.uint(&m.Seq)
		case flScoped:
			d.uint(&scoped)
		default:
			d.err = fmt.Errorf("unknown fleet record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	// A restricted list that is empty restricts to nothing; keep it
	// non-nil so that it still restricts.
	for i, l := range []*[]string{&m.Tools, &m.Classes, &m.Targets} {
		if scoped&(1<<i) != 0 && *l == nil {
			*l = []string{}
		} else if scoped&(1<<i) == 0 && *l != nil && err == nil {
			err = fmt.Errorf("fleet record %q lists a scope it marks unrestricted", m.ID)
		}
	}
	switch {
	case err != nil:
		return err
	case scoped > 7:
		return fmt.Errorf("fleet record %q: scope bits %d", m.ID, scoped)
	case m.ID == "" || m.Lane == "" || m.Seq == 0:
		return fmt.Errorf("fleet record %q without an id, a lane or a sequence", m.ID)
	case *last != "" && m.ID <= *last:
		return fmt.Errorf("fleet record %q is out of order or repeated", m.ID)
	}
	*last = m.ID
	s.fleet[m.ID] = m
	return nil
}
