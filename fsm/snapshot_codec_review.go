package fsm

import (
	"fmt"
	"slices"
	"sort"

	"github.com/writ-dev/writ/events"
)

// Open reviews and approvals in a snapshot: one nested record each, reviews
// in id order (tag stReview), approvals in (worker, tool, digest) order
// (tag stApproval). A state with none writes nothing, so snapshots and
// digests of states that never saw an approval_required answer are those
// earlier builds wrote; the version is unchanged because the format only
// gained tags.

// Review record tags (append only).
const (
	rvID = iota + 1
	rvWorker
	rvLane
	rvSession
	rvTool
	rvDigest
	rvReason
	rvSeq
	rvUntil
)

// Approval record tags (append only).
const (
	apWorker = iota + 1
	apTool
	apDigest
	apReviewID
	apLane
	apExpiresAt
	apSeq
)

// writeReviews appends the open reviews and the approvals to w.
func (s *State) writeReviews(w *events.Writer, scratch []byte) []byte {
	if len(s.reviews) > 0 {
		ids := make([]string, 0, len(s.reviews))
		for id := range s.reviews {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			r := s.reviews[id]
			rw := events.NewWriter(scratch[:0])
			rw.String(rvID, r.ID)
			rw.String(rvWorker, r.Worker)
			rw.String(rvLane, r.Lane)
			rw.String(rvSession, r.Session)
			rw.String(rvTool, r.Tool)
			rw.Hash(rvDigest, r.Digest)
			rw.String(rvReason, r.Reason)
			rw.Uint(rvSeq, r.Seq)
			rw.Int(rvUntil, r.Until)
			scratch = rw.Bytes()
			writeRecord(w, stReview, scratch)
		}
	}
	if len(s.approvals) > 0 {
		keys := make([]approvalKey, 0, len(s.approvals))
		for k := range s.approvals {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareApprovalKeys)
		for _, k := range keys {
			a := s.approvals[k]
			aw := events.NewWriter(scratch[:0])
			aw.String(apWorker, k.Worker)
			aw.String(apTool, k.Tool)
			aw.Hash(apDigest, k.Digest)
			aw.String(apReviewID, a.ReviewID)
			aw.String(apLane, a.Lane)
			aw.Int(apExpiresAt, a.ExpiresAt)
			aw.Uint(apSeq, a.Seq)
			scratch = aw.Bytes()
			writeRecord(w, stApproval, scratch)
		}
	}
	return scratch
}

// restoreReview decodes one review record, strictly (known tags, an id, a
// worker, a sequence, ids ascending), and schedules it.
func (s *State) restoreReview(b []byte, last *string) error {
	r := &review{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case rvID:
			d.str(&r.ID)
		case rvWorker:
			d.shared(&r.Worker, &s.intern)
		case rvLane:
			d.shared(&r.Lane, &s.intern)
		case rvSession:
			d.shared(&r.Session, &s.intern)
		case rvTool:
			d.shared(&r.Tool, &s.intern)
		case rvDigest:
			d.hash(&r.Digest)
		case rvReason:
			d.shared(&r.Reason, &s.intern)
		case rvSeq:
			d.uint(&r.Seq)
		case rvUntil:
			d.int(&r.Until)
		default:
			d.err = fmt.Errorf("unknown review record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	switch {
	case err != nil:
		return err
	case r.ID == "" || r.Worker == "" || r.Seq == 0:
		return fmt.Errorf("review record %q without an id, a worker or a sequence", r.ID)
	case *last != "" && r.ID <= *last:
		return fmt.Errorf("review %q is out of order or repeated", r.ID)
	}
	*last = r.ID
	s.reviews[r.ID] = r
	s.expiry = append(s.expiry, expiryItem{At: r.Until, Ord: r.Seq<<kindBits | expireReview, Ref: r})
	return nil
}

// restoreApproval decodes one approval record, strictly (known tags, a
// worker, a tool, a review id, a sequence, keys ascending), and schedules
// it.
func (s *State) restoreApproval(b []byte, last **approvalKey) error {
	a := &approval{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case apWorker:
			d.shared(&a.Key.Worker, &s.intern)
		case apTool:
			d.shared(&a.Key.Tool, &s.intern)
		case apDigest:
			d.hash(&a.Key.Digest)
		case apReviewID:
			d.str(&a.ReviewID)
		case apLane:
			d.shared(&a.Lane, &s.intern)
		case apExpiresAt:
			d.int(&a.ExpiresAt)
		case apSeq:
			d.uint(&a.Seq)
		default:
			d.err = fmt.Errorf("unknown approval record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	switch {
	case err != nil:
		return err
	case a.Key.Worker == "" || a.Key.Tool == "" || a.ReviewID == "" || a.Seq == 0:
		return fmt.Errorf("approval record %q without a worker, a tool, a review id or a sequence", a.ReviewID)
	case *last != nil && compareApprovalKeys(a.Key, **last) <= 0:
		return fmt.Errorf("approval %q is out of order or repeated", a.ReviewID)
	}
	*last = &a.Key
	s.approvals[a.Key] = a
	s.expiry = append(s.expiry, expiryItem{At: a.ExpiresAt, Ord: a.Seq<<kindBits | expireApproval, Ref: a})
	return nil
}
