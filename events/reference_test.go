package events

// The decoder (and field reader) as written before Decode was optimized
// (one string per field, closures per field). It is kept, unchanged but for its name, as
// the reference the fuzz targets and TestDecodeMatchesReference compare
// Decode and DecodeInto against: the faster decoder must accept exactly the
// same inputs, produce the same events and fail with the same errors.

import (
	"encoding/binary"
	"fmt"
)

// refDecode is the original Decode: it parses and verifies one encoded
// event: canonical form, known version and a stored hash equal to the
// SHA-256 of the bytes before it.
// Unknown tags are skipped (forward compatibility); unknown kinds decode
// (an auditor reports them) but Kind.Known is false.
func refDecode(b []byte) (Event, error) {
	var e Event
	if len(b) == 0 {
		return e, fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if b[0] != Version {
		return e, fmt.Errorf("%w: %d (this build reads %d)", ErrUnsupportedVersion, b[0], Version)
	}
	e.Version = b[0]
	r := &refReader{data: b[1:]}
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
		if !refDecodeField(r, &e, &f) {
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

func refDecodeField(r *refReader, e *Event, f *Field) bool {
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
	// Tags added after the optimized decoder was written, decoded here
	// the plain way.
	case tagCharged, tagModelMade, tagRouteStale, tagBlocked:
		if !r.Expect(f, wireVarint) {
			return false
		}
		if f.Uint != 1 {
			r.Failf("tag %d: flag value %d", f.Tag, f.Uint)
			return false
		}
		switch f.Tag {
		case tagCharged:
			e.Charged = true
		case tagModelMade:
			e.ModelMade = true
		case tagBlocked:
			e.Blocked = true
		default:
			e.RouteStale = true
		}
		return true
	case tagLedgerUntil:
		return i(&e.LedgerUntil)
	case tagInstUntil:
		return i(&e.InstrumentUntil)
	case tagQuotas:
		if !r.Expect(f, wireBytes) {
			return false
		}
		start, until, n, ok := decodeQuotaHead(f.Data)
		if !ok {
			r.Failf("quota window times are not minimal varints")
			return false
		}
		e.Quotas = append(e.Quotas, QuotaWindow{Key: string(f.Data[n:]), Start: start, Until: until})
		return true
	case tagSourceID:
		return str(&e.SourceID)
	case tagOrigins:
		return list(&e.Origins)
	case tagSourcePath:
		return str(&e.SourcePath)
	case tagArtPath:
		return str(&e.ArtifactPath)
	case tagArtVersion:
		return u(&e.ArtifactVersion)
	case tagArtDigest:
		return h(&e.ArtifactDigest)
	case tagCaption:
		return str(&e.Caption)
	case tagTransition:
		return str(&e.Transition)
	case tagDestination:
		return str(&e.Destination)
	case tagReviewerRole:
		return str(&e.ReviewerRole)
	case tagReplyChannel:
		return str(&e.ReplyChannel)
	case tagReplySender:
		return str(&e.ReplySender)
	case tagReplyAt:
		return i(&e.ReplyAt)
	case tagReplyText:
		return str(&e.ReplyText)
	case tagCandidates:
		return list(&e.Candidates)
	case tagRoute:
		return str(&e.Route)
	case tagRouteGen:
		return u(&e.RouteGen)
	case tagPrevOwner:
		return str(&e.PrevOwner)
	case tagPrevGen:
		return u(&e.PrevGen)
	case tagRoutes:
		return list(&e.Routes)
	case tagCaseID:
		return str(&e.CaseID)
	case tagGlassScope:
		return str(&e.GlassScope)
	case tagParent:
		return str(&e.Parent)
	case tagIncarnation:
		return u(&e.Incarnation)
	case tagScopeTools:
		return list(&e.ScopeTools)
	case tagScopeClasses:
		return list(&e.ScopeClasses)
	case tagScopeTargets:
		return list(&e.ScopeTargets)
	case tagReviews:
		return list(&e.Reviews)
	case tagWorkers:
		return list(&e.Workers)
	case tagParentLane:
		return str(&e.ParentLane)
	case tagUserKey:
		return str(&e.UserKey)
	case tagHash:
		return h(&e.Hash)
	default:
		// Unknown tag from a newer writer: skipped, still covered by the hash.
		return true
	}
}

// refReader is Reader as it was. It iterates the fields of an encoding in
// order, enforcing canonical form: ascending tags (repeats allowed only for
// length-delimited fields), minimal varints, no zero-valued fields and
// bounded lengths.
type refReader struct {
	data    []byte
	off     int
	lastTag uint32
	lastWT  uint8
	err     error
}

// Offset is the position of the next unread byte.
func (r *refReader) Offset() int { return r.off }

// Err returns the first decoding error.
func (r *refReader) Err() error { return r.err }

func (r *refReader) fail(format string, args ...any) bool {
	r.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
	return false
}

func (r *refReader) uvarint() (uint64, bool) {
	v, n := binary.Uvarint(r.data[r.off:])
	if n <= 0 {
		return 0, r.fail("bad varint")
	}
	// Reject non-minimal encodings: they would give one value two encodings.
	if n > 1 && r.data[r.off+n-1] == 0 {
		return 0, r.fail("non-minimal varint")
	}
	r.off += n
	return v, true
}

// Next decodes the next field into f. It returns false at the end of input
// or on error (check Err).
func (r *refReader) Next(f *Field) bool {
	if r.err != nil || r.off >= len(r.data) {
		return false
	}
	k, ok := r.uvarint()
	if !ok {
		return false
	}
	if k>>3 > 1<<24 {
		return r.fail("tag %d out of range", k>>3)
	}
	tag, wt := uint32(k>>3), uint8(k&7)
	if tag == 0 {
		return r.fail("tag 0")
	}
	switch {
	case tag < r.lastTag:
		return r.fail("tag %d after tag %d", tag, r.lastTag)
	case tag == r.lastTag && (wt != wireBytes || r.lastWT != wireBytes):
		return r.fail("repeated scalar tag %d", tag)
	}
	r.lastTag, r.lastWT = tag, wt
	f.Tag, f.Wire, f.Uint, f.Data = tag, wt, 0, nil
	switch wt {
	case wireVarint:
		v, ok := r.uvarint()
		if !ok {
			return false
		}
		if v == 0 {
			return r.fail("zero value written for tag %d", tag)
		}
		f.Uint = v
	case wireBytes:
		n, ok := r.uvarint()
		if !ok {
			return false
		}
		if n > MaxFieldLen || n > uint64(len(r.data)-r.off) {
			return r.fail("field %d length %d exceeds input", tag, n)
		}
		f.Data = r.data[r.off : r.off+int(n)]
		r.off += int(n)
	default:
		return r.fail("unknown wire type %d for tag %d", wt, tag)
	}
	return true
}

// Expect checks that field f has wire type wt; it records an error otherwise.
func (r *refReader) Expect(f *Field, wt uint8) bool {
	if f.Wire != wt {
		return r.fail("tag %d has wire type %d, want %d", f.Tag, f.Wire, wt)
	}
	return true
}

// Failf records a semantic decoding error (for example an empty element
// where one is not allowed) and stops iteration.
func (r *refReader) Failf(format string, args ...any) { r.fail(format, args...) }
