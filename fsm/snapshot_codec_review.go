package fsm

import (
	"bytes"
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
	// Added with decision records (receipt format level 4).
	rvSlug
	rvVersion
	rvPath
	rvArtifact
	rvTransition
	rvDestination
	rvRole
	rvEpoch
	rvStatus
	rvDecider
	rvDeciderKey
	rvDeciderCount
	rvApprovedUntil
	rvApprovedEpoch
	rvDecidedSeq
)

// Reply record tags (stReply; append only).
const (
	rpKey = iota + 1
	rpSeq
	rpUntil
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
			rw.String(rvSlug, r.Slug)
			rw.Uint(rvVersion, r.Version)
			rw.String(rvPath, r.Path)
			rw.Hash(rvArtifact, r.Artifact)
			rw.String(rvTransition, r.Transition)
			rw.String(rvDestination, r.Destination)
			rw.String(rvRole, r.Role)
			rw.Uint(rvEpoch, r.Epoch)
			rw.Uint(rvStatus, uint64(r.Status))
			rw.String(rvDecider, r.Decider)
			rw.String(rvDeciderKey, r.DeciderKey)
			rw.Uint(rvDeciderCount, r.DeciderCount)
			rw.Int(rvApprovedUntil, r.ApprovedUntil)
			rw.Uint(rvApprovedEpoch, r.ApprovedEpoch)
			rw.Uint(rvDecidedSeq, r.DecidedSeq)
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

// writeReplies appends the replies already decoded (stReply: its tag is
// above the outbox's and the level's; only the route records follow). They are
// authority (a reply seen again decides nothing), so Digest writes them
// too, right after the rest of the authority.
func (s *State) writeReplies(w *events.Writer, scratch []byte) []byte {
	if len(s.replies) > 0 {
		keys := make([]events.Hash, 0, len(s.replies))
		for k := range s.replies {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b events.Hash) int { return bytes.Compare(a[:], b[:]) })
		for _, k := range keys {
			r := s.replies[k]
			pw := events.NewWriter(scratch[:0])
			pw.Hash(rpKey, k)
			pw.Uint(rpSeq, r.Seq)
			pw.Int(rpUntil, r.Until)
			scratch = pw.Bytes()
			writeRecord(w, stReply, scratch)
		}
	}
	return scratch
}

// restoreReply decodes one reply record, strictly (known tags, a key, a
// sequence, keys ascending), and schedules it.
func (s *State) restoreReply(b []byte, last *events.Hash) error {
	r := &replySeen{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case rpKey:
			d.hash(&r.Key)
		case rpSeq:
			d.uint(&r.Seq)
		case rpUntil:
			d.int(&r.Until)
		default:
			d.err = fmt.Errorf("unknown reply record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	switch {
	case err != nil:
		return err
	case r.Key.IsZero() || r.Seq == 0:
		return fmt.Errorf("reply record without a key or a sequence")
	case !last.IsZero() && bytes.Compare(r.Key[:], last[:]) <= 0:
		return fmt.Errorf("reply %s is out of order or repeated", r.Key.Short())
	}
	*last = r.Key
	s.replies[r.Key] = r
	s.expiry = append(s.expiry, expiryItem{At: r.Until, Ord: r.Seq<<kindBits | expireReply, Ref: r})
	return nil
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
		case rvSlug:
			d.shared(&r.Slug, &s.intern)
		case rvVersion:
			d.uint(&r.Version)
		case rvPath:
			d.str(&r.Path)
		case rvArtifact:
			d.hash(&r.Artifact)
		case rvTransition:
			d.shared(&r.Transition, &s.intern)
		case rvDestination:
			d.str(&r.Destination)
		case rvRole:
			d.shared(&r.Role, &s.intern)
		case rvEpoch:
			d.uint(&r.Epoch)
		case rvStatus:
			var st uint64
			d.uint(&st)
			if st > uint64(rsLast) || st == 0 {
				d.err = fmt.Errorf("review status %d", st)
			}
			r.Status = reviewStatus(st)
		case rvDecider:
			d.shared(&r.Decider, &s.intern)
		case rvDeciderKey:
			d.shared(&r.DeciderKey, &s.intern)
		case rvDeciderCount:
			d.uint(&r.DeciderCount)
		case rvApprovedUntil:
			d.int(&r.ApprovedUntil)
		case rvApprovedEpoch:
			d.uint(&r.ApprovedEpoch)
		case rvDecidedSeq:
			d.uint(&r.DecidedSeq)
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
