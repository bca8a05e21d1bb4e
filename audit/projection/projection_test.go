package projection

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/receipts"
)

// TestEveryKindIndexed: the scenario writes every kind this build knows
// (route_forgotten a day later, receipts.ForgetRoute), the projection's
// digest equals the issuer's at the head, and the indexes say what
// happened to each grant, review and source.
func TestEveryKindIndexed(t *testing.T) {
	m, at := everyKind(t)
	receipts.ForgetRoute(t, m, at)
	raw := m.Raw()
	kinds := map[events.Kind]bool{}
	for _, b := range raw {
		e, err := events.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		kinds[e.Kind] = true
	}
	for k := events.Kind(1); k < 64; k++ {
		if k.Known() && !kinds[k] {
			t.Errorf("the scenario writes no %s receipt", k)
		}
	}
	d := openTemp(t, "p.db", 5)
	applyAll(t, d, raw)
	st, err := d.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Digest != m.S.Digest() || st.Seq != m.S.Chain().Seq || st.Head != m.S.Chain().Head {
		t.Fatalf("status %+v, issuer seq %d digest %s", st, m.S.Chain().Seq, m.S.Digest())
	}
	if st.Violation != nil || st.VerifiedFrom != 1 {
		t.Fatalf("verification: %+v", st)
	}
	for _, c := range []struct {
		id, closure string
		effects     int
	}{
		{"g1", grants.OutcomeContested, 2}, // confirmed, (v2's repeat wrote nothing), failed -> contested
		{"g2", grants.OutcomeConfirmed, 2},
		{"g3", ClosureUnverified, 0},
		{"g4", ClosureCancelled, 0},
		{"g7", grants.OutcomeConfirmed, 1},
	} {
		g, err := d.Grant(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if g.Closure() != c.closure || len(g.Effects) != c.effects || len(g.Anomalies) != 0 {
			t.Errorf("grant %s: closure %s effects %v anomalies %v, want %s with %d effects", c.id, g.Closure(), g.Effects, g.Anomalies, c.closure, c.effects)
		}
	}
	g1, _ := d.Grant("g1")
	if len(g1.SpendRefused) != 1 || g1.AttemptSeq == 0 {
		t.Errorf("g1: %+v", g1)
	}
	if _, err := d.Grant("g5"); !errors.Is(err, ErrNotFound) {
		t.Errorf("g5 (denied) has a grant record: %v", err)
	}
	for _, c := range []struct {
		ref, status, caption, decider, reply, grant string
		seqs                                        int // receipts naming the review
		consumed, artifact                          bool
	}{
		// Level 3: an approval receipt, consumed by the permit (no
		// review_consumed below level 4).
		{ref: fsm.ReviewID("l1"), status: ReviewConsumed, decider: "operator:bob", grant: "l2", seqs: 3},
		// Level 4: approved by command, consumed by g7's permit and its
		// review_consumed receipt.
		{ref: fsm.ReviewID("g6"), status: ReviewConsumed, caption: "vault-read_v2_review", decider: "operator:alice", grant: "g7", seqs: 4, consumed: true},
		{ref: "q3-report_v1_review", status: ReviewSuperseded, caption: "q3-report_v1_review", seqs: 2, artifact: true},
		{ref: "q3-report_v2_keep", status: ReviewApproved, caption: "q3-report_v2_review", decider: "operator:alice", reply: "q3-report_v2_keep, ship it", seqs: 2, artifact: true},
		{ref: "notes_v1_review", status: ReviewRejected, caption: "notes_v1_review", decider: "operator:alice", reply: "no to notes_v1_review, the numbers are wrong", seqs: 2, artifact: true},
		{ref: fsm.ReviewID("x1"), status: ReviewExpired, caption: "vault-read_v1_review", decider: "operator:alice", seqs: 3},
		{ref: fsm.ReviewID("g8"), status: ReviewOpen, caption: "vault-read_v3_review", seqs: 1},
	} {
		rv, err := d.Review(c.ref)
		if errors.Is(err, ErrNotFound) {
			rv, err = d.ReviewRef(c.ref)
		}
		if err != nil {
			t.Errorf("review %s: %v", c.ref, err)
			continue
		}
		decider, reply := rv.Approver, ""
		if rv.Status == ReviewRejected {
			decider = rv.Rejecter
		}
		if rv.Reply != nil {
			reply = rv.Reply.Text
			if rv.Reply.Sender != "dana" || rv.Reply.Channel != "slack:#finance" || rv.Reply.At == 0 || rv.Reply.Actor != "operator:alice" {
				t.Errorf("review %s: reply %+v", c.ref, rv.Reply)
			}
		}
		if rv.Status != c.status || rv.Caption != c.caption || decider != c.decider || reply != c.reply ||
			rv.GrantID != c.grant || len(rv.Seqs) != c.seqs || (rv.ConsumedSeq != 0) != c.consumed ||
			rv.Open() != (c.status == ReviewOpen) {
			t.Errorf("review %s: %+v", c.ref, rv)
		}
		if c.artifact && (rv.OpenedSeq == 0 || rv.ArtifactPath == "" || rv.ArtifactDigest.IsZero() || rv.ArtifactVersion == 0 ||
			rv.Transition != "review_ready->send" || rv.Destination != "class:finance" || rv.ReviewerRole != "finance" || rv.Worker != "w7") {
			t.Errorf("artifact review %s: %+v", c.ref, rv)
		}
		if c.consumed && rv.ConsumedSeq != rv.PermitSeq+1 {
			t.Errorf("review %s: consumed at seq %d, its permit is seq %d", c.ref, rv.ConsumedSeq, rv.PermitSeq)
		}
	}
	v1, _ := d.ReviewRef("q3-report_v1_keep")
	if v2, _ := d.ReviewRef("q3-report_v2_review"); len(v2.Supersedes) != 1 || v2.Supersedes[0] != v1.ID || v1.SupersededSeq <= v2.OpenedSeq {
		t.Errorf("q3-report v2 supersedes %v, v1 %+v", v2.Supersedes, v1)
	}
	open, _ := d.Reviews(func(r *Review) bool { return r.Open() })
	if len(open) != 1 || open[0].ID != fsm.ReviewID("g8") {
		t.Errorf("open reviews %+v, want rv-g8", open)
	}
	orphans, _ := d.Orphans()
	if len(orphans) != 1 || orphans[0].Reply.Text != "what is this?" || orphans[0].Missing != "decision word" || orphans[0].Reply.Sender != "dana" {
		t.Errorf("orphaned replies: %+v", orphans)
	}
	if s, err := d.Source("ds1"); err != nil || len(s.Registered) != 1 {
		t.Errorf("source ds1: %+v %v", s, err)
	}
	if s, err := d.Source("s1"); err != nil || len(s.Refused) != 1 {
		t.Errorf("source s1 registered again with other content: %+v %v", s, err)
	}
	rows, _ := d.Refusals(Filter{Kind: events.KindRefusalSummary})
	if len(rows) != 1 || rows[0].Count != 17 || rows[0].Worker != "w4" {
		t.Errorf("refusal summaries: %+v", rows)
	}
	rows, _ = d.Refusals(Filter{Reason: "worker_revoked"})
	if len(rows) != 1 || rows[0].Worker != "w2" {
		t.Errorf("worker_revoked rows: %+v", rows)
	}
	tl, _ := d.Timeline(Filter{Worker: "w5"})
	// approval_required, review_approved, permit, review_consumed, attempt,
	// effect, approval_required, break_glass
	if len(tl) != 8 || tl[4].Kind != events.KindReviewConsumed || tl[0].Kind != events.KindBreakGlass || tl[1].Kind != events.KindApprovalRequired || tl[len(tl)-1].Kind != events.KindApprovalRequired {
		t.Errorf("w5 timeline: %d receipts", len(tl))
	}
	tl, _ = d.Timeline(Filter{Lane: "coordinator", Kind: events.KindEffect})
	if len(tl) != 3 || tl[0].GrantID != "rt2" || tl[1].GrantID != "rt1" || tl[2].GrantID != "g7" {
		t.Errorf("coordinator effects: %+v", tl)
	}
	tl, _ = d.Timeline(Filter{Worker: "w7"})
	kinds7 := map[events.Kind]int{}
	for _, e := range tl {
		kinds7[e.Kind]++
	}
	if kinds7[events.KindReviewOpened] != 3 || kinds7[events.KindReviewSuperseded] != 1 || kinds7[events.KindReviewApproved] != 2 ||
		kinds7[events.KindReviewRejected] != 1 || kinds7[events.KindReviewExpired] != 1 {
		t.Errorf("w7 timeline kinds: %v", kinds7)
	}
	if tl, _ = d.Timeline(Filter{Lane: "coordinator", Kind: events.KindReviewExpired}); len(tl) != 1 {
		t.Errorf("review_expired in the coordinator lane (the review's): %d", len(tl))
	}
	ws, _ := d.Workers()
	if len(ws) != 11 { // w1-w8, the fleet's child w8-c, cron1 and cron2
		t.Errorf("workers: %+v", ws)
	}
	cs, _ := d.Cases()
	if len(cs) != 1 || cs[0].ID != "inc-1" || cs[0].Worker != "w5" || cs[0].Actor != "operator" || !cs[0].Active(cs[0].IssuedAt) {
		t.Errorf("break-glass cases: %+v", cs)
	}
	if c, ok, _ := d.ActiveCase("w5", cs[0].ExpiresAt); ok {
		t.Errorf("case %+v still open at its expiry", c)
	}
}

// TestRebuildEqualsIncremental: a projection built in one pass from
// sequence 1, and one built in small steps with the file closed and
// reopened (the fsm state restored from its snapshot) between steps,
// reach the same state digest, which is the issuer's at every step, and
// the same index digest.
func TestRebuildEqualsIncremental(t *testing.T) {
	m, _ := everyKind(t)
	receipts.Workload(m, 1, 200)
	// The issuer restarts from a snapshot halfway: its stream goes on
	// from the restored state.
	restored, err := fsm.Restore(m.S.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if restored.Digest() != m.S.Digest() {
		t.Fatal("restore changed the digest")
	}
	raw0 := m.Raw()
	m.S = restored
	receipts.Workload(m, 2, 200)
	raw := m.Raw() // the outbox is part of the snapshot
	if len(raw) <= len(raw0) {
		t.Fatalf("%d receipts after the restore, %d before", len(raw), len(raw0))
	}

	one := openTemp(t, "one.db", 1<<20)
	applyAll(t, one, raw)

	path := filepath.Join(t.TempDir(), "inc.db")
	for n := 0; n < len(raw); n += 37 {
		cfg := DefaultConfig(path)
		cfg.CommitEvery = 11
		d, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		applyAll(t, d, raw[:min(n+37, len(raw))])
		seq := d.Head().Seq
		if got, want := d.Digest(), m.Digests[seq]; got != want && !want.IsZero() {
			t.Fatalf("after reopening, at seq %d digest %s, issuer %s", seq, got, want)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	inc, err := Open(DefaultConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	defer inc.Close()
	if inc.Digest() != one.Digest() || one.Digest() != m.S.Digest() {
		t.Fatalf("digests: incremental %s, rebuild %s, issuer %s", inc.Digest(), one.Digest(), m.S.Digest())
	}
	a, _ := inc.IndexDigest()
	b, _ := one.IndexDigest()
	if a != b {
		t.Fatalf("index digests differ: incremental %s, rebuild %s", a, b)
	}
	st, _ := inc.Status()
	if st.Violation != nil {
		t.Fatalf("violation: %v", st.Violation)
	}
}

// TestRefusesWhatDoesNotExtend: a receipt with a kind this build does not
// know, a gap, a wrong prev, or bytes that do not decode stop the
// projection with a clear error, and the file still projects the stream
// up to the receipt before (same digests as before the bad receipt).
func TestRefusesWhatDoesNotExtend(t *testing.T) {
	m, _ := everyKind(t)
	raw := m.Raw()
	n := len(raw)
	head := m.S.Chain()
	future := events.Event{Kind: events.Kind(60), Time: m.Now}
	futureRaw := head.Append(&future, nil)
	var gap events.Event = events.Event{Kind: events.KindReinstate, Time: m.Now, Worker: "w1"}
	c := head
	c.Seq++
	gapRaw := c.Append(&gap, nil)
	bad := append([]byte(nil), raw[0]...)
	bad[len(bad)-1] ^= 1
	for _, tc := range []struct {
		name string
		raw  []byte
		want error
	}{
		{"unknown kind", futureRaw, ErrUnknownKind},
		{"gap", gapRaw, ErrChain},
		{"replayed receipt", raw[n-1], ErrChain},
		{"flipped bit", bad, ErrDecode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.db")
			cfg := DefaultConfig(path)
			cfg.CommitEvery = 1 << 20
			d, err := Open(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range raw {
				if err := d.Apply(b, 0); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := d.IndexDigest() // pending receipts are not committed yet
			if err := d.Apply(tc.raw, 0); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			st, _ := d.Status()
			if st.Seq != uint64(n) || st.Digest != m.S.Digest() {
				t.Fatalf("after the refusal the file is at seq %d digest %s, want %d %s", st.Seq, st.Digest, n, m.S.Digest())
			}
			after, _ := d.IndexDigest()
			if after == before {
				t.Fatal("the receipts before the refused one were not committed")
			}
			d.Close()
			ref := openTemp(t, "ref.db", 3)
			applyAll(t, ref, raw)
			want, _ := ref.IndexDigest()
			d2, err := Open(DefaultConfig(path))
			if err != nil {
				t.Fatal(err)
			}
			defer d2.Close()
			if got, _ := d2.IndexDigest(); got != want || d2.Head().Seq != uint64(n) {
				t.Fatal("the refused receipt left something in the file")
			}
		})
	}
}

// TestVerificationRecorded: a stream that breaks an invariant (a second
// attempt of a spent grant) is still projected, and Status names the
// violation an audit.Verifier found.
func TestVerificationRecorded(t *testing.T) {
	m, at := everyKind(t)
	raw := m.Raw()
	e, _ := events.Decode(raw[at["g1"]]) // g1's attempt
	head := m.S.Chain()
	e.Hash, e.Time = events.Hash{}, m.Now
	again := head.Append(&e, nil)
	d := openTemp(t, "p.db", 2)
	applyAll(t, d, append(raw, again))
	st, _ := d.Status()
	if st.Violation == nil || st.Violation.Code != audit.CodeDoubleAttempt || st.Violation.Seq != e.Seq {
		t.Fatalf("violation %+v, want double_attempt at %d", st.Violation, e.Seq)
	}
}

// TestReadOnlyShares: a read-only open of a file another DB holds for
// writing fails with ErrLocked, naming what to do.
func TestReadOnlyLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	d, err := Open(DefaultConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cfg := DefaultConfig(path)
	cfg.ReadOnly = true
	cfg.LockTimeout = 50e6
	if _, err := Open(cfg); !errors.Is(err, ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
}

// TestEffectClosure: a late effect receipt counts only when it ties to
// the grant's attempt, worker and request digest; one that does not is
// kept as an anomaly (and the checks record a violation), the grant stays
// unverified, and the later matching confirmation closes it.
func TestEffectClosure(t *testing.T) {
	m, _ := everyKind(t)
	raw := m.Raw()
	d := openTemp(t, "p.db", 3)
	applyAll(t, d, raw)
	g3, err := d.Grant("g3")
	if err != nil || g3.Closure() != ClosureUnverified {
		t.Fatalf("g3: %+v %v", g3, err)
	}
	c := m.S.Chain()
	eff := func(worker string, ref uint64, digest events.Hash) []byte {
		m.Now += receipts.Sec
		e := events.Event{Kind: events.KindEffect, Time: m.Now, GrantID: "g3", Worker: worker, Outcome: "confirmed",
			Verifier: "late", RefSeq: ref, Digest: digest, Decision: "permit"}
		return c.Append(&e, nil)
	}
	applyAll(t, d, append(raw,
		eff("w3", g3.AttemptSeq+1, g3.Digest),             // not the grant's attempt
		eff("w1", g3.AttemptSeq, g3.Digest),               // another worker
		eff("w3", g3.AttemptSeq, events.Sum([]byte("x"))), // another request
		eff("w3", g3.AttemptSeq, g3.Digest),               // the real confirmation
	))
	g3, _ = d.Grant("g3")
	if len(g3.Anomalies) != 3 || g3.Closure() != "confirmed" || len(g3.Effects) != 4 || len(g3.Verifiers) != 1 {
		t.Fatalf("g3 after late effects: %+v", g3)
	}
	if st, _ := d.Status(); st.Violation == nil || st.Violation.Seq != c.Seq-3 {
		t.Fatalf("the checks did not record the first bad effect: %+v", st.Violation)
	}
	if an, _ := d.GrantsIn(SetAnomalous, nil); len(an) != 1 || an[0].ID != "g3" {
		t.Fatalf("anomalous set: %+v", an)
	}
}

// TestRouteRecord: the scenario's route has one record with every lease
// in order (acquired, renewed, released; acquired and lapsed; taken over
// and ended by a revocation), grants bound to their generation, the route
// receipts in the owners' timelines, and the effect reported under an
// ended generation contested, never clean.
func TestRouteRecord(t *testing.T) {
	m, at := everyKind(t)
	d := openTemp(t, "p.db", 5)
	applyAll(t, d, m.Raw())
	r, err := d.Route(receipts.Route)
	if err != nil {
		t.Fatal(err)
	}
	if r.Gen != 3 || r.Owner != "cron1" || r.End != LeaseRevoked || len(r.Leases) != 3 {
		t.Fatalf("route: %+v", r)
	}
	want := []Lease{
		{Gen: 1, Owner: "cron1", AcquiredSeq: at["route_acquired"], Renewals: []uint64{at["route_renewed"]}, End: LeaseReleased, EndSeq: at["route_released"], Grants: []string{"rt1"}},
		{Gen: 2, Owner: "cron2", End: LeaseLapsed, EndSeq: at["route_lapsed"], Grants: []string{"rt2"}},
		{Gen: 3, Owner: "cron1", AcquiredSeq: at["route_taken"], Taken: true, PrevOwner: "cron2", PrevGen: 2, End: LeaseRevoked, EndSeq: at["route_revoked"]},
	}
	for i, w := range want {
		l := r.Leases[i]
		if l.Gen != w.Gen || l.Owner != w.Owner || l.End != w.End || l.EndSeq != w.EndSeq || l.Taken != w.Taken ||
			l.PrevOwner != w.PrevOwner || l.PrevGen != w.PrevGen || !slices.Equal(l.Grants, w.Grants) ||
			!slices.Equal(l.Renewals, w.Renewals) || (w.AcquiredSeq != 0 && l.AcquiredSeq != w.AcquiredSeq) || l.Lane != "coordinator" {
			t.Errorf("lease %d: %+v, want %+v", i+1, l, w)
		}
	}
	if l := r.Leases[1]; l.EndedAt != l.Expires || l.Live(l.AcquiredAt) {
		t.Errorf("lapsed lease: %+v", l)
	}
	if l := r.Leases[0]; l.Live(l.AcquiredAt) || l.Expires <= l.AcquiredAt+10*receipts.Sec {
		t.Errorf("released lease (renewed to 20s): %+v", l)
	}
	for _, c := range []struct {
		id, closure string
		gen         uint64
		stale       int
	}{
		{"rt1", grants.OutcomeConfirmed, 1, 0},
		{"rt2", grants.OutcomeContested, 2, 1}, // its only effect is route_stale: never clean
	} {
		g, err := d.Grant(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if g.Route != receipts.Route || g.RouteGen != c.gen || g.Closure() != c.closure || len(g.Stale) != c.stale || len(g.Anomalies) != 0 {
			t.Errorf("grant %s: %+v, want %s at generation %d with %d stale effects", c.id, g, c.closure, c.gen, c.stale)
		}
	}
	contested, _ := d.GrantsIn("contested", nil)
	if !slices.ContainsFunc(contested, func(g Grant) bool { return g.ID == "rt2" }) {
		t.Errorf("rt2 not among contested grants: %+v", contested)
	}
	for w, kinds := range map[string][]events.Kind{
		"cron1": {events.KindRouteAcquired, events.KindRouteRenewed, events.KindRouteReleased, events.KindRouteTaken, events.KindRevoke},
		"cron2": {events.KindRouteAcquired, events.KindRouteLapsed},
	} {
		tl, _ := d.Timeline(Filter{Worker: w})
		have := map[events.Kind]bool{}
		for _, e := range tl {
			have[e.Kind] = true
		}
		for _, k := range kinds {
			if !have[k] {
				t.Errorf("%s timeline has no %s", w, k)
			}
		}
	}
	if tl, _ := d.Timeline(Filter{Lane: "coordinator", Kind: events.KindRouteTaken}); len(tl) != 1 {
		t.Errorf("route_taken in the coordinator lane: %d", len(tl))
	}
	if rs, _ := d.Routes(); len(rs) != 1 {
		t.Errorf("routes: %+v", rs)
	}
}

// TestPagesCoverEachRowOnce: walking a query page by page, each page asking
// for rows before the previous page's oldest, yields exactly the rows of
// one unbounded query, in the same order, for every index the web view and
// the tail filters use.
func TestPagesCoverEachRowOnce(t *testing.T) {
	m, _ := everyKind(t)
	d := openTemp(t, "p.db", 5)
	applyAll(t, d, m.Raw())
	timelines := []Filter{{}, {Worker: "w5"}, {Worker: "w7"}, {Lane: "coordinator"}, {Lane: "coordinator", Kind: events.KindEffect}}
	for _, f := range timelines {
		all, err := d.Timeline(Filter{Worker: f.Worker, Lane: f.Lane, Kind: f.Kind, Limit: 1 << 20})
		if err != nil || len(all) < 3 {
			t.Fatalf("%+v: %d receipts, %v: the stream should give every filter a few", f, len(all), err)
		}
		for _, size := range []int{1, 2, 3} {
			var paged []uint64
			for page, before := 0, uint64(0); page <= len(all); page++ {
				p := f
				p.Limit, p.Before = size, before
				rows, err := d.Timeline(p)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) == 0 {
					break
				}
				for _, e := range rows {
					paged = append(paged, e.Seq)
				}
				before = rows[len(rows)-1].Seq
			}
			if len(paged) != len(all) {
				t.Fatalf("%+v in pages of %d: %d receipts, unbounded query %d", f, size, len(paged), len(all))
			}
			for i := range all {
				if paged[i] != all[i].Seq {
					t.Fatalf("%+v in pages of %d: row %d is seq %d, want %d", f, size, i, paged[i], all[i].Seq)
				}
			}
		}
	}
	all, err := d.Refusals(Filter{Limit: 1 << 20})
	if err != nil || len(all) < 3 {
		t.Fatalf("refusals: %d rows, %v", len(all), err)
	}
	var paged []uint64
	for before := uint64(0); ; {
		rows, err := d.Refusals(Filter{Limit: 2, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if before != 0 && r.Seq >= before {
				t.Fatalf("refusal page before %d holds seq %d", before, r.Seq)
			}
			paged = append(paged, r.Seq)
		}
		before = rows[len(rows)-1].Seq
	}
	if len(paged) != len(all) {
		t.Fatalf("refusals in pages: %d rows, unbounded %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i] != all[i].Seq {
			t.Fatalf("refusal row %d is seq %d, want %d", i, paged[i], all[i].Seq)
		}
	}
}
