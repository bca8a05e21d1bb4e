package events

import (
	"encoding/binary"
	"fmt"
)

// Version is the encoding version this package writes.
const Version = 1

// Counter is a revocation counter as bound by a grant or moved by a
// revocation: a key such as "worker/w1" or "source/s9" and its value.
type Counter struct {
	Key   string `json:"key"`
	Value uint64 `json:"value"`
}

// Event is one receipt. Which fields are set depends on Kind; every field is
// optional on the wire. Payloads carry ids and digests, never raw content or
// secrets (a policy document is the operator's trust root, not a secret).
type Event struct {
	Version      uint8     `json:"v"`
	Seq          uint64    `json:"seq"`
	Kind         Kind      `json:"kind"`
	RaftIndex    uint64    `json:"raft_index,omitempty"`
	Time         int64     `json:"time"`
	Prev         Hash      `json:"prev"`
	Node         string    `json:"node,omitempty"`
	GrantID      string    `json:"grant_id,omitempty"`
	Worker       string    `json:"worker,omitempty"`
	Lane         string    `json:"lane,omitempty"`
	Session      string    `json:"session,omitempty"`
	Tool         string    `json:"tool,omitempty"`
	Digest       Hash      `json:"digest,omitzero"`
	Epoch        uint64    `json:"epoch,omitempty"`
	Decision     string    `json:"decision,omitempty"`
	Reason       string    `json:"reason,omitempty"`
	Missing      string    `json:"missing,omitempty"`
	Recovery     string    `json:"recovery,omitempty"`
	IssuedAt     int64     `json:"issued_at,omitempty"`
	ExpiresAt    int64     `json:"expires_at,omitempty"`
	IdemKey      string    `json:"idempotency_key,omitempty"`
	Outcome      string    `json:"outcome,omitempty"`
	Verifier     string    `json:"verifier,omitempty"`
	RefSeq       uint64    `json:"ref_seq,omitempty"`
	Counters     []Counter `json:"counters,omitempty"`
	Cancelled    []string  `json:"cancelled,omitempty"`
	Rules        []string  `json:"rules,omitempty"`
	Target       string    `json:"target,omitempty"`
	Consequence  string    `json:"consequence,omitempty"`
	Actor        string    `json:"actor,omitempty"`
	Policy       []byte    `json:"policy,omitempty"`
	PolicyDigest Hash      `json:"policy_digest,omitzero"`
	Sources      []string  `json:"sources,omitempty"`
	Detail       string    `json:"detail,omitempty"`
	// Grounds of the policy engine (version 2 policy documents); see
	// grants.Envelope. Cwd and Resolved are the resolution context a path
	// target was canonicalized in (the grant binds them for the target
	// drift check at spend).
	ReviewID       string `json:"review_id,omitempty"`
	TargetLabel    string `json:"target_label,omitempty"`
	Surface        string `json:"surface,omitempty"`
	Operation      string `json:"operation,omitempty"`
	Instrument     string `json:"instrument,omitempty"`
	InstrumentLeft string `json:"instrument_left,omitempty"`
	Amount         uint64 `json:"amount,omitempty"`
	Bytes          uint64 `json:"bytes,omitempty"`
	LedgerKey      string `json:"ledger_key,omitempty"`
	Cwd            string `json:"cwd,omitempty"`
	Resolved       string `json:"resolved,omitempty"`
	// Provenance. A source event (KindSource) registers one content
	// source: Sources[0] is its id and the rest its origins (a derived
	// source), Channel, Scope and ContentDigest describe it, Authority is
	// the level the issuer assigned, Target is the path or tool it came
	// from, Counters the origin revocation counters it recorded. Grounds
	// on a grant decision are one line per sink field that decided it:
	// "field=<f> source=<id> authority=<level> counter=<key>=<n>
	// transform=<t>" (see fsm).
	Channel       string   `json:"channel,omitempty"`
	Authority     string   `json:"authority,omitempty"`
	ContentDigest Hash     `json:"content_digest,omitzero"`
	Scope         string   `json:"scope,omitempty"`
	Grounds       []string `json:"grounds,omitempty"`
	Hash          Hash     `json:"hash"`
}

// Field tags. Append only; never renumber or reuse. Retired tags: none.
// Tags 34-44 were added with version 2 policy documents and 45-49 with
// provenance; a decoder that predates them skips them (they still count
// towards the hash).
const (
	tagSeq          = 1
	tagKind         = 2
	tagRaftIndex    = 3
	tagTime         = 4
	tagPrev         = 5
	tagNode         = 6
	tagGrantID      = 7
	tagWorker       = 8
	tagLane         = 9
	tagSession      = 10
	tagTool         = 11
	tagDigest       = 12
	tagEpoch        = 13
	tagDecision     = 14
	tagReason       = 15
	tagMissing      = 16
	tagRecovery     = 17
	tagIssuedAt     = 18
	tagExpiresAt    = 19
	tagIdemKey      = 20
	tagOutcome      = 21
	tagVerifier     = 22
	tagRefSeq       = 23
	tagCounters     = 24
	tagCancelled    = 25
	tagRules        = 26
	tagTarget       = 27
	tagConsequence  = 28
	tagActor        = 29
	tagPolicy       = 30
	tagPolicyDigest = 31
	tagSources      = 32
	tagDetail       = 33
	tagReviewID     = 34
	tagTargetLabel  = 35
	tagSurface      = 36
	tagOperation    = 37
	tagInstrument   = 38
	tagInstLeft     = 39
	tagAmount       = 40
	tagBytes        = 41
	tagLedgerKey    = 42
	tagCwd          = 43
	tagResolved     = 44
	tagChannel      = 45
	tagAuthority    = 46
	tagContentHash  = 47
	tagScope        = 48
	tagGrounds      = 49
	tagLast         = tagGrounds // the highest tag this version knows, bar the hash
	tagHash         = 127
)

// appendBody appends the version byte and every field except the hash.
func (e *Event) appendBody(buf []byte) []byte {
	w := Writer{buf: buf}
	w.Byte(Version)
	w.Uint(tagSeq, e.Seq)
	w.Uint(tagKind, uint64(e.Kind))
	w.Uint(tagRaftIndex, e.RaftIndex)
	w.Int(tagTime, e.Time)
	w.Hash(tagPrev, e.Prev)
	w.String(tagNode, e.Node)
	w.String(tagGrantID, e.GrantID)
	w.String(tagWorker, e.Worker)
	w.String(tagLane, e.Lane)
	w.String(tagSession, e.Session)
	w.String(tagTool, e.Tool)
	w.Hash(tagDigest, e.Digest)
	w.Uint(tagEpoch, e.Epoch)
	w.String(tagDecision, e.Decision)
	w.String(tagReason, e.Reason)
	w.String(tagMissing, e.Missing)
	w.String(tagRecovery, e.Recovery)
	w.Int(tagIssuedAt, e.IssuedAt)
	w.Int(tagExpiresAt, e.ExpiresAt)
	w.String(tagIdemKey, e.IdemKey)
	w.String(tagOutcome, e.Outcome)
	w.String(tagVerifier, e.Verifier)
	w.Uint(tagRefSeq, e.RefSeq)
	var scratch [80]byte
	for _, c := range e.Counters {
		b := binary.AppendUvarint(scratch[:0], c.Value)
		b = append(b, c.Key...)
		w.key(tagCounters, wireBytes)
		w.buf = binary.AppendUvarint(w.buf, uint64(len(b)))
		w.buf = append(w.buf, b...)
	}
	w.Strings(tagCancelled, e.Cancelled)
	w.Strings(tagRules, e.Rules)
	w.String(tagTarget, e.Target)
	w.String(tagConsequence, e.Consequence)
	w.String(tagActor, e.Actor)
	w.Raw(tagPolicy, e.Policy)
	w.Hash(tagPolicyDigest, e.PolicyDigest)
	w.Strings(tagSources, e.Sources)
	w.String(tagDetail, e.Detail)
	w.String(tagReviewID, e.ReviewID)
	w.String(tagTargetLabel, e.TargetLabel)
	w.String(tagSurface, e.Surface)
	w.String(tagOperation, e.Operation)
	w.String(tagInstrument, e.Instrument)
	w.String(tagInstLeft, e.InstrumentLeft)
	w.Uint(tagAmount, e.Amount)
	w.Uint(tagBytes, e.Bytes)
	w.String(tagLedgerKey, e.LedgerKey)
	w.String(tagCwd, e.Cwd)
	w.String(tagResolved, e.Resolved)
	w.String(tagChannel, e.Channel)
	w.String(tagAuthority, e.Authority)
	w.Hash(tagContentHash, e.ContentDigest)
	w.String(tagScope, e.Scope)
	w.Strings(tagGrounds, e.Grounds)
	return w.buf
}

// Seal sets e.Version and e.Hash from the event's other fields and returns
// the canonical encoding, appended to buf.
func (e *Event) Seal(buf []byte) []byte {
	e.Version = Version
	start := len(buf)
	buf = e.appendBody(buf)
	e.Hash = Sum(buf[start:])
	w := Writer{buf: buf}
	w.Raw(tagHash, e.Hash[:])
	return w.buf
}

// Encode returns the canonical encoding of a sealed event. It recomputes
// the hash, so an Event whose Hash field was edited by hand encodes to the
// bytes it should have had; use Decode to check stored bytes.
func (e Event) Encode() []byte { return e.Seal(nil) }

// Decode parses and verifies one encoded event: canonical form, known
// version and a stored hash equal to the SHA-256 of the bytes before it.
// Unknown tags are skipped (forward compatibility); unknown kinds decode
// (an auditor reports them) but Kind.Known is false.
func Decode(b []byte) (Event, error) {
	var e Event
	if len(b) == 0 {
		return e, fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if b[0] != Version {
		return e, fmt.Errorf("%w: %d (this build reads %d)", ErrUnsupportedVersion, b[0], Version)
	}
	e.Version = b[0]
	r := NewReader(b[1:])
	var f Field
	hashAt := -1    // offset in b of the hash field's key
	var prev uint32 // tag of the previous field
	for {
		pos := r.Offset()
		if !r.Next(&f) {
			break
		}
		if hashAt >= 0 {
			r.Failf("field %d after hash", f.Tag)
			break
		}
		// The Reader allows length-delimited tags to repeat; only list
		// fields (and unknown tags, which may be lists) may do so here, or
		// one event would have several encodings.
		if f.Tag == prev && !repeatable(f.Tag) {
			r.Failf("repeated field %d", f.Tag)
			break
		}
		prev = f.Tag
		if !decodeField(r, &e, &f) {
			break
		}
		if f.Tag == tagHash {
			hashAt = 1 + pos
		}
	}
	if err := r.Err(); err != nil {
		return Event{}, err
	}
	if hashAt < 0 {
		return Event{}, fmt.Errorf("%w: missing hash field", ErrMalformed)
	}
	if got := Sum(b[:hashAt]); got != e.Hash {
		return Event{}, fmt.Errorf("%w: seq %d stored %s, computed %s", ErrHashMismatch, e.Seq, e.Hash.Short(), got.Short())
	}
	return e, nil
}

// repeatable reports whether a tag may occur several times in a row: the
// list fields, and tags this version does not know.
func repeatable(tag uint32) bool {
	switch tag {
	case tagCounters, tagCancelled, tagRules, tagSources, tagGrounds:
		return true
	}
	return tag > tagLast && tag != tagHash
}

func decodeField(r *Reader, e *Event, f *Field) bool {
	// nonEmpty rejects a present but empty singular field: the writer
	// omits empty values, so accepting one would give a second encoding.
	nonEmpty := func() bool {
		if !r.Expect(f, wireBytes) {
			return false
		}
		if len(f.Data) == 0 {
			r.Failf("empty value written for tag %d", f.Tag)
			return false
		}
		return true
	}
	str := func(dst *string) bool {
		if !nonEmpty() {
			return false
		}
		*dst = string(f.Data)
		return true
	}
	u := func(dst *uint64) bool {
		if !r.Expect(f, wireVarint) {
			return false
		}
		*dst = f.Uint
		return true
	}
	i := func(dst *int64) bool {
		if !r.Expect(f, wireVarint) {
			return false
		}
		*dst = f.Int()
		return true
	}
	h := func(dst *Hash) bool {
		if !r.Expect(f, wireBytes) {
			return false
		}
		v, err := HashFromBytes(f.Data)
		if err != nil {
			r.Failf("tag %d: %v", f.Tag, err)
			return false
		}
		if v.IsZero() {
			r.Failf("zero hash written for tag %d", f.Tag)
			return false
		}
		*dst = v
		return true
	}
	list := func(dst *[]string) bool {
		if !r.Expect(f, wireBytes) {
			return false
		}
		*dst = append(*dst, string(f.Data))
		return true
	}
	switch f.Tag {
	case tagSeq:
		return u(&e.Seq)
	case tagKind:
		var k uint64
		if !u(&k) {
			return false
		}
		if k > 0xffff {
			r.Failf("kind %d out of range", k)
			return false
		}
		e.Kind = Kind(k)
		return true
	case tagRaftIndex:
		return u(&e.RaftIndex)
	case tagTime:
		return i(&e.Time)
	case tagPrev:
		return h(&e.Prev)
	case tagNode:
		return str(&e.Node)
	case tagGrantID:
		return str(&e.GrantID)
	case tagWorker:
		return str(&e.Worker)
	case tagLane:
		return str(&e.Lane)
	case tagSession:
		return str(&e.Session)
	case tagTool:
		return str(&e.Tool)
	case tagDigest:
		return h(&e.Digest)
	case tagEpoch:
		return u(&e.Epoch)
	case tagDecision:
		return str(&e.Decision)
	case tagReason:
		return str(&e.Reason)
	case tagMissing:
		return str(&e.Missing)
	case tagRecovery:
		return str(&e.Recovery)
	case tagIssuedAt:
		return i(&e.IssuedAt)
	case tagExpiresAt:
		return i(&e.ExpiresAt)
	case tagIdemKey:
		return str(&e.IdemKey)
	case tagOutcome:
		return str(&e.Outcome)
	case tagVerifier:
		return str(&e.Verifier)
	case tagRefSeq:
		return u(&e.RefSeq)
	case tagCounters:
		if !r.Expect(f, wireBytes) {
			return false
		}
		v, n := binary.Uvarint(f.Data)
		if n <= 0 || (n > 1 && f.Data[n-1] == 0) {
			r.Failf("counter value is not a minimal varint")
			return false
		}
		e.Counters = append(e.Counters, Counter{Key: string(f.Data[n:]), Value: v})
		return true
	case tagCancelled:
		return list(&e.Cancelled)
	case tagRules:
		return list(&e.Rules)
	case tagTarget:
		return str(&e.Target)
	case tagConsequence:
		return str(&e.Consequence)
	case tagActor:
		return str(&e.Actor)
	case tagPolicy:
		if !nonEmpty() {
			return false
		}
		e.Policy = append([]byte(nil), f.Data...)
		return true
	case tagPolicyDigest:
		return h(&e.PolicyDigest)
	case tagSources:
		return list(&e.Sources)
	case tagDetail:
		return str(&e.Detail)
	case tagReviewID:
		return str(&e.ReviewID)
	case tagTargetLabel:
		return str(&e.TargetLabel)
	case tagSurface:
		return str(&e.Surface)
	case tagOperation:
		return str(&e.Operation)
	case tagInstrument:
		return str(&e.Instrument)
	case tagInstLeft:
		return str(&e.InstrumentLeft)
	case tagAmount:
		return u(&e.Amount)
	case tagBytes:
		return u(&e.Bytes)
	case tagLedgerKey:
		return str(&e.LedgerKey)
	case tagCwd:
		return str(&e.Cwd)
	case tagResolved:
		return str(&e.Resolved)
	case tagChannel:
		return str(&e.Channel)
	case tagAuthority:
		return str(&e.Authority)
	case tagContentHash:
		return h(&e.ContentDigest)
	case tagScope:
		return str(&e.Scope)
	case tagGrounds:
		return list(&e.Grounds)
	case tagHash:
		return h(&e.Hash)
	default:
		// Unknown tag from a newer writer: skipped, still covered by the hash.
		return true
	}
}
