package fsm

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

const snapshotVersion = 1

// Snapshot field tags (append only). Tags below stPublished form the
// authority part that Digest covers; the rest is publication bookkeeping.
const (
	stClock     = 1
	stEpoch     = 2
	stPolicy    = 3
	stCounter   = 4
	stBarred    = 5
	stGrant     = 6
	stIdem      = 7
	stChainSeq  = 8
	stChainHead = 9
	stPublished = 20
	stOutbox    = 21
)

// Grant field tags inside a snapshot (append only).
const (
	gtID = iota + 1
	gtNode
	gtWorker
	gtLane
	gtSession
	gtTool
	gtDigest
	gtEpoch
	gtCounter
	gtSource
	gtIssuedAt
	gtExpiresAt
	gtIdemKey
	gtPermitSeq
	gtStatus
	gtAttemptKey
	gtAttemptSeq
	gtOutcome
	gtVerifier
	gtEffectSeq
	gtRevokedSeq
)

// Idempotency record tags (append only).
const (
	itWorker = iota + 1
	itKey
	itTool
	itDigest
	itSeq
	itGrantID
	itReason
	itMissing
	itDetail
	itRule
	itEpoch
	itUntil
)

// Outbox entry tags (append only).
const (
	otSeq = iota + 1
	otSubject
	otData
)

func writeCounter(w *events.Writer, tag uint32, c events.Counter) {
	b := binary.AppendUvarint(nil, c.Value)
	w.Strings(tag, []string{string(append(b, c.Key...))})
}

// authority encodes the authority part of the state, deterministically.
func (s *State) authority(w *events.Writer) {
	w.Int(stClock, s.clock)
	w.Uint(stEpoch, s.epoch)
	if s.policy != nil {
		w.Raw(stPolicy, s.policy.Canonical())
	}
	for _, c := range s.counters.Sorted() {
		writeCounter(w, stCounter, c)
	}
	barred := make([]string, 0, len(s.barred))
	for id := range s.barred {
		barred = append(barred, id)
	}
	sort.Strings(barred)
	w.Strings(stBarred, barred)

	ids := make([]string, 0, len(s.grants))
	for id := range s.grants {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var scratch []byte
	for _, id := range ids {
		scratch = encodeGrant(scratch[:0], s.grants[id])
		w.Strings(stGrant, []string{string(scratch)})
	}
	keys := make([]idemID, 0, len(s.idem))
	for k := range s.idem {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Worker != keys[j].Worker {
			return keys[i].Worker < keys[j].Worker
		}
		return keys[i].Key < keys[j].Key
	})
	for _, k := range keys {
		scratch = encodeIdem(scratch[:0], k, s.idem[k])
		w.Strings(stIdem, []string{string(scratch)})
	}
	w.Uint(stChainSeq, s.chain.Seq)
	w.Hash(stChainHead, s.chain.Head)
}

func encodeGrant(buf []byte, g *grants.Grant) []byte {
	w := events.NewWriter(buf)
	w.String(gtID, g.ID)
	w.String(gtNode, g.Node)
	w.String(gtWorker, g.Worker)
	w.String(gtLane, g.Lane)
	w.String(gtSession, g.Session)
	w.String(gtTool, g.Tool)
	w.Hash(gtDigest, g.Digest)
	w.Uint(gtEpoch, g.Epoch)
	for _, c := range g.Counters {
		writeCounter(w, gtCounter, c)
	}
	w.Strings(gtSource, g.Sources)
	w.Int(gtIssuedAt, g.IssuedAt)
	w.Int(gtExpiresAt, g.ExpiresAt)
	w.String(gtIdemKey, g.IdemKey)
	w.Uint(gtPermitSeq, g.PermitSeq)
	w.Uint(gtStatus, uint64(g.Status))
	w.String(gtAttemptKey, g.AttemptKey)
	w.Uint(gtAttemptSeq, g.AttemptSeq)
	w.String(gtOutcome, g.Outcome)
	w.String(gtVerifier, g.Verifier)
	w.Uint(gtEffectSeq, g.EffectSeq)
	w.Uint(gtRevokedSeq, g.RevokedSeq)
	return w.Bytes()
}

func encodeIdem(buf []byte, k idemID, r *idemRecord) []byte {
	w := events.NewWriter(buf)
	w.String(itWorker, k.Worker)
	w.String(itKey, k.Key)
	w.String(itTool, r.Tool)
	w.Hash(itDigest, r.Digest)
	w.Uint(itSeq, r.Seq)
	w.String(itGrantID, r.GrantID)
	w.String(itReason, string(r.Reason))
	w.String(itMissing, r.Missing)
	w.String(itDetail, r.Detail)
	w.Strings(itRule, r.Rules)
	w.Uint(itEpoch, r.Epoch)
	w.Int(itUntil, r.Until)
	return w.Bytes()
}

// Snapshot returns the canonical encoding of the whole state.
func (s *State) Snapshot() []byte {
	w := events.NewWriter(make([]byte, 0, 4096+len(s.grants)*256))
	w.Byte(snapshotVersion)
	s.authority(w)
	w.Uint(stPublished, s.published)
	var scratch []byte
	for _, p := range s.outbox {
		ew := events.NewWriter(scratch[:0])
		ew.Uint(otSeq, p.Seq)
		ew.String(otSubject, p.Subject)
		ew.Raw(otData, p.Data)
		scratch = ew.Bytes()
		w.Strings(stOutbox, []string{string(scratch)})
	}
	return w.Bytes()
}

// Digest is SHA-256 over the authority part of the state (clock, epoch,
// policy, counters, bars, grants, idempotency records, chain head). It
// excludes the outbox, so an issuer and an auditor that rebuilt state from
// the receipt stream agree on it.
func (s *State) Digest() events.Hash {
	w := events.NewWriter(make([]byte, 0, 4096+len(s.grants)*256))
	s.authority(w)
	return events.Sum(w.Bytes())
}

// Restore decodes a snapshot into a fresh state. On error nothing is
// returned; the caller keeps its old state.
func Restore(data []byte) (*State, error) {
	if len(data) == 0 || data[0] != snapshotVersion {
		return nil, fmt.Errorf("%w: missing or unsupported version byte", ErrBadSnapshot)
	}
	s := New()
	r := events.NewReader(data[1:])
	var f events.Field
	var err error
	for err == nil && r.Next(&f) {
		switch f.Tag {
		case stClock:
			s.clock = f.Int()
		case stEpoch:
			s.epoch = f.Uint
		case stPolicy:
			var p *policy.Policy
			if p, err = policy.Parse(f.Data); err == nil {
				s.policy, s.polDigest = p, events.Sum(f.Data)
			}
		case stCounter:
			var c events.Counter
			if c, err = decodeCounter(f.Data); err == nil {
				s.counters.Set(c.Key, c.Value)
			}
		case stBarred:
			s.barred[string(f.Data)] = true
		case stGrant:
			var g *grants.Grant
			if g, err = decodeGrant(f.Data); err == nil {
				if s.grants[g.ID] != nil {
					err = fmt.Errorf("duplicate grant %s", g.ID)
					break
				}
				s.addGrant(g)
			}
		case stIdem:
			var k idemID
			var rec *idemRecord
			if k, rec, err = decodeIdem(f.Data); err == nil {
				s.addIdem(k, rec)
			}
		case stChainSeq:
			s.chain.Seq = f.Uint
		case stChainHead:
			s.chain.Head, err = events.HashFromBytes(f.Data)
		case stPublished:
			s.published = f.Uint
		case stOutbox:
			var p Pending
			if p, err = decodePending(f.Data); err == nil {
				s.outbox = append(s.outbox, p)
			}
		}
	}
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	heap.Init(&s.expiry)
	return s, nil
}

func decodeCounter(b []byte) (events.Counter, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return events.Counter{}, fmt.Errorf("bad counter")
	}
	return events.Counter{Key: string(b[n:]), Value: v}, nil
}

func decodeGrant(b []byte) (*grants.Grant, error) {
	g := &grants.Grant{}
	r := events.NewReader(b)
	var f events.Field
	var err error
	for err == nil && r.Next(&f) {
		switch f.Tag {
		case gtID:
			g.ID = string(f.Data)
		case gtNode:
			g.Node = string(f.Data)
		case gtWorker:
			g.Worker = string(f.Data)
		case gtLane:
			g.Lane = string(f.Data)
		case gtSession:
			g.Session = string(f.Data)
		case gtTool:
			g.Tool = string(f.Data)
		case gtDigest:
			g.Digest, err = events.HashFromBytes(f.Data)
		case gtEpoch:
			g.Epoch = f.Uint
		case gtCounter:
			var c events.Counter
			if c, err = decodeCounter(f.Data); err == nil {
				g.Counters = append(g.Counters, c)
			}
		case gtSource:
			g.Sources = append(g.Sources, string(f.Data))
		case gtIssuedAt:
			g.IssuedAt = f.Int()
		case gtExpiresAt:
			g.ExpiresAt = f.Int()
		case gtIdemKey:
			g.IdemKey = string(f.Data)
		case gtPermitSeq:
			g.PermitSeq = f.Uint
		case gtStatus:
			g.Status = grants.Status(f.Uint)
		case gtAttemptKey:
			g.AttemptKey = string(f.Data)
		case gtAttemptSeq:
			g.AttemptSeq = f.Uint
		case gtOutcome:
			g.Outcome = string(f.Data)
		case gtVerifier:
			g.Verifier = string(f.Data)
		case gtEffectSeq:
			g.EffectSeq = f.Uint
		case gtRevokedSeq:
			g.RevokedSeq = f.Uint
		}
	}
	if err == nil {
		err = r.Err()
	}
	if err == nil && (g.ID == "" || g.Status == 0 || g.Status > grants.StatusRevoked) {
		err = fmt.Errorf("grant %q has no id or a bad status", g.ID)
	}
	return g, err
}

func decodeIdem(b []byte) (idemID, *idemRecord, error) {
	var k idemID
	rec := &idemRecord{}
	r := events.NewReader(b)
	var f events.Field
	var err error
	for err == nil && r.Next(&f) {
		switch f.Tag {
		case itWorker:
			k.Worker = string(f.Data)
		case itKey:
			k.Key = string(f.Data)
		case itTool:
			rec.Tool = string(f.Data)
		case itDigest:
			rec.Digest, err = events.HashFromBytes(f.Data)
		case itSeq:
			rec.Seq = f.Uint
		case itGrantID:
			rec.GrantID = string(f.Data)
		case itReason:
			rec.Reason = grants.Reason(f.Data)
		case itMissing:
			rec.Missing = string(f.Data)
		case itDetail:
			rec.Detail = string(f.Data)
		case itRule:
			rec.Rules = append(rec.Rules, string(f.Data))
		case itEpoch:
			rec.Epoch = f.Uint
		case itUntil:
			rec.Until = f.Int()
		}
	}
	if err == nil {
		err = r.Err()
	}
	return k, rec, err
}

func decodePending(b []byte) (Pending, error) {
	var p Pending
	r := events.NewReader(b)
	var f events.Field
	for r.Next(&f) {
		switch f.Tag {
		case otSeq:
			p.Seq = f.Uint
		case otSubject:
			p.Subject = string(f.Data)
		case otData:
			p.Data = append([]byte(nil), f.Data...)
		}
	}
	return p, r.Err()
}
