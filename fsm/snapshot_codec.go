package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/revocation"
)

const snapshotVersion = 1

// Snapshot field tags (append only). Tags below stPublished, the
// plain-text replies (stReply) and the route records (stRoute, written
// last) form the authority part that Digest covers; the rest is
// publication bookkeeping.
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
	stLedger    = 10 // effect-ledger entries, by key
	stPreauth   = 11 // preauthorization consumption, by id
	stQuota     = 12 // quota windows, by key
	stSource    = 13 // the source registry, by id
	stReview    = 14 // open reviews, by id
	stApproval  = 15 // approvals, by the call they cover
	stReply     = 23 // plain-text replies already decoded, by key (reviews as decision records)
	stPublished = 20
	stOutbox    = 21
	// The receipt format level (see ReceiptFormat), written only once
	// raised above ReceiptFormatLegacy: a snapshot without it (any
	// written before levels existed) restores at the legacy level.
	stFormat = 22
	// Route leases, by route name (snapshot_codec_route.go). Written after
	// the bookkeeping, since fields come in ascending tag order, and part
	// of the authority nonetheless: Digest covers them.
	stRoute = 28
	// The route generation high-water mark (route.go), written after the
	// route records and only once a record was forgotten: a state that
	// never forgot one encodes, and digests, as earlier builds wrote it.
	stRouteFloor = 29
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
	gtSurface
	gtOperation
	gtConsequence
	gtTarget
	gtTargetLabel
	gtCwd
	gtResolved
	gtLedgerKey
	gtInstrument
	gtInstrumentLeft
	gtAmount
	gtBytes
	gtRule
	gtRoute
	gtRouteGen
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
	itDecision
	itReviewID
	itGrounds
)

// Usage record tags (append only): effect-ledger entries, preauthorization
// consumption and quota windows share one layout; unused fields are zero.
const (
	utKey = iota + 1
	utCount
	utAmount
	utBytes
	utStart
	utUntil
)

// Outbox entry tags (append only).
const (
	otSeq = iota + 1
	otSubject
	otData
)

// writeRecord writes b as one length-delimited field, empty or not: the
// bytes w.Strings(tag, []string{string(b)}) writes, without the copies.
func writeRecord(w *events.Writer, tag uint32, b []byte) {
	if len(b) == 0 {
		w.Strings(tag, []string{""})
		return
	}
	w.Raw(tag, b)
}

func writeCounter(w *events.Writer, tag uint32, c events.Counter) {
	var arr [64]byte
	b := binary.AppendUvarint(arr[:0], c.Value)
	writeRecord(w, tag, append(b, c.Key...))
}

// authority encodes the authority part of the state, deterministically.
func (s *State) authority(w *events.Writer) {
	s.authorityHead(w)
	var scratch []byte
	for _, id := range sortedGrantIDs(s.grants) {
		scratch = encodeGrant(scratch[:0], s.grants[id])
		writeRecord(w, stGrant, scratch)
	}
	for _, k := range sortedIdemKeys(s.idem) {
		scratch = encodeIdem(scratch[:0], k, s.idem[k])
		writeRecord(w, stIdem, scratch)
	}
	s.authorityTail(w, scratch)
}

// authorityHead writes what authority writes before the grants.
func (s *State) authorityHead(w *events.Writer) {
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
}

// authorityTail writes what authority writes after the idempotency
// records.
func (s *State) authorityTail(w *events.Writer, scratch []byte) {
	w.Uint(stChainSeq, s.chain.Seq)
	w.Hash(stChainHead, s.chain.Head)
	for _, k := range sortedKeys(s.ledger) {
		e := s.ledger[k]
		scratch = encodeUsage(scratch[:0], k, e.Count, 0, 0, 0, e.Until)
		writeRecord(w, stLedger, scratch)
	}
	for _, k := range sortedKeys(s.preauth) {
		u := s.preauth[k]
		scratch = encodeUsage(scratch[:0], k, u.Uses, u.Amount, 0, 0, u.Until)
		writeRecord(w, stPreauth, scratch)
	}
	for _, k := range sortedKeys(s.quota) {
		q := s.quota[k]
		scratch = encodeUsage(scratch[:0], k, q.Requests, q.Amount, q.Bytes, q.Start, q.Until)
		writeRecord(w, stQuota, scratch)
	}
	for _, id := range sortedKeys(s.sources) {
		scratch = encodeSource(scratch[:0], s.sources[id])
		writeRecord(w, stSource, scratch)
	}
	s.writeReviews(w, scratch)
}

// sortedGrantIDs returns the grant ids in the order authority writes
// them.
func sortedGrantIDs(m map[string]*grants.Grant) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// sortedIdemKeys returns the idempotency keys in the order authority
// writes them.
func sortedIdemKeys(m map[idemID]*idemRecord) []idemID {
	keys := make([]idemID, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareIdem)
	return keys
}

// compareIdem orders idempotency keys by worker, then key.
func compareIdem(a, b idemID) int {
	if c := strings.Compare(a.Worker, b.Worker); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
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
	w.String(gtSurface, g.Surface)
	w.String(gtOperation, g.Operation)
	w.String(gtConsequence, g.Consequence)
	w.String(gtTarget, g.Target)
	w.String(gtTargetLabel, g.TargetLabel)
	w.String(gtCwd, g.Cwd)
	w.String(gtResolved, g.Resolved)
	w.String(gtLedgerKey, g.LedgerKey)
	w.String(gtInstrument, g.Instrument)
	w.String(gtInstrumentLeft, g.InstrumentLeft)
	w.Uint(gtAmount, g.Amount)
	w.Uint(gtBytes, g.Bytes)
	w.Strings(gtRule, g.Rules)
	w.String(gtRoute, g.Route)
	w.Uint(gtRouteGen, g.RouteGen)
	return w.Bytes()
}

func encodeIdem(buf []byte, k idemID, r *idemRecord) []byte {
	a := r.answer()
	w := events.NewWriter(buf)
	w.String(itWorker, k.Worker)
	w.String(itKey, k.Key)
	w.String(itTool, r.Tool)
	w.Hash(itDigest, r.Digest)
	w.Uint(itSeq, r.Seq)
	w.String(itGrantID, r.GrantID)
	w.String(itReason, string(a.Reason))
	w.String(itMissing, a.Missing)
	w.String(itDetail, a.Detail)
	w.Strings(itRule, a.Rules)
	w.Uint(itEpoch, r.Epoch)
	w.Int(itUntil, r.Until)
	w.String(itDecision, string(a.Decision))
	w.String(itReviewID, a.ReviewID)
	w.Strings(itGrounds, a.Grounds)
	return w.Bytes()
}

// encodedSize estimates the authority encoding's length, to allocate the
// buffer once (grant records run 250-400 bytes, idempotency records
// about 100).
func (s *State) encodedSize() int {
	return 4096 + 320*len(s.grants) + 128*len(s.idem) + 64*(len(s.ledger)+len(s.preauth)+len(s.quota)) + 256*len(s.sources) +
		160*(len(s.reviews)+len(s.approvals)+len(s.routes))
}

// Snapshot returns the canonical encoding of the whole state.
func (s *State) Snapshot() []byte {
	n := s.encodedSize()
	for _, p := range s.outbox {
		n += len(p.Data) + len(p.Subject) + 32
	}
	w := events.NewWriter(make([]byte, 0, n))
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
		writeRecord(w, stOutbox, scratch)
	}
	if s.format > ReceiptFormatLegacy {
		w.Uint(stFormat, s.format)
	}
	s.writeReplies(w, scratch)
	scratch = s.writeRoutes(w, scratch)
	s.writeRouteFloor(w)
	scratch = s.writeFleet(w, scratch)
	s.writeWorkerKeys(w, scratch)
	return w.Bytes()
}

// Digest is SHA-256 over the authority part of the state (clock, epoch,
// policy, counters, bars, grants, idempotency records, chain head, effect
// ledger, preauthorization consumption, quota windows, source registry,
// open reviews and approvals, plain-text replies already decoded, route
// leases, fleet records, worker NATS user keys). It
// excludes the outbox, so an issuer and an auditor that rebuilt state from
// the receipt stream agree on it.
func (s *State) Digest() events.Hash {
	w := events.NewWriter(make([]byte, 0, s.encodedSize()))
	s.authority(w)
	s.writeReplies(w, nil)
	s.writeRoutes(w, nil)
	s.writeRouteFloor(w)
	s.writeFleet(w, nil)
	s.writeWorkerKeys(w, nil)
	return events.Sum(w.Bytes())
}

// Restore decodes a snapshot into a fresh state. On error nothing is
// returned (never a half-built state); the caller keeps its old state.
//
// Decoding is strict: canonical field encoding (events.Reader), the wire
// type each tag was written with, no unknown tags (a snapshot is state, and
// state this build does not understand must not be dropped silently), and
// the internal consistency Snapshot always produces: counters ascending and
// non-zero, ids unique, the policy in canonical form, nothing retained past
// its retention time, the outbox ascending between the published watermark
// and the chain head.
func Restore(data []byte) (*State, error) {
	if len(data) == 0 || data[0] != snapshotVersion {
		return nil, fmt.Errorf("%w: missing or unsupported version byte", ErrBadSnapshot)
	}
	s, err := restore(data[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return s, nil
}

func restore(data []byte) (*State, error) {
	s := sizedFor(data)
	r := events.NewReader(data)
	var f events.Field
	var err error
	var lastCounter, lastReview, lastRoute, lastMember, lastWorkerKey string
	var lastApproval *approvalKey
	var lastReply events.Hash
	lastUsage := map[uint32]string{}
	for err == nil && r.Next(&f) {
		switch f.Tag {
		case stClock:
			if err = want(&f, events.WireVarint); err == nil {
				s.clock = f.Int()
			}
		case stEpoch:
			if err = want(&f, events.WireVarint); err == nil {
				s.epoch = f.Uint
			}
		case stPolicy:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var p *policy.Policy
			if p, err = policy.Parse(f.Data); err != nil {
				break
			}
			if !bytes.Equal(p.Canonical(), f.Data) {
				err = fmt.Errorf("policy is not in canonical form")
				break
			}
			s.policy, s.polDigest = p, events.Sum(f.Data)
		case stCounter:
			var c events.Counter
			if c, err = decodeCounter(&f); err != nil {
				break
			}
			if c.Value == 0 || (s.counters.Len() > 0 && c.Key <= lastCounter) {
				err = fmt.Errorf("counter %q is zero or out of order", c.Key)
				break
			}
			if _, _, err = revocation.ParseKey(c.Key); err != nil {
				break
			}
			lastCounter = c.Key
			s.counters.Set(c.Key, c.Value)
		case stBarred:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			id := string(f.Data)
			if id == "" || s.barred[id] {
				err = fmt.Errorf("barred worker %q is empty or repeated", id)
				break
			}
			s.barred[id] = true
		case stGrant:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var g *grants.Grant
			if g, err = decodeGrant(f.Data, &s.intern); err != nil {
				break
			}
			if s.grants[g.ID] != nil {
				err = fmt.Errorf("duplicate grant %s", g.ID)
				break
			}
			s.putGrant(g)
			s.expiry = append(s.expiry, expiryItem{At: RetainUntil(g.ExpiresAt), Ord: g.PermitSeq<<kindBits | expireGrant, Ref: g})
		case stIdem:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var k idemID
			var rec *idemRecord
			if k, rec, err = decodeIdem(f.Data, s); err != nil {
				break
			}
			if s.idem[k] != nil {
				err = fmt.Errorf("duplicate idempotency record %s/%s", k.Worker, k.Key)
				break
			}
			s.idem[k] = rec
			// Grants come first in a snapshot: a record whose grant's
			// item removes it needs no item of its own.
			if !coveredBy(s.grants[rec.GrantID], k, rec) {
				ref := k
				s.expiry = append(s.expiry, expiryItem{At: rec.Until, Ord: rec.Seq<<kindBits | expireIdem, Ref: &ref})
			}
		case stChainSeq:
			if err = want(&f, events.WireVarint); err == nil {
				s.chain.Seq = f.Uint
			}
		case stChainHead:
			if err = want(&f, events.WireBytes); err == nil {
				s.chain.Head, err = events.HashFromBytes(f.Data)
			}
		case stLedger, stPreauth, stQuota:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var u usageRecord
			if u, err = decodeUsage(f.Data); err != nil {
				break
			}
			err = s.restoreUsage(f.Tag, u, lastUsage)
			lastUsage[f.Tag] = u.key
		case stSource:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var src *source
			if src, err = decodeSource(f.Data); err != nil {
				break
			}
			if prev, ok := lastUsage[stSource]; ok && src.ID <= prev {
				err = fmt.Errorf("source %q is out of order or repeated", src.ID)
				break
			}
			lastUsage[stSource] = src.ID
			s.addSource(src)
		case stReview:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreReview(f.Data, &lastReview)
			}
		case stApproval:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreApproval(f.Data, &lastApproval)
			}
		case stReply:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreReply(f.Data, &lastReply)
			}
		case stRoute:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreRoute(f.Data, &lastRoute)
			}
		case stRouteFloor:
			if err = want(&f, events.WireVarint); err == nil {
				if f.Uint == 0 {
					err = fmt.Errorf("route generation high-water mark 0 (only a raised mark is written)")
				}
				s.routeFloor = f.Uint
			}
		case stFleet:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreMember(f.Data, &lastMember)
			}
		case stWorkerKey:
			if err = want(&f, events.WireBytes); err == nil {
				err = s.restoreWorkerKey(f.Data, &lastWorkerKey)
			}
		case stPublished:
			if err = want(&f, events.WireVarint); err == nil {
				s.published = f.Uint
			}
		case stOutbox:
			if err = want(&f, events.WireBytes); err != nil {
				break
			}
			var p Pending
			if p, err = decodePending(f.Data); err != nil {
				break
			}
			last := s.published
			if n := len(s.outbox); n > 0 {
				last = s.outbox[n-1].Seq
			}
			if p.Seq <= last {
				err = fmt.Errorf("outbox seq %d not after %d", p.Seq, last)
				break
			}
			s.outbox = append(s.outbox, p)
		case stFormat:
			if err = want(&f, events.WireVarint); err != nil {
				break
			}
			// Only a raised level is written, and only a level this
			// build writes can be honoured: a state at a level it does
			// not know must not be restored and written in another form.
			if f.Uint <= ReceiptFormatLegacy || f.Uint > MaxReceiptFormat {
				err = fmt.Errorf("receipt format %d (this build writes %d-%d)", f.Uint, ReceiptFormatLegacy, MaxReceiptFormat)
				break
			}
			s.format = f.Uint
		default:
			err = fmt.Errorf("unknown snapshot tag %d", f.Tag)
		}
	}
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, err
	}
	if (s.chain.Seq == 0) != s.chain.Head.IsZero() {
		return nil, fmt.Errorf("chain seq %d and head %s disagree", s.chain.Seq, s.chain.Head.Short())
	}
	if s.published > s.chain.Seq {
		return nil, fmt.Errorf("published %d is beyond the chain head %d", s.published, s.chain.Seq)
	}
	if n := len(s.outbox); n > 0 && s.outbox[n-1].Seq > s.chain.Seq {
		return nil, fmt.Errorf("outbox seq %d is beyond the chain head %d", s.outbox[n-1].Seq, s.chain.Seq)
	}
	if (s.policy == nil) != (s.epoch == 0) {
		return nil, fmt.Errorf("epoch %d and policy presence disagree", s.epoch)
	}
	s.expiry.init()
	// Every live state has forgotten what its clock has passed.
	if next, ok := s.nextDue(); ok && next.At <= s.clock {
		return nil, fmt.Errorf("entry retained past its time (%d <= clock %d)", next.At, s.clock)
	}
	return s, nil
}

// sizedFor returns an empty state whose maps, expiry heap and outbox are
// allocated for the records the snapshot holds, counted in one pass over
// its top-level fields (cheap: records are skipped, not decoded). Growing
// a map of a million entries one doubling at a time costs more than the
// count. A malformed snapshot is refused by the decoding pass.
func sizedFor(data []byte) *State {
	var n [stRoute + 1]int
	r := events.NewReader(data)
	var f events.Field
	for r.Next(&f) {
		if int(f.Tag) < len(n) {
			n[f.Tag]++
		}
	}
	s := New()
	s.grants = make(map[string]*grants.Grant, n[stGrant])
	s.idem = make(map[idemID]*idemRecord, n[stIdem])
	s.ledger = make(map[string]*ledgerEntry, n[stLedger])
	s.preauth = make(map[string]*preauthUse, n[stPreauth])
	s.quota = make(map[string]*quotaWindow, n[stQuota])
	s.sources = make(map[string]*source, n[stSource])
	s.reviews = make(map[string]*review, n[stReview])
	s.approvals = make(map[approvalKey]*approval, n[stApproval])
	s.replies = make(map[events.Hash]*replySeen, n[stReply])
	s.routes = make(map[string]*route, n[stRoute])
	// Idempotency records answered by a grant share its item.
	s.expiry = make(expiryHeap, 0, n[stGrant]+n[stLedger]+n[stPreauth]+n[stQuota]+n[stSource]+n[stReview]+n[stApproval]+n[stReply]+n[stRoute])
	s.outbox = make([]Pending, 0, n[stOutbox])
	return s
}

// want checks a field's wire type.
func want(f *events.Field, wt uint8) error {
	if f.Wire != wt {
		return fmt.Errorf("tag %d has wire type %d, want %d", f.Tag, f.Wire, wt)
	}
	return nil
}

// decodeCounter reads a counter written by writeCounter: a minimal uvarint
// value followed by the key.
func decodeCounter(f *events.Field) (events.Counter, error) {
	if err := want(f, events.WireBytes); err != nil {
		return events.Counter{}, err
	}
	b := f.Data
	v, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return events.Counter{}, fmt.Errorf("bad counter value")
	}
	return events.Counter{Key: string(b[n:]), Value: v}, nil
}

// decodeCounterShared is decodeCounter with the key shared through in.
func decodeCounterShared(f *events.Field, in *interner) (events.Counter, error) {
	if err := want(f, events.WireBytes); err != nil {
		return events.Counter{}, err
	}
	b := f.Data
	v, n := binary.Uvarint(b)
	if n <= 0 || (n > 1 && b[n-1] == 0) {
		return events.Counter{}, fmt.Errorf("bad counter value")
	}
	return events.Counter{Key: in.strBytes(b[n:]), Value: v}, nil
}

// fieldDecoder decodes the fields of a nested record with wire-type checks.
type fieldDecoder struct {
	f   events.Field // held by value, so that decoding leaves it on the stack
	err error
}

// done is the record's decoding error: the first field's, else the
// reader's.
func (d *fieldDecoder) done(r *events.Reader) error {
	if d.err != nil {
		return d.err
	}
	return r.Err()
}

func (d *fieldDecoder) str(dst *string) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst = string(d.f.Data)
	}
}

// shared decodes a string field into its shared copy (see interner).
func (d *fieldDecoder) shared(dst *string, in *interner) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst = in.strBytes(d.f.Data)
	}
}

// sharedList appends a string field's shared copy.
func (d *fieldDecoder) sharedList(dst *[]string, in *interner) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst = append(*dst, in.strBytes(d.f.Data))
	}
}

// bytes keeps a string field's bytes (aliasing the input).
func (d *fieldDecoder) bytes(dst *[]byte) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst = d.f.Data
	}
}

func (d *fieldDecoder) list(dst *[]string) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst = append(*dst, string(d.f.Data))
	}
}

func (d *fieldDecoder) uint(dst *uint64) {
	if d.err = want(&d.f, events.WireVarint); d.err == nil {
		*dst = d.f.Uint
	}
}

func (d *fieldDecoder) int(dst *int64) {
	if d.err = want(&d.f, events.WireVarint); d.err == nil {
		*dst = d.f.Int()
	}
}

func (d *fieldDecoder) hash(dst *events.Hash) {
	if d.err = want(&d.f, events.WireBytes); d.err == nil {
		*dst, d.err = events.HashFromBytes(d.f.Data)
	}
}

// decodeGrant reads one grant record. Its repeated strings and lists are
// shared through in, as Evolve shares them.
func decodeGrant(b []byte, in *interner) (*grants.Grant, error) {
	g := &grants.Grant{}
	counters, sources, rules := in.decoded[:0], in.decodedSources[:0], in.decodedRules[:0]
	r := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	var status uint64
	for d.err == nil && r.Next(f) {
		switch f.Tag {
		case gtID:
			d.str(&g.ID)
		case gtNode:
			d.shared(&g.Node, in)
		case gtWorker:
			d.shared(&g.Worker, in)
		case gtLane:
			d.shared(&g.Lane, in)
		case gtSession:
			d.shared(&g.Session, in)
		case gtTool:
			d.shared(&g.Tool, in)
		case gtDigest:
			d.hash(&g.Digest)
		case gtEpoch:
			d.uint(&g.Epoch)
		case gtCounter:
			var c events.Counter
			if c, d.err = decodeCounterShared(f, in); d.err == nil {
				counters = append(counters, c)
			}
		case gtSource:
			d.sharedList(&sources, in)
		case gtIssuedAt:
			d.int(&g.IssuedAt)
		case gtExpiresAt:
			d.int(&g.ExpiresAt)
		case gtIdemKey:
			d.str(&g.IdemKey)
		case gtPermitSeq:
			d.uint(&g.PermitSeq)
		case gtStatus:
			d.uint(&status)
		case gtAttemptKey:
			d.str(&g.AttemptKey)
		case gtAttemptSeq:
			d.uint(&g.AttemptSeq)
		case gtOutcome:
			d.shared(&g.Outcome, in)
		case gtVerifier:
			d.shared(&g.Verifier, in)
		case gtEffectSeq:
			d.uint(&g.EffectSeq)
		case gtRevokedSeq:
			d.uint(&g.RevokedSeq)
		case gtSurface:
			d.shared(&g.Surface, in)
		case gtOperation:
			d.shared(&g.Operation, in)
		case gtConsequence:
			d.shared(&g.Consequence, in)
		case gtTarget:
			d.str(&g.Target)
		case gtTargetLabel:
			d.str(&g.TargetLabel)
		case gtCwd:
			d.str(&g.Cwd)
		case gtResolved:
			d.str(&g.Resolved)
		case gtLedgerKey:
			d.str(&g.LedgerKey)
		case gtInstrument:
			d.shared(&g.Instrument, in)
		case gtInstrumentLeft:
			d.str(&g.InstrumentLeft)
		case gtAmount:
			d.uint(&g.Amount)
		case gtBytes:
			d.uint(&g.Bytes)
		case gtRule:
			d.sharedList(&rules, in)
		case gtRoute:
			d.shared(&g.Route, in)
		case gtRouteGen:
			d.uint(&g.RouteGen)
		default:
			d.err = fmt.Errorf("unknown grant tag %d", f.Tag)
		}
	}
	err := d.done(r)
	if err == nil && (g.ID == "" || status == 0 || status > uint64(grants.StatusRevoked)) {
		err = fmt.Errorf("grant %q has no id or a bad status %d", g.ID, status)
	}
	g.Status = grants.Status(status)
	// Lists decode as Snapshot wrote them: absent when empty (nil).
	if len(counters) > 0 {
		g.Counters = in.counterList(counters)
	}
	if len(sources) > 0 {
		g.Sources = in.list(sources)
	}
	if len(rules) > 0 {
		g.Rules = in.list(rules)
	}
	clear(counters)
	clear(sources)
	clear(rules)
	in.decoded, in.decodedSources, in.decodedRules = counters[:0], sources[:0], rules[:0]
	return g, err
}

// decodeIdem reads one idempotency record. The worker and tool are shared
// through s's interner, and the key and grant id are the strings of the
// grant the record answered, when s holds it (Snapshot writes grants
// first), so a restored record costs what a live one does.
func decodeIdem(b []byte, s *State) (idemID, *idemRecord, error) {
	var k idemID
	var key, grantID []byte
	rec := &idemRecord{}
	var a idemAnswer
	r := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && r.Next(f) {
		switch f.Tag {
		case itWorker:
			d.shared(&k.Worker, &s.intern)
		case itKey:
			d.bytes(&key)
		case itTool:
			d.shared(&rec.Tool, &s.intern)
		case itDigest:
			d.hash(&rec.Digest)
		case itSeq:
			d.uint(&rec.Seq)
		case itGrantID:
			d.bytes(&grantID)
		case itReason:
			var reason string
			d.str(&reason)
			a.Reason = grants.Reason(reason)
		case itMissing:
			d.str(&a.Missing)
		case itDetail:
			d.str(&a.Detail)
		case itRule:
			d.list(&a.Rules)
		case itEpoch:
			d.uint(&rec.Epoch)
		case itUntil:
			d.int(&rec.Until)
		case itDecision:
			var dec string
			d.str(&dec)
			a.Decision = grants.Decision(dec)
		case itReviewID:
			d.str(&a.ReviewID)
		case itGrounds:
			d.list(&a.Grounds)
		default:
			d.err = fmt.Errorf("unknown idempotency record tag %d", f.Tag)
		}
	}
	err := d.done(r)
	if err == nil && len(key) == 0 {
		err = fmt.Errorf("idempotency record without a key")
	}
	if err != nil {
		return k, nil, err
	}
	if g := s.grants[string(grantID)]; g != nil && len(grantID) > 0 {
		rec.GrantID = g.ID
		if g.IdemKey == string(key) {
			k.Key = g.IdemKey
		}
	} else {
		rec.GrantID = string(grantID)
	}
	if k.Key == "" {
		k.Key = string(key)
	}
	if !a.empty() {
		ans := a
		rec.Answer = &ans
	}
	return k, rec, nil
}

func decodePending(b []byte) (Pending, error) {
	var p Pending
	r := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && r.Next(f) {
		switch f.Tag {
		case otSeq:
			d.uint(&p.Seq)
		case otSubject:
			d.str(&p.Subject)
		case otData:
			if d.err = want(f, events.WireBytes); d.err == nil {
				p.Data = append([]byte(nil), f.Data...)
			}
		default:
			d.err = fmt.Errorf("unknown outbox tag %d", f.Tag)
		}
	}
	err := d.done(r)
	if err == nil && (p.Seq == 0 || len(p.Data) == 0) {
		err = fmt.Errorf("outbox entry without a sequence or data")
	}
	return p, err
}
