package audit

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// base is an epoch (seq 1) and a permit for g1 to w1 (seq 2, expires at
// t0+61s).
func base() *stream {
	s := &stream{}
	s.add(epochEv(t0, 1))
	s.add(permitEv(t0+sec, "g1", "w1", digestA, 60*sec, 1))
	return s
}

const (
	g1Expiry = t0 + 61*sec
	g1Forget = g1Expiry + fsm.RetainMargin
)

func TestViolationCodes(t *testing.T) {
	cases := []struct {
		name  string
		build func() *stream
		code  string // "" for a valid stream
		seq   uint64
		// What AddEvent reports when it differs from Add with stream
		// sequences (it cannot see bytes or stream sequences).
		eventCode string
		eventSeq  uint64
		// Stream sequences to pass to Add; positions when nil.
		streamSeqs []uint64
	}{
		{name: "valid stream", build: validStream},
		{name: "attempt just before expiry", build: func() *stream {
			return base().add(attemptEv(g1Expiry-1, "g1", "w1", digestA, 2))
		}},
		{name: "effect just before the grant is forgotten", build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(g1Forget-1, "g1", "w1", "failed", "v1", 3))
		}},
		{name: "grant id reused after it was forgotten", build: func() *stream {
			return base().add(permitEv(g1Forget, "g1", "w1", digestA, 60*sec, 1)).add(attemptEv(g1Forget+1, "g1", "w1", digestA, 3))
		}},
		{name: "permit of an approved call", build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1")).
				add(attemptEv(t0+4*sec, "g2", "w1", digestB, 4))
		}},
		{name: "permit naming an unapproved review", code: CodePermitWithoutApproval, seq: 3, build: func() *stream {
			return base().add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "permit of another call than approved", code: CodePermitWithoutApproval, seq: 4, build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestA, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "permit after the approval expired", code: CodePermitWithoutApproval, seq: 4, build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestB, 10*sec)).
				add(approvedPermitEv(t0+12*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "permit outliving the approval", code: CodePermitWithoutApproval, seq: 4, build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestB, 10*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "approval used twice", code: CodePermitWithoutApproval, seq: 5, build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1")).
				add(approvedPermitEv(t0+4*sec, "g3", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "approval of a revoked worker", code: CodePermitWithoutApproval, seq: 6, build: func() *stream {
			return base().add(approvalEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(events.Event{Kind: events.KindRevoke, Time: t0 + 3*sec, Worker: "w1", Counters: []events.Counter{{Key: "worker/w1", Value: 1}}}).
				add(events.Event{Kind: events.KindReinstate, Time: t0 + 4*sec, Worker: "w1"}).
				add(approvedPermitEv(t0+5*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		// Decision records (receipt format level 4): every permit naming a
		// review consumed exactly one live approval.
		{name: "permit of a review approved as a decision record", build: func() *stream {
			return base().add(reviewApprovedEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1")).
				add(consumedEv(t0+3*sec, "rv-1", "w1", 4)).
				add(attemptEv(t0+4*sec, "g2", "w1", digestB, 4))
		}},
		{name: "approval_not_consumed: no review_consumed after the permit", code: CodeApprovalNotConsumed, seq: 5, build: func() *stream {
			return base().add(reviewApprovedEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1")).
				add(attemptEv(t0+4*sec, "g2", "w1", digestB, 4))
		}},
		{name: "approval_not_consumed: review_consumed without a permit", code: CodeApprovalNotConsumed, seq: 4, build: func() *stream {
			return base().add(reviewApprovedEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(consumedEv(t0+3*sec, "rv-1", "w1", 3))
		}},
		{name: "permit of a rejected decision record", code: CodePermitWithoutApproval, seq: 5, build: func() *stream {
			return base().add(reviewApprovedEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(events.Event{Kind: events.KindReviewRejected, Time: t0 + 2*sec, Worker: "w1", ReviewID: "rv-1", Decision: "deny"}).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "decision record used twice", code: CodePermitWithoutApproval, seq: 6, build: func() *stream {
			return base().add(reviewApprovedEv(t0+2*sec, "rv-1", "w1", digestB, 60*sec)).
				add(approvedPermitEv(t0+3*sec, "g2", "w1", digestB, 30*sec, "rv-1")).
				add(consumedEv(t0+3*sec, "rv-1", "w1", 4)).
				add(approvedPermitEv(t0+4*sec, "g3", "w1", digestB, 30*sec, "rv-1"))
		}},
		{name: "route lease life: acquire, work, renew, lapse, take-over, release, revoke", build: func() *stream {
			return routeBase().add(routedAttemptEv(t0+4*sec, "g2", "w1", digestB, 4, "job-a", 1)).
				add(routeEv(events.KindRouteRenewed, t0+5*sec, "job-a", "w1", 1, t0+25*sec)).
				add(routeEv(events.KindRouteLapsed, t0+25*sec, "job-a", "w1", 1, t0+25*sec)).
				add(routeEv(events.KindRouteTaken, t0+26*sec, "job-a", "w2", 2, t0+40*sec)).
				add(routeEv(events.KindRouteReleased, t0+27*sec, "job-a", "w2", 2, 0)).
				add(routeEv(events.KindRouteAcquired, t0+28*sec, "job-a", "w3", 3, t0+50*sec)).
				add(events.Event{Kind: events.KindRevoke, Time: t0 + 29*sec, Worker: "w3", Counters: []events.Counter{{Key: "worker/w3", Value: 1}}, Routes: []string{"job-a"}}).
				add(routeEv(events.KindRouteTaken, t0+30*sec, "job-a", "w1", 4, t0+50*sec))
		}},
		{name: "route_generation", code: CodeRouteGeneration, seq: 6, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteReleased, t0+4*sec, "job-a", "w1", 1, 0)).
				add(routeEv(events.KindRouteAcquired, t0+5*sec, "job-a", "w2", 1, t0+30*sec))
		}},
		{name: "route forgotten a day after its release, acquired again above the mark", build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteReleased, t0+4*sec, "job-a", "w1", 1, 0)).
				add(routeEv(events.KindRouteForgotten, t0+4*sec+int64(fsm.RouteRetention), "job-a", "w1", 1, t0+20*sec)).
				add(routeEv(events.KindRouteAcquired, t0+5*sec+int64(fsm.RouteRetention), "job-a", "w2", 2, t0+30*sec+int64(fsm.RouteRetention))).
				add(routeEv(events.KindRouteAcquired, t0+5*sec+int64(fsm.RouteRetention), "job-b", "w2", 2, t0+30*sec+int64(fsm.RouteRetention)))
		}},
		{name: "route_generation: a forgotten route re-created at a generation it had", code: CodeRouteGeneration, seq: 7, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteReleased, t0+4*sec, "job-a", "w1", 1, 0)).
				add(routeEv(events.KindRouteForgotten, t0+4*sec+int64(fsm.RouteRetention), "job-a", "w1", 1, t0+20*sec)).
				add(routeEv(events.KindRouteAcquired, t0+5*sec+int64(fsm.RouteRetention), "job-a", "w2", 1, t0+30*sec+int64(fsm.RouteRetention)))
		}},
		{name: "route_not_owner: a live lease forgotten", code: CodeRouteNotOwner, seq: 5, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteForgotten, t0+5*sec, "job-a", "w1", 1, t0+20*sec))
		}},
		{name: "route_double_owner", code: CodeRouteDoubleOwner, seq: 5, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteTaken, t0+19*sec, "job-a", "w2", 2, t0+30*sec))
		}},
		{name: "route_not_owner: renewal by another worker", code: CodeRouteNotOwner, seq: 5, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteRenewed, t0+4*sec, "job-a", "w2", 1, t0+30*sec))
		}},
		{name: "route_not_owner: lapse before the expiry", code: CodeRouteNotOwner, seq: 5, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteLapsed, t0+19*sec, "job-a", "w1", 1, t0+20*sec))
		}},
		{name: "attempt_after_route_ended: lapsed", code: CodeAttemptAfterRouteEnded, seq: 5, build: func() *stream {
			return routeBase().add(routedAttemptEv(t0+20*sec, "g2", "w1", digestB, 4, "job-a", 1))
		}},
		{name: "attempt_after_route_ended: taken over", code: CodeAttemptAfterRouteEnded, seq: 6, build: func() *stream {
			return routeBase().add(routeEv(events.KindRouteTaken, t0+21*sec, "job-a", "w2", 2, t0+50*sec)).
				add(routedAttemptEv(t0+22*sec, "g2", "w1", digestB, 4, "job-a", 1))
		}},
		{name: "attempt_after_route_ended: revoked", code: CodeAttemptAfterRouteEnded, seq: 6, build: func() *stream {
			return routeBase().add(events.Event{Kind: events.KindRevoke, Time: t0 + 4*sec, Worker: "w9", Counters: []events.Counter{{Key: "worker/w9", Value: 1}}, Routes: []string{"job-a"}}).
				add(routedAttemptEv(t0+5*sec, "g2", "w1", digestB, 4, "job-a", 1))
		}},
		{name: "revoke of a counter the grant did not bind", build: func() *stream {
			return base().add(events.Event{Kind: events.KindRevoke, Time: t0 + 2*sec, Counters: []events.Counter{{Key: "worker/w9", Value: 1}}}).
				add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},

		{name: "decode", code: CodeDecode, seq: 3, build: func() *stream {
			s := base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2))
			s.raw[2] = slices.Clone(s.raw[2])
			s.raw[2][len(s.raw[2])/2] ^= 0x10
			return s
		}, eventCode: "-"},
		{name: "stream_seq_mismatch", code: CodeStreamSeqMismatch, seq: 1, build: func() *stream {
			return (&stream{}).sealed(epochEv(t0, 1), 2, events.Hash{})
		}, eventCode: CodeSeqGap, eventSeq: 1},
		{name: "seq_gap", code: CodeSeqGap, seq: 3, build: func() *stream {
			s := base()
			return s.sealed(attemptEv(t0+2*sec, "g1", "w1", digestA, 2), 4, s.chain.Head)
		}, streamSeqs: []uint64{1, 2, 4}},
		{name: "seq_gap: stream sequence gap", code: CodeSeqGap, seq: 3, build: func() *stream {
			s := base()
			s.raw = append(s.raw, nil) // never read: the stream seq already shows the hole
			return s
		}, streamSeqs: []uint64{1, 2, 4}, eventCode: "-"},
		{name: "chain_broken", code: CodeChainBroken, seq: 3, build: func() *stream {
			return base().sealed(attemptEv(t0+2*sec, "g1", "w1", digestA, 2), 3, events.Sum([]byte("not the head")))
		}},
		{name: "chain_broken: first event with a prev", code: CodeChainBroken, seq: 1, build: func() *stream {
			return (&stream{}).sealed(epochEv(t0, 1), 1, events.Sum([]byte("before genesis")))
		}},
		{name: "unknown_kind", code: CodeUnknownKind, seq: 3, build: func() *stream {
			return base().add(events.Event{Kind: 77, Time: t0 + 2*sec})
		}},
		{name: "invalid_event", code: CodeInvalidEvent, seq: 3, build: func() *stream {
			e := attemptEv(t0+2*sec, "g1", "w1", digestA, 2)
			e.Policy = []byte("{}") // a policy belongs to epoch events only
			return base().add(e)
		}},
		{name: "time_backwards", code: CodeTimeBackwards, seq: 3, build: func() *stream {
			return base().add(attemptEv(t0, "g1", "w1", digestA, 2))
		}},
		{name: "duplicate_permit", code: CodeDuplicatePermit, seq: 3, build: func() *stream {
			return base().add(permitEv(t0+2*sec, "g1", "w2", digestB, 60*sec, 1))
		}},
		{name: "attempt_without_permit: never permitted", code: CodeAttemptWithoutPermit, seq: 2, build: func() *stream {
			s := &stream{}
			return s.add(epochEv(t0, 1)).add(attemptEv(t0+sec, "g1", "w1", digestA, 0))
		}},
		{name: "attempt_without_permit: names another permit", code: CodeAttemptWithoutPermit, seq: 3, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 1))
		}},
		{name: "attempt_without_permit: grant forgotten", code: CodeAttemptWithoutPermit, seq: 3, build: func() *stream {
			return base().add(attemptEv(g1Forget, "g1", "w1", digestA, 2))
		}},
		{name: "not_grantee", code: CodeNotGrantee, seq: 3, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w2", digestA, 2))
		}},
		{name: "attempt_digest_mismatch", code: CodeAttemptDigestMismatch, seq: 3, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestB, 2))
		}},
		{name: "double_attempt", code: CodeDoubleAttempt, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_expiry", code: CodeAttemptAfterExpiry, seq: 3, build: func() *stream {
			return base().add(attemptEv(g1Expiry, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_epoch_change", code: CodeAttemptAfterEpochChange, seq: 4, build: func() *stream {
			return base().add(epochEv(t0+2*sec, 2)).add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_epoch_change: permit of an old epoch", code: CodeAttemptAfterEpochChange, seq: 3, build: func() *stream {
			s := &stream{}
			return s.add(epochEv(t0, 1)).add(permitEv(t0+sec, "g1", "w1", digestA, 60*sec, 0)).add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_revocation: worker counter", code: CodeAttemptAfterRevocation, seq: 4, build: func() *stream {
			return base().add(events.Event{Kind: events.KindRevoke, Time: t0 + 2*sec, Counters: []events.Counter{{Key: "worker/w1", Value: 1}}}).
				add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_revocation: lane counter", code: CodeAttemptAfterRevocation, seq: 4, build: func() *stream {
			return base().add(events.Event{Kind: events.KindRevoke, Time: t0 + 2*sec, Counters: []events.Counter{{Key: "lane/isolated", Value: 1}}}).
				add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},
		{name: "attempt_after_revocation: cancelled", code: CodeAttemptAfterRevocation, seq: 4, build: func() *stream {
			return base().add(events.Event{Kind: events.KindRevoke, Time: t0 + 2*sec, Counters: []events.Counter{{Key: "dest/x", Value: 1}}, Cancelled: []string{"g1"}}).
				add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
		}},
		{name: "effect_without_attempt: not attempted", code: CodeEffectWithoutAttempt, seq: 3, build: func() *stream {
			return base().add(effectEv(t0+2*sec, "g1", "w1", "confirmed", "v1", 0))
		}},
		{name: "effect_without_attempt: unknown grant", code: CodeEffectWithoutAttempt, seq: 2, build: func() *stream {
			s := &stream{}
			return s.add(epochEv(t0, 1)).add(effectEv(t0+sec, "g1", "w1", "confirmed", "v1", 0))
		}},
		{name: "effect_without_attempt: names another attempt", code: CodeEffectWithoutAttempt, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(t0+3*sec, "g1", "w1", "confirmed", "v1", 2))
		}},
		{name: "effect_without_attempt: grant forgotten", code: CodeEffectWithoutAttempt, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(g1Forget, "g1", "w1", "confirmed", "v1", 3))
		}},
		{name: "not_grantee: effect", code: CodeNotGrantee, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(t0+3*sec, "g1", "w2", "confirmed", "v1", 3))
		}},
		{name: "effect_missing_verifier", code: CodeEffectMissingVerifier, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(t0+3*sec, "g1", "w1", "confirmed", "", 3))
		}},
		{name: "effect_bad_outcome", code: CodeEffectBadOutcome, seq: 4, build: func() *stream {
			return base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(effectEv(t0+3*sec, "g1", "w1", "probably", "v1", 3))
		}},
		{name: "fold_failed", code: CodeFoldFailed, seq: 2, build: func() *stream {
			e := epochEv(t0+sec, 2)
			e.Policy = []byte(`{"version":1}`)
			return (&stream{}).add(epochEv(t0, 1)).add(e)
		}},
		{name: "fold_failed: source without an authority", code: CodeFoldFailed, seq: 2, build: func() *stream {
			return (&stream{}).add(epochEv(t0, 1)).add(events.Event{Kind: events.KindSource, Time: t0 + sec, Worker: "w1",
				Decision: "permit", Sources: []string{"u1"}, Authority: "root", Counters: []events.Counter{{Key: "source/u1"}}})
		}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.build()
			var got *Violation
			v := NewVerifier(Options{})
			for i, b := range s.raw {
				ss := uint64(i + 1)
				if tc.streamSeqs != nil {
					ss = tc.streamSeqs[i]
				}
				if err := v.Add(b, ss); err != nil {
					got = asViolation(err)
					break
				}
			}
			if tc.code == "" {
				if got != nil {
					t.Fatalf("valid stream: %v", got)
				}
			} else {
				wantViolation(t, got, tc.seq, tc.code)
				seen[tc.code] = true
			}

			// The same messages through a Pipeline: the same violation
			// and summary.
			ss := tc.streamSeqs
			if ss == nil {
				ss = positions(len(s.raw))
			}
			samePipelined(t, s.raw, ss, Options{}, v)

			// The same stream through AddEvent.
			eventCode, eventSeq := tc.code, tc.seq
			if tc.eventCode != "" {
				eventCode, eventSeq = tc.eventCode, tc.eventSeq
			}
			if eventCode == "-" {
				return
			}
			_, got = checkEvents(s.evs, Options{})
			if eventCode == "" {
				if got != nil {
					t.Fatalf("AddEvent: valid stream: %v", got)
				}
				return
			}
			wantViolation(t, got, eventSeq, eventCode)
		})
	}
	// Every code but the one CheckDigest reports has a minimal stream.
	for _, c := range Codes {
		if !seen[c.Code] && c.Code != CodeStateDigestMismatch {
			t.Errorf("no test stream produces %s", c.Code)
		}
	}
}

func TestViolationIsStickyAndSummaryStopsBeforeIt(t *testing.T) {
	s := base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2)).add(attemptEv(t0+3*sec, "g1", "w1", digestA, 2))
	s.add(effectEv(t0+4*sec, "g1", "w1", "confirmed", "v1", 3))
	v, got := check(s.raw, true)
	wantViolation(t, got, 4, CodeDoubleAttempt)
	if want := "violation at seq 4: double_attempt: grant g1 already attempted at seq 3"; got.Error() != want {
		t.Errorf("Error() = %q, want %q", got.Error(), want)
	}
	if err := v.Add(s.raw[4], 5); err != got {
		t.Errorf("Add after a violation = %v, want the first violation", err)
	}
	var vi *Violation
	if !errors.As(v.AddEvent(s.evs[4]), &vi) || vi != got {
		t.Errorf("AddEvent after a violation did not return the first violation")
	}
	sum := v.Summary()
	if sum.Events != 3 || sum.LastSeq != 3 || sum.Head != s.evs[2].Hash || sum.Spent != 1 || sum.Unresolved != 1 {
		t.Errorf("summary after violation = %+v", sum)
	}
}

func TestValidStreamSummary(t *testing.T) {
	s := validStream()
	v, got := check(s.raw, true)
	if got != nil {
		t.Fatal(got)
	}
	sum := v.Summary()
	want := Summary{
		Events: 10, FirstSeq: 1, LastSeq: 10, Head: s.evs[9].Hash, FirstTime: t0, LastTime: t0 + 9*sec,
		Projection: v.Digest(),
		Kinds: map[string]uint64{"epoch": 1, "permit": 2, "attempt": 1, "effect": 1, "deny": 1,
			"spend_refused": 1, "effect_refused": 1, "revoke": 1, "reinstate": 1},
		Permitted: 2, Spent: 1, Cancelled: 1,
		Closed:  map[string]uint64{"confirmed": 1, "failed": 0, "unknown": 0, "contested": 0},
		Tracked: 2,
	}
	gotJSON, _ := json.Marshal(sum)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("summary\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if sum.Projection.IsZero() {
		t.Error("no projection digest")
	}
}

func TestEffectsCollapseAndContest(t *testing.T) {
	type eff struct{ outcome, verifier string }
	cases := []struct {
		name      string
		effects   []eff
		closed    string // final outcome
		contested uint64
	}{
		{"one confirmation", []eff{{"confirmed", "v1"}}, "confirmed", 0},
		{"duplicate confirmations collapse", []eff{{"confirmed", "v1"}, {"confirmed", "v1"}, {"confirmed", "v2"}}, "confirmed", 0},
		{"unknown then a definite outcome", []eff{{"unknown", "v1"}, {"failed", "v2"}}, "failed", 0},
		{"unknown does not replace a definite outcome", []eff{{"confirmed", "v1"}, {"unknown", "v2"}}, "confirmed", 0},
		{"conflicting outcomes are contested", []eff{{"confirmed", "v1"}, {"failed", "v2"}}, "contested", 1},
		{"the issuer's contested event", []eff{{"confirmed", "v1"}, {"contested", "v2"}}, "contested", 1},
		{"contested stays contested", []eff{{"confirmed", "v1"}, {"failed", "v2"}, {"confirmed", "v1"}, {"unknown", "v3"}}, "contested", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base().add(attemptEv(t0+2*sec, "g1", "w1", digestA, 2))
			for i, e := range tc.effects {
				s.add(effectEv(t0+int64(3+i)*sec, "g1", "w1", e.outcome, e.verifier, 3))
			}
			// A second grant that is spent and never reported.
			s.add(permitEv(t0+20*sec, "g2", "w1", digestB, 60*sec, 1))
			s.add(attemptEv(t0+21*sec, "g2", "w1", digestB, s.chain.Seq))
			v, got := check(s.raw, true)
			if got != nil {
				t.Fatal(got)
			}
			sum := v.Summary()
			for o, n := range sum.Closed {
				want := uint64(0)
				if o == tc.closed {
					want = 1
				}
				if n != want {
					t.Errorf("closed[%s] = %d, want %d (%v)", o, n, want, sum.Closed)
				}
			}
			if sum.Contested != tc.contested || sum.Spent != 2 || sum.Unresolved != 1 || sum.Kinds["effect"] != uint64(len(tc.effects)) {
				t.Errorf("summary = %+v", sum)
			}
		})
	}
}

// tamperBase is a real stream from the state machine, long enough to
// tamper with in the middle.
func tamperBase(t *testing.T) (*sim, [][]byte, []events.Event) {
	t.Helper()
	m := workload(7, 40)
	raw := m.raw()
	if len(raw) < 30 {
		t.Fatalf("workload produced only %d events", len(raw))
	}
	evs := make([]events.Event, len(raw))
	for i, b := range raw {
		e, err := events.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = e
	}
	if _, got := check(raw, true); got != nil {
		t.Fatalf("untampered stream: %v", got)
	}
	return m, raw, evs
}

func TestTamperFlipEveryBit(t *testing.T) {
	_, raw, _ := tamperBase(t)
	for _, k := range []int{0, len(raw) / 2, len(raw) - 1} {
		seq := uint64(k + 1)
		for bit := range len(raw[k]) * 8 {
			bad := slices.Clone(raw[k])
			bad[bit/8] ^= 1 << (bit % 8)
			// The message on its own, as the first of a window at its seq
			// (with and without a stream sequence) ...
			for _, ss := range []uint64{seq, 0} {
				v := NewVerifier(Options{From: seq})
				if got := asViolation(v.Add(bad, ss)); got == nil || got.Seq != seq || got.Code != CodeDecode {
					t.Fatalf("seq %d bit %d flipped (stream seq %d): got %v, want decode at seq %d", seq, bit, ss, got, seq)
				}
			}
			// ... and, for a sample of bits, in the whole stream.
			if bit%37 == 0 {
				stream := slices.Clone(raw)
				stream[k] = bad
				if _, got := check(stream, true); got == nil || got.Seq != seq || got.Code != CodeDecode {
					t.Fatalf("seq %d bit %d flipped in the stream: got %v, want decode at seq %d", seq, bit, got, seq)
				}
			}
		}
	}
}

func TestTamper(t *testing.T) {
	m, raw, evs := tamperBase(t)
	n := len(raw)
	k := n / 2 // 0-based index of the tampered event
	seq := uint64(k + 1)

	t.Run("truncate a message", func(t *testing.T) {
		for _, cut := range []int{1, len(raw[k]) / 2, len(raw[k]) - 1} {
			bad := slices.Clone(raw)
			bad[k] = raw[k][:cut]
			_, got := check(bad, true)
			wantViolation(t, got, seq, CodeDecode)
		}
		bad := slices.Clone(raw)
		bad[k] = append(slices.Clone(raw[k]), 0) // trailing garbage
		_, got := check(bad, true)
		wantViolation(t, got, seq, CodeDecode)
	})
	t.Run("reorder two events", func(t *testing.T) {
		bad := slices.Clone(raw)
		bad[k], bad[k+1] = bad[k+1], bad[k]
		_, got := check(bad, true) // republished: stream seq k holds event k+1
		wantViolation(t, got, seq, CodeStreamSeqMismatch)
		badEv := slices.Clone(evs)
		badEv[k], badEv[k+1] = badEv[k+1], badEv[k]
		_, got = checkEvents(badEv, Options{})
		wantViolation(t, got, seq, CodeSeqGap)
	})
	t.Run("delete an event from the stream", func(t *testing.T) {
		// A JetStream delete leaves a hole in the stream sequences.
		v := NewVerifier(Options{})
		var got error
		for i, b := range raw {
			if i == k {
				continue
			}
			if got = v.Add(b, uint64(i+1)); got != nil {
				break
			}
		}
		wantViolation(t, asViolation(got), seq, CodeSeqGap)
		// Republished without it: the next event takes its stream seq.
		bad := slices.Delete(slices.Clone(raw), k, k+1)
		_, vi := check(bad, true)
		wantViolation(t, vi, seq, CodeStreamSeqMismatch)
		_, vi = check(bad, false)
		wantViolation(t, vi, seq, CodeSeqGap)
	})
	t.Run("duplicate an event", func(t *testing.T) {
		bad := slices.Insert(slices.Clone(evs), k+1, evs[k])
		_, got := checkEvents(bad, Options{})
		wantViolation(t, got, seq+1, CodeSeqGap)
	})
	t.Run("rewrite and reseal an event", func(t *testing.T) {
		e := evs[k]
		e.Worker, e.Time = "mallory", e.Time+1
		bad := slices.Clone(raw)
		bad[k] = e.Seal(nil) // a consistent event, but not the one chained
		_, got := check(bad, true)
		wantViolation(t, got, seq+1, CodeChainBroken)
	})
	t.Run("truncate the stream", func(t *testing.T) {
		// A shorter stream is a valid prefix; what gives it away is the
		// head and projection digest the issuer reports for the full one.
		v, got := check(raw[:n-3], true)
		if got != nil {
			t.Fatal(got)
		}
		want := m.s.Digest()
		wantViolation(t, asViolation(v.CheckDigest(want)), uint64(n-3), CodeStateDigestMismatch)
		if !strings.Contains(v.Violation().Detail, want.String()) {
			t.Errorf("detail %q does not name the expected digest", v.Violation().Detail)
		}
	})
}

func withExpiry(e events.Event, expiresAt int64) events.Event {
	e.ExpiresAt = expiresAt
	return e
}

func asViolation(err error) *Violation {
	var v *Violation
	errors.As(err, &v)
	return v
}

// TestProjectionMatchesIssuer drives the real state machine with a random
// workload and checks that the auditor finds no violation in what it wrote
// and that folding the receipts gives the issuer's digest after every
// batch.
func TestProjectionMatchesIssuer(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		m := workload(seed, 600)
		raw := m.raw()
		v := NewVerifier(Options{})
		checked := 0
		for i, b := range raw {
			if err := v.Add(b, uint64(i+1)); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if want, ok := m.digests[uint64(i+1)]; ok {
				if got := v.Digest(); got != want {
					t.Fatalf("seed %d: projection digest at seq %d = %s, issuer's %s", seed, i+1, got.Short(), want.Short())
				}
				checked++
			}
			if i%97 == 0 {
				if got, want := v.Tracked(), v.Projection().Stats().Grants; got != want {
					t.Fatalf("seed %d seq %d: auditor tracks %d grants, issuer holds %d", seed, i+1, got, want)
				}
			}
		}
		if err := v.CheckDigest(m.s.Digest()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got, want := v.Projection().Stats().Sources, m.s.Stats().Sources; got != want {
			t.Fatalf("seed %d: the projection holds %d sources, the issuer %d", seed, got, want)
		}
		sum := v.Summary()
		if sum.Head != m.s.Chain().Head || sum.Events != uint64(len(raw)) {
			t.Fatalf("seed %d: summary %+v, issuer head %s", seed, sum, m.s.Chain().Head.Short())
		}
		// Every attempt either got an effect or is unresolved.
		var closed uint64
		for _, n := range sum.Closed {
			closed += n
		}
		if sum.Spent != closed+sum.Unresolved || sum.Spent != sum.Kinds["attempt"] || sum.Permitted != sum.Kinds["permit"] {
			t.Fatalf("seed %d: inconsistent counts %+v", seed, sum)
		}
		if sum.Kinds["attempt"] == 0 || sum.Kinds["effect"] == 0 || sum.Kinds["spend_refused"] == 0 || sum.Kinds["revoke"] == 0 ||
			sum.Kinds["epoch"] < 2 || sum.Kinds["source"] == 0 {
			t.Fatalf("seed %d: workload too narrow: %v", seed, sum.Kinds)
		}
		t.Logf("seed %d: %d events, %d digests compared, kinds %v, closed %v, unresolved %d, tracked %d",
			seed, len(raw), checked, sum.Kinds, sum.Closed, sum.Unresolved, sum.Tracked)
	}
}

// TestPartialCheck starts the Verifier in the middle of a valid stream at
// every position: it must find nothing, and still catch what happens
// inside its window.
func TestPartialCheck(t *testing.T) {
	m := workload(3, 300)
	raw := m.raw()
	for from := 2; from <= len(raw); from += 1 + from/50 {
		v := NewVerifier(Options{From: uint64(from)})
		for i := from - 1; i < len(raw); i++ {
			if err := v.Add(raw[i], uint64(i+1)); err != nil {
				t.Fatalf("from %d: %v", from, err)
			}
		}
		if !v.Digest().IsZero() || v.Summary().FirstSeq != uint64(from) {
			t.Fatalf("from %d: summary %+v", from, v.Summary())
		}
	}

	// Inside the window (From 4): a double attempt of a grant permitted
	// before it, an attempt of a grant cancelled inside it, an effect with
	// no verifier.
	window := func(last events.Event) []events.Event {
		s := base().add(permitEv(t0+2*sec, "g2", "w2", digestB, 60*sec, 1))      // 3
		s.add(withExpiry(attemptEv(t0+3*sec, "g1", "w1", digestA, 2), g1Expiry)) // 4
		s.add(events.Event{Kind: events.KindRevoke, Time: t0 + 4*sec, Counters: []events.Counter{{Key: "worker/w2", Value: 1}}, Cancelled: []string{"g2"}})
		s.add(last) // 6
		return s.evs[3:]
	}
	_, got := checkEvents(window(withExpiry(attemptEv(t0+5*sec, "g1", "w1", digestA, 2), g1Expiry)), Options{From: 4})
	wantViolation(t, got, 6, CodeDoubleAttempt)
	_, got = checkEvents(window(withExpiry(attemptEv(t0+5*sec, "g2", "w2", digestB, 3), t0+62*sec)), Options{From: 4})
	wantViolation(t, got, 6, CodeAttemptAfterRevocation)
	_, got = checkEvents(window(effectEv(t0+5*sec, "g1", "w1", "confirmed", "", 4)), Options{From: 4})
	wantViolation(t, got, 6, CodeEffectMissingVerifier)
	_, got = checkEvents(window(effectEv(t0+5*sec, "g1", "w1", "confirmed", "v1", 4)), Options{From: 4})
	if got != nil {
		t.Fatal(got)
	}
	// The first event's prev is trusted, the second's is not.
	bad := slices.Clone(window(effectEv(t0+5*sec, "g1", "w1", "confirmed", "v1", 4)))
	bad[1].Prev = events.Hash{1}
	_, got = checkEvents(bad, Options{From: 4})
	wantViolation(t, got, 5, CodeChainBroken)
}

// TestMemoryFollowsLiveAuthority feeds a long stream of short-lived grants
// and checks that the Verifier only remembers those still live.
func TestMemoryFollowsLiveAuthority(t *testing.T) {
	v := NewVerifier(Options{})
	var c events.Chain
	add := func(e events.Event) {
		raw := c.Append(&e, nil)
		if err := v.Add(raw, c.Seq); err != nil {
			t.Fatal(err)
		}
	}
	add(epochEv(t0, 1))
	const grantsN = 20000
	step := sec / 10 // 10 grants a second, each living 60s + RetainMargin
	maxTracked := 0
	for i := range grantsN {
		now := t0 + int64(i)*step
		id := "g" + strconv.Itoa(i)
		add(permitEv(now, id, "w1", digestA, 60*sec, 1))
		permitSeq := c.Seq
		add(attemptEv(now, id, "w1", digestA, permitSeq))
		if i%2 == 0 {
			add(effectEv(now, id, "w1", "confirmed", "v1", c.Seq))
		}
		maxTracked = max(maxTracked, v.Tracked())
	}
	window := int((60*sec + fsm.RetainMargin) / step)
	if maxTracked > window+1 {
		t.Errorf("tracked up to %d grants, live window holds %d", maxTracked, window)
	}
	if got, want := v.Tracked(), v.Projection().Stats().Grants; got != want {
		t.Errorf("auditor tracks %d grants, projection %d", got, want)
	}
	sum := v.Summary()
	if sum.Unresolved != grantsN/2 || sum.Closed["confirmed"] != grantsN/2 {
		t.Errorf("summary %+v", sum)
	}
}

func TestCodesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes {
		if seen[c.Code] || c.Meaning == "" {
			t.Errorf("code %q repeated or undocumented", c.Code)
		}
		seen[c.Code] = true
	}
	for _, c := range []string{CodeDecode, CodeStreamSeqMismatch, CodeSeqGap, CodeChainBroken, CodeUnknownKind,
		CodeInvalidEvent, CodeTimeBackwards, CodeDuplicatePermit, CodeAttemptWithoutPermit, CodeNotGrantee, CodeAttemptDigestMismatch,
		CodeDoubleAttempt, CodeAttemptAfterExpiry, CodeAttemptAfterEpochChange, CodeAttemptAfterRevocation,
		CodeEffectWithoutAttempt, CodeEffectMissingVerifier, CodeEffectBadOutcome, CodePermitWithoutApproval, CodeApprovalNotConsumed,
		CodeFoldFailed, CodeStateDigestMismatch,
		CodeRouteGeneration, CodeRouteDoubleOwner, CodeRouteNotOwner, CodeAttemptAfterRouteEnded} {
		if !seen[c] {
			t.Errorf("code %s missing from Codes", c)
		}
	}
	if len(seen) != 26 {
		t.Errorf("Codes has %d entries, constants 26", len(seen))
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for c := range seen {
		if !strings.Contains(string(doc), "//\t"+c+" ") {
			t.Errorf("code %s is not in the package documentation's table", c)
		}
	}
}

// TestAddEventRefKeepsNoSlice folds a random workload's receipts with
// AddEventRef from one event that DecodeInto reuses, scribbling over its
// lists after every call: the digest still equals the issuer's after
// every batch, and the summary equals Add's, so the verifier keeps none
// of the event's slices.
func TestAddEventRefKeepsNoSlice(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		m := workload(seed, 400)
		raw := m.raw()
		ref := NewVerifier(Options{})
		v := NewVerifier(Options{})
		var e events.Event
		for i, b := range raw {
			if err := ref.Add(b, uint64(i+1)); err != nil {
				t.Fatalf("seed %d: Add: %v", seed, err)
			}
			if err := events.DecodeInto(b, &e); err != nil {
				t.Fatal(err)
			}
			if err := v.AddEventRef(&e); err != nil {
				t.Fatalf("seed %d: AddEventRef: %v", seed, err)
			}
			for j := range e.Counters {
				e.Counters[j] = events.Counter{Key: "scribbled", Value: 99}
			}
			for _, l := range [][]string{e.Cancelled, e.Rules, e.Sources, e.Grounds, e.Origins, e.Candidates, e.Routes} {
				for j := range l {
					l[j] = "scribbled"
				}
			}
			if want, ok := m.digests[uint64(i+1)]; ok {
				if got := v.Digest(); got != want {
					t.Fatalf("seed %d: digest at seq %d = %s, issuer's %s", seed, i+1, got.Short(), want.Short())
				}
			}
		}
		if got, want := v.Summary(), ref.Summary(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: AddEventRef summary %+v, Add's %+v", seed, got, want)
		}
		if err := v.CheckDigest(m.s.Digest()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestAddSharedMatchesAdd: a Verifier fed with AddShared (each message a
// buffer of its own, never touched again, as NATS hands them out) reaches
// the issuer's digest at every checkpoint and Add's summary; a corrupt
// message gets Add's violation.
func TestAddSharedMatchesAdd(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		m := workload(seed, 400)
		raw := m.raw()
		ref := NewVerifier(Options{})
		v := NewVerifier(Options{})
		for i, b := range raw {
			if err := ref.Add(b, uint64(i+1)); err != nil {
				t.Fatalf("seed %d: Add: %v", seed, err)
			}
			if err := v.AddShared(slices.Clone(b), uint64(i+1)); err != nil {
				t.Fatalf("seed %d: AddShared: %v", seed, err)
			}
			if want, ok := m.digests[uint64(i+1)]; ok {
				if got := v.Digest(); got != want {
					t.Fatalf("seed %d: digest at seq %d = %s, issuer's %s", seed, i+1, got.Short(), want.Short())
				}
			}
		}
		if got, want := v.Summary(), ref.Summary(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: AddShared summary %+v, Add's %+v", seed, got, want)
		}
		k := len(raw) / 2
		bad := slices.Clone(raw[k])
		bad[len(bad)/2] ^= 0x04
		want, got := NewVerifier(Options{}), NewVerifier(Options{})
		for i, b := range raw[:k] {
			_ = want.Add(b, uint64(i+1))
			_ = got.AddShared(slices.Clone(b), uint64(i+1))
		}
		werr, gerr := want.Add(bad, uint64(k+1)), got.AddShared(slices.Clone(bad), uint64(k+1))
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Fatalf("seed %d: corrupt message: AddShared %v, Add %v", seed, gerr, werr)
		}
	}
}
