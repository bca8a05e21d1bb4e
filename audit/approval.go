package audit

import (
	"container/heap"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/revocation"
)

// approvalState is what the Verifier remembers of an approval event until
// a permit uses it, it expires, or its worker is revoked.
type approvalState struct {
	worker, tool string
	digest       events.Hash
	expiresAt    int64
	seq          uint64
	// record: approved as a decision record (review_approved, receipt
	// format level 4): the permit that uses it must be followed by its
	// review_consumed receipt; artifact: an artifact review, which covers
	// the worker's request naming it rather than one exact call.
	record, artifact bool
}

// approvalExpiry schedules an approval for forgetting.
type approvalExpiry struct {
	at  int64
	id  string
	seq uint64
}

type approvalHeap []approvalExpiry

func (h approvalHeap) Len() int           { return len(h) }
func (h approvalHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h approvalHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *approvalHeap) Push(x any)        { *h = append(*h, x.(approvalExpiry)) }
func (h *approvalHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// approval records an approval event: the exact call it covers, until its
// expiry.
func (v *Verifier) approval(e *events.Event) {
	if v.approvals == nil {
		v.approvals = map[string]approvalState{}
	}
	v.approvals[e.ReviewID] = approvalState{worker: e.Worker, tool: e.Tool, digest: e.Digest, expiresAt: e.ExpiresAt, seq: e.Seq}
	heap.Push(&v.approvalExp, approvalExpiry{at: e.ExpiresAt, id: e.ReviewID, seq: e.Seq})
}

// reviewApproved records a decision record's approval (review_approved).
func (v *Verifier) reviewApproved(e *events.Event) {
	if v.approvals == nil {
		v.approvals = map[string]approvalState{}
	}
	v.approvals[e.ReviewID] = approvalState{worker: e.Worker, tool: e.Tool, digest: e.Digest, expiresAt: e.ExpiresAt,
		seq: e.Seq, record: true, artifact: !e.ArtifactDigest.IsZero()}
	heap.Push(&v.approvalExp, approvalExpiry{at: e.ExpiresAt, id: e.ReviewID, seq: e.Seq})
}

// reviewClosed forgets the approval of a review rejected, superseded or
// expired: no permit may use it any more.
func (v *Verifier) reviewClosed(e *events.Event) { delete(v.approvals, e.ReviewID) }

// consumed checks a review_consumed receipt: it follows, in the same
// command, the permit that used the review (RefSeq).
func (v *Verifier) consumed(e *events.Event) *Violation {
	p := v.toConsume
	v.toConsume = pendingConsume{}
	if p.review == "" && v.partial {
		v.unchecked++ // the permit may lie before the stream's start
		return nil
	}
	if p.review == "" || p.review != e.ReviewID || p.permit != e.RefSeq || e.Seq != p.permit+1 {
		return violation(e.Seq, CodeApprovalNotConsumed,
			"review_consumed of review %s (permit seq %d) follows no permit that used that review", e.ReviewID, e.RefSeq)
	}
	return nil
}

// pendingConsume is a permit that used a decision record's approval and
// whose review_consumed receipt must come next.
type pendingConsume struct {
	review string
	permit uint64
}

// forgetApprovals drops approvals whose expiry the control-plane time t
// has reached, as the issuer does.
func (v *Verifier) forgetApprovals(t int64) {
	for len(v.approvalExp) > 0 && v.approvalExp[0].at <= t {
		x := heap.Pop(&v.approvalExp).(approvalExpiry)
		if a, ok := v.approvals[x.id]; ok && a.seq == x.seq {
			delete(v.approvals, x.id)
		}
	}
}

// approvedPermit checks a permit that names a review: an approval event
// for that review came before it, for the same worker, tool and request
// digest, is not expired and was not used by an earlier permit. The
// permit uses it up.
func (v *Verifier) approvedPermit(e *events.Event) *Violation {
	a, ok := v.approvals[e.ReviewID]
	if !ok {
		if v.partial {
			v.unchecked++
			return nil
		}
		return violation(e.Seq, CodePermitWithoutApproval,
			"permit of grant %s names review %s, which no live approval covers (never approved, used, expired or its worker revoked)", e.GrantID, e.ReviewID)
	}
	if a.worker != e.Worker || (!a.artifact && (a.tool != e.Tool || a.digest != e.Digest)) {
		return violation(e.Seq, CodePermitWithoutApproval,
			"permit of grant %s names review %s, approved at seq %d for another call (%s %s %s)", e.GrantID, e.ReviewID, a.seq, a.worker, a.tool, a.digest.Short())
	}
	if e.Time >= a.expiresAt || e.ExpiresAt > a.expiresAt {
		return violation(e.Seq, CodePermitWithoutApproval,
			"permit of grant %s (at %s, expiring %s) outlives the approval of review %s, which expires %s", e.GrantID, ts(e.Time), ts(e.ExpiresAt), e.ReviewID, ts(a.expiresAt))
	}
	delete(v.approvals, e.ReviewID)
	if a.record {
		v.toConsume = pendingConsume{review: e.ReviewID, permit: e.Seq}
	}
	return nil
}

// revokeApprovals forgets the approvals of the workers a revoke bars.
func (v *Verifier) revokeApprovals(e *events.Event) {
	if len(v.approvals) == 0 {
		return
	}
	for _, c := range e.Counters {
		scope, id, err := revocation.ParseKey(c.Key)
		if err != nil || scope != revocation.ScopeWorker {
			continue
		}
		for rv, a := range v.approvals {
			if a.worker == id {
				delete(v.approvals, rv)
			}
		}
	}
}
