package fsm

// FreezeMirror is Freeze for a caller that freezes the same state again
// and again, such as a status endpoint that reports the state digest: it
// returns the same view Freeze would, but copies only the grants and
// idempotency records added, changed or removed since its previous call,
// where Freeze copies all of them (at 20,000 live grants, ~10 ms under
// the caller's lock for the grants and a few more for the records,
// against a fraction of a millisecond for the rest).
//
// The state keeps its copies (the mirror) between calls and, from the
// first call on, notes the key of every grant and record Apply or Evolve
// adds, changes or removes. When more changed than the mirror holds,
// keeping it costs more than it saves: the state drops the mirror and its
// notes, and the next call copies everything again.
//
// The caller must hold whatever serialises access to s for reading (as
// for Freeze), and calls must not overlap: FreezeMirror updates the
// mirror, so at most one caller may use it at a time, and the Frozen it
// returns is valid only until the next call (Freeze's may be kept).
func (s *State) FreezeMirror() Frozen {
	if s.mirror == nil || s.notes == nil {
		f := s.Freeze().s
		s.mirror = f
		s.notes = &mirrorNotes{grants: map[string]struct{}{}, idem: map[idemID]struct{}{}}
		return Frozen{s: f}
	}
	gm, im := s.mirror.grants, s.mirror.idem
	for id := range s.notes.grants {
		if g := s.grants[id]; g != nil {
			c := *g
			gm[id] = &c
		} else {
			delete(gm, id)
		}
	}
	for k := range s.notes.idem {
		if r := s.idem[k]; r != nil {
			im[k] = r // never changed once in the map
		} else {
			delete(im, k)
		}
	}
	clear(s.notes.grants)
	clear(s.notes.idem)
	f := s.freezeShared()
	f.grants, f.idem = gm, im
	s.mirror = f
	return Frozen{s: f}
}

// mirrorNotes are the keys changed since the last FreezeMirror.
type mirrorNotes struct {
	grants map[string]struct{}
	idem   map[idemID]struct{}
}

// touchGrant notes that the grant id was added, changed or removed, while
// FreezeMirror keeps a mirror.
func (s *State) touchGrant(id string) {
	if s.notes != nil {
		s.notes.grants[id] = struct{}{}
		s.boundNotes()
	}
}

// touchIdem notes that the idempotency record k was added or removed,
// while FreezeMirror keeps a mirror.
func (s *State) touchIdem(k idemID) {
	if s.notes != nil {
		s.notes.idem[k] = struct{}{}
		s.boundNotes()
	}
}

// boundNotes drops the mirror once more changed than it holds.
func (s *State) boundNotes() {
	n := len(s.notes.grants) + len(s.notes.idem)
	if n > max(mirrorMinChanges, len(s.mirror.grants)+len(s.mirror.idem)) {
		s.mirror, s.notes = nil, nil
	}
}

// mirrorMinChanges is the number of changes a mirror always tolerates,
// however little it holds.
const mirrorMinChanges = 1024
