package fsm_test

// Fuzz targets for the bytes the state machine takes from outside: log
// entries (DecodeBatch, Apply) and snapshots (Restore). Run each with
//
//	go test -run='^$' -fuzz=FuzzDecodeBatch -fuzztime=20s ./fsm/
//
// Inputs that once failed are kept in testdata/fuzz/<Target>/.

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// seedBatches is a small scenario used to seed the fuzzers and to build the
// base state FuzzApply starts from: a policy, grants in every status, an
// idempotency record, a revoked source, a barred worker, registered
// sources (one derived) and a grant whose field traces bind them.
func seedBatches() []fsm.Batch {
	d1 := grants.RequestDigest("Bash", []byte(`{"n":1}`))
	d2 := grants.RequestDigest("Bash", []byte(`{"n":2}`))
	d3 := grants.RequestDigest("Read", []byte(`{"n":3}`))
	t0 := int64(1000 * time.Second)
	return []fsm.Batch{
		{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: policy.LegacyDefault().Canonical()},
		}},
		{Time: t0 + 1, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d1, IdemKey: "k1", GrantID: "g1", Sources: []string{"s1"}},
			{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d2, IdemKey: "k2", GrantID: "g2", TTL: int64(10 * time.Second)},
			{Op: fsm.OpRequest, Caller: "w2", Lane: "isolated", Tool: "Read", Digest: d3, IdemKey: "k3", GrantID: "g3"},
			{Op: fsm.OpRequest, Caller: "w3", Lane: "isolated", Tool: "Bash", Digest: d1, IdemKey: "k4", GrantID: "g4"},
			{Op: fsm.OpSpend, Caller: "w1", GrantID: "g2", Digest: d2, IdemKey: "a2"},
			{Op: fsm.OpEffect, Caller: "w1", GrantID: "g2", Outcome: "unknown", Verifier: "v1"},
		}},
		{Time: t0 + 2, Node: "n2", Commands: []fsm.Command{
			{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w2"},
			{Op: fsm.OpRevoke, Caller: "operator:root", Key: "source/s9"},
			{Op: fsm.OpPublished, Caller: "publisher", Seq: 3},
		}},
		{Time: t0 + 3, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSource, Caller: "w1", SourceID: "u1", Channel: "user_prompt", Scope: "task", Session: "sA",
				ContentDigest: events.Sum([]byte("pay bob"))},
			{Op: fsm.OpSource, Caller: "w1", SourceID: "web1", Channel: "web_fetch", Scope: "session",
				ContentDigest: events.Sum([]byte("<html>")), Path: "/work/w1/page.html", Tool: "WebFetch"},
			{Op: fsm.OpSource, Caller: "w1", SourceID: "d1", Channel: "derived", Scope: "task",
				ContentDigest: events.Sum([]byte("bob")), Origins: []string{"web1", "u1"}, ModelMade: true},
			{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d2, IdemKey: "k5", GrantID: "g5",
				Traces: []fsm.Trace{
					{Field: "/command", Covered: true, Matches: []fsm.TraceMatch{{Source: "d1", Transform: "base64", Part: "host"}, {Source: "u1", Transform: "raw"}}},
					{Field: "/cwd"},
				}},
		}},
	}
}

// seedBatchesV2 is a version 2 scenario: the engine scripts' policy,
// permits that charge the effect ledger, a preauthorization and quota
// windows, approval_required answers, approvals (used, live, refused) and
// a refusal.
func seedBatchesV2() []fsm.Batch {
	t0 := int64(1000 * time.Second)
	call := func(c fsm.Command, args string) fsm.Command {
		c.Digest, _ = grants.DigestArgs(c.Tool, []byte(args))
		c.Args, _ = policy.FlattenArgs([]byte(args))
		return c
	}
	return []fsm.Batch{
		{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: scriptPolicy("v2.yaml")},
		}},
		{Time: t0 + 1, Node: "n1", Commands: []fsm.Command{
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "mcp__pay__refund", IdemKey: "k1", GrantID: "g1"}, `{"payee":"cus_1","amount":60}`),
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "send_email", IdemKey: "k2", GrantID: "g2", TargetLabel: "Amy"}, `{"to":"amy@example.com"}`),
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w2", Lane: "isolated", Tool: "Read", IdemKey: "k3", GrantID: "g3", Cwd: "/work/w2/a"}, `{"file_path":"notes.txt"}`),
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w2", Lane: "specialist", Tool: "Bash", IdemKey: "k4", GrantID: "g4"}, `{"command":"sudo ls"}`),
			call(fsm.Command{Op: fsm.OpSpend, Caller: "w2", GrantID: "g3", IdemKey: "a3", Cwd: "/work/w2/b"}, `{"file_path":"notes.txt"}`),
		}},
		{Time: t0 + 2, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSource, Caller: "w1", SourceID: "u2", Channel: "user_prompt", Scope: "task", ContentDigest: events.Sum([]byte("amy"))},
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "send_email", IdemKey: "k6", GrantID: "g6",
				Traces: []fsm.Trace{{Field: "/to", Covered: true, Matches: []fsm.TraceMatch{{Source: "u2", Transform: "raw"}}}}}, `{"to":"amy@example.com","body":"x"}`),
		}},
		// Approvals: g4's review approved and used by g8, g9's approved
		// and left live, g10's left open.
		{Time: t0 + 3, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpApprove, Caller: "operator", ReviewID: fsm.ReviewID("g4"), Note: "ok"},
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w2", Lane: "specialist", Tool: "Bash", IdemKey: "k8", GrantID: "g8"}, `{"command":"sudo ls"}`),
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w2", Lane: "specialist", Tool: "Bash", IdemKey: "k9", GrantID: "g9"}, `{"command":"sudo ls"}`),
			{Op: fsm.OpApprove, Caller: "operator", ReviewID: fsm.ReviewID("g9"), TTL: int64(time.Minute)},
			{Op: fsm.OpApprove, Caller: "operator", ReviewID: fsm.ReviewID("g4")},
			call(fsm.Command{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "vault_read", IdemKey: "k10", GrantID: "g10"}, `{"name":"db"}`),
		}},
	}
}

// seedState applies seedBatches to a fresh state.
func seedState() *fsm.State {
	s := fsm.New()
	for i, b := range seedBatches() {
		fsm.Apply(s, uint64(i+1), b)
	}
	return s
}

// FuzzDecodeBatch: DecodeBatch never panics, refuses with ErrBadEntry, and a
// batch it accepts re-encodes to bytes that decode to the same batch (and
// re-encode to the same bytes, those referenceEncode writes). The batch
// never aliases its input: overwriting the input leaves it as it was.
func FuzzDecodeBatch(f *testing.F) {
	for _, b := range append(append(append(seedBatches(), seedBatchesV2()...), seedBatchesRoutes()...), seedBatchesFleet()...) {
		f.Add(b.Encode())
	}
	f.Add((&fsm.Batch{Time: -1, Commands: []fsm.Command{{}}}).Encode())
	v11 := goldenBatchV11()
	f.Add(v11.Encode())
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := fsm.DecodeBatch(data)
		if err != nil {
			if !errors.Is(err, fsm.ErrBadEntry) {
				t.Fatalf("error %v does not wrap ErrBadEntry", err)
			}
			return
		}
		enc := b.Encode()
		if ref := referenceEncode(b); !bytes.Equal(enc, ref) {
			t.Fatalf("Encode differs from the reference encoding:\n%x\n%x", enc, ref)
		}
		b2, err := fsm.DecodeBatch(enc)
		if err != nil {
			t.Fatalf("re-decoding an encoded batch: %v", err)
		}
		for i := range enc {
			enc[i] = ^enc[i]
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("batch changed across encode/decode:\n%#v\n%#v", b, b2)
		}
		for i := range enc {
			enc[i] = ^enc[i]
		}
		if !bytes.Equal(b2.Encode(), enc) {
			t.Fatalf("encoding is not a fixed point")
		}
	})
}

// FuzzRestore: Restore never panics and refuses with ErrBadSnapshot and no
// state; a snapshot it accepts re-snapshots to bytes that restore to a
// state with the same Digest and the same snapshot bytes.
func FuzzRestore(f *testing.F) {
	s := fsm.New()
	f.Add(s.Snapshot())
	for i, b := range seedBatches() {
		fsm.Apply(s, uint64(i+1), b)
		f.Add(s.Snapshot())
	}
	v2 := fsm.New()
	for i, b := range seedBatchesV2() {
		fsm.Apply(v2, uint64(i+1), b)
		f.Add(v2.Snapshot())
	}
	routes := fsm.New()
	for i, b := range seedBatchesRoutes() {
		fsm.Apply(routes, uint64(i+1), b)
		f.Add(routes.Snapshot())
	}
	fleet := fsm.New()
	for i, b := range seedBatchesFleet() {
		fsm.Apply(fleet, uint64(i+1), b)
		f.Add(fleet.Snapshot())
	}
	f.Add([]byte{1})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := fsm.Restore(data)
		if err != nil {
			if s != nil || !errors.Is(err, fsm.ErrBadSnapshot) {
				t.Fatalf("Restore failed with %v and state %v", err, s != nil)
			}
			return
		}
		snap := s.Snapshot()
		s2, err := fsm.Restore(snap)
		if err != nil {
			t.Fatalf("a restored state's snapshot does not restore: %v", err)
		}
		if s2.Digest() != s.Digest() {
			t.Fatalf("digest changed across snapshot/restore")
		}
		if !bytes.Equal(s2.Snapshot(), snap) {
			t.Fatalf("snapshot bytes changed across restore")
		}
	})
}

// FuzzApply: arbitrary bytes decoded as a batch and applied to a state with
// a policy (version 1, or version 2 when the batch's node is "v2") never
// panic, give one envelope per command, and extend the chain
// with well-formed events (gap-free, linked, verifiable, never earlier than
// the clock, no attempt at or after its grant's expiry) that fold with
// Evolve to the same digest. The same batch on a copy gives the same bytes.
func FuzzApply(f *testing.F) {
	base := seedState().Snapshot()
	v2 := fsm.New()
	for i, b := range seedBatchesV2() {
		fsm.Apply(v2, uint64(i+1), b)
	}
	baseV2 := v2.Snapshot()
	d1 := grants.RequestDigest("Bash", []byte(`{"n":1}`))
	t1 := int64(1001 * time.Second)
	for _, b := range []fsm.Batch{
		{Time: t1, Commands: []fsm.Command{
			{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", Digest: d1, IdemKey: "a1"},
			{Op: fsm.OpEffect, Caller: "w1", GrantID: "g1", Outcome: "confirmed", Verifier: "v"},
		}},
		{Time: t1, Commands: []fsm.Command{
			{Op: fsm.OpRequest, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d1, IdemKey: "k1", GrantID: "g9"},
			{Op: fsm.OpRequest, Caller: "w3", Lane: "coordinator", Tool: "Bash", Digest: d1, GrantID: "g10", TTL: math.MaxInt64},
		}},
		{Time: math.MaxInt64, Commands: []fsm.Command{
			{Op: fsm.OpRequest, Caller: "w3", Lane: "coordinator", Tool: "Bash", Digest: d1, GrantID: "g11"},
			{Op: fsm.OpSpend, Caller: "w3", GrantID: "g11", Digest: d1},
		}},
		{Time: t1, Commands: []fsm.Command{
			// The combined ops of receipt format 11, after the raise.
			{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatGrantSpend},
			{Op: fsm.OpGrantSpend, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d1, IdemKey: "k7", GrantID: "g12"},
			{Op: fsm.OpGrantSpend, Caller: "w1", Lane: "coordinator", Tool: "Bash", Digest: d1, IdemKey: "k7", GrantID: "g13"},
			{Op: fsm.OpEffectSource, Caller: "w1", GrantID: "g12", Outcome: "confirmed", Verifier: "v",
				SourceID: "s-12", Channel: "tool_result", Scope: "task", ContentDigest: d1, Tool: "Bash"},
		}},
		{Time: math.MinInt64, Commands: []fsm.Command{
			{Op: fsm.OpReinstate, Key: "w2"}, {Op: fsm.OpPublished, Seq: math.MaxUint64},
			{Op: fsm.OpSetPolicy, Policy: []byte(`{"version":1,"default_ttl":"1s","lanes":{"x":{"tools":["<<"]}}}`)},
		}},
	} {
		f.Add(b.Encode())
	}
	for _, b := range seedBatches() {
		f.Add(b.Encode())
	}
	for _, b := range seedBatchesV2()[1:] {
		b.Node = "v2"
		f.Add(b.Encode())
	}
	for _, b := range seedBatchesFleet()[1:] {
		b.Node = "v2"
		f.Add(b.Encode())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := fsm.DecodeBatch(data)
		if err != nil {
			return
		}
		start := base
		if b.Node == "v2" { // judge under the version 2 engine
			start = baseV2
		}
		s, err := fsm.Restore(start)
		if err != nil {
			t.Fatal(err)
		}
		twin, _ := fsm.Restore(start)
		replay, _ := fsm.Restore(start)
		head, clock := s.Chain(), s.Clock()
		envs := fsm.Apply(s, 7, b)
		if len(envs) != len(b.Commands) {
			t.Fatalf("%d envelopes for %d commands", len(envs), len(b.Commands))
		}
		// Watermarks in b may have trimmed this batch's own events; the
		// twin, fed b without them, shows every event.
		wb := fsm.Batch{Time: b.Time, Node: b.Node}
		for _, c := range b.Commands {
			if c.Op != fsm.OpPublished {
				wb.Commands = append(wb.Commands, c)
			}
		}
		fsm.Apply(twin, 7, wb)
		if twin.Chain() != s.Chain() || twin.Digest() != s.Digest() {
			t.Fatalf("publication watermarks changed authority")
		}
		expires := map[string]int64{}
		for _, p := range twin.Outbox(head.Seq, 0) {
			e, err := events.Decode(p.Data)
			if err != nil {
				t.Fatalf("seq %d does not decode: %v", p.Seq, err)
			}
			if err := head.Check(e); err != nil {
				t.Fatalf("chain broken: %v", err)
			}
			head.Advance(e)
			if e.Time < clock || e.RaftIndex != 7 || !e.Kind.Known() {
				t.Fatalf("seq %d: time %d (clock %d), raft %d, kind %v", e.Seq, e.Time, clock, e.RaftIndex, e.Kind)
			}
			clock = e.Time
			switch e.Kind {
			case events.KindPermit:
				expires[e.GrantID] = e.ExpiresAt
			case events.KindAttempt:
				if e.Time >= e.ExpiresAt {
					t.Fatalf("attempt seq %d at %d, grant expires %d", e.Seq, e.Time, e.ExpiresAt)
				}
			}
			if err := fsm.Evolve(replay, e); err != nil {
				t.Fatalf("Evolve seq %d: %v", e.Seq, err)
			}
		}
		if head != s.Chain() || s.Clock() != clock {
			t.Fatalf("chain head or clock differs from the events")
		}
		if replay.Digest() != s.Digest() {
			t.Fatalf("replayed digest differs")
		}
		snap := s.Snapshot()
		r, err := fsm.Restore(snap)
		if err != nil {
			t.Fatalf("Restore(Snapshot()) after Apply: %v", err)
		}
		if !bytes.Equal(r.Snapshot(), snap) {
			t.Fatalf("snapshot bytes changed across restore")
		}
	})
}

// FuzzDecodeReply: the reply decode table is total and deterministic;
// every review a reply names is a well-formed caption or keep token that
// reads back to itself; a reply approves only with an acceptance word or
// a keep token in it; and appending a keep token to any text adds exactly
// that version of that slug, never another one.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{"lgtm", "keep", "keep all three", "q3-report_v2_keep", "no", "yes but no",
		"approve it", "report_v2_keep report_v3_keep", "don't approve", "KEEP BOTH!", "x_v0_keep", "a_v01_keep",
		"_v1_keep", "a--b_v1_keep", "a_v1_v2_keep", strings.Repeat("keep ", 2000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		in := fsm.DecodeReply(text)
		if again := fsm.DecodeReply(text); !reflect.DeepEqual(in, again) {
			t.Fatalf("not deterministic: %+v then %+v", in, again)
		}
		if len(in.Refs) > fsm.MaxReplyRefs {
			t.Fatalf("%d refs", len(in.Refs))
		}
		keep := false
		for _, r := range in.Refs {
			if !fsm.ValidSlug(r.Slug) || r.Version == 0 {
				t.Fatalf("bad ref %+v from %q", r, text)
			}
			back := fsm.DecodeReply(r.Token())
			if len(back.Refs) != 1 || back.Refs[0] != r {
				t.Fatalf("ref %+v reads back as %+v", r, back.Refs)
			}
			keep = keep || r.Keep
		}
		if in.Verdict == fsm.VerdictApprove && !keep {
			lower := strings.ToLower(text)
			found := false
			for _, w := range []string{"keep", "approve", "yes", "yep", "yeah", "y", "lgtm", "ok", "accept", "confirm", "proceed", "ship", "ahead", "good"} {
				found = found || strings.Contains(lower, w)
			}
			if !found {
				t.Fatalf("%q approves without an acceptance word", text)
			}
		}
		if len(in.Refs) < fsm.MaxReplyRefs && len(text) < fsm.MaxReplyScan-64 {
			tok := fsm.KeepToken("zz-fuzz", 7)
			more := fsm.DecodeReply(text + " " + tok)
			var added []fsm.ReplyRef
			for _, r := range more.Refs {
				if r.Slug == "zz-fuzz" {
					added = append(added, r)
				}
			}
			had := 0
			for _, r := range in.Refs {
				if r.Slug == "zz-fuzz" {
					had++
				}
			}
			if had == 0 && (len(added) != 1 || added[0].Version != 7 || !added[0].Keep) {
				t.Fatalf("%.200q + %s names %+v", text, tok, added)
			}
		}
	})
}

// seedBatchesRoutes raises the receipt format to the route level under the
// route scripts' policy, then acquires, renews, works under, lets lapse,
// takes over and releases routes, and revokes an owner.
func seedBatchesRoutes() []fsm.Batch {
	t0 := int64(1000 * time.Second)
	read := func(c fsm.Command) fsm.Command {
		args := `{"file_path":"/work/` + c.Caller + `/a"}`
		c.Op, c.Lane, c.Tool = fsm.OpRequest, "coordinator", "Read"
		c.Digest, _ = grants.DigestArgs(c.Tool, []byte(args))
		c.Args, _ = policy.FlattenArgs([]byte(args))
		return c
	}
	return []fsm.Batch{
		{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: scriptPolicy("routes.yaml")},
			{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatRoutes},
		}},
		{Time: t0 + 1, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRouteAcquire, Caller: "w1", Lane: "coordinator", Route: "job-a", TTL: int64(5 * time.Second)},
			{Op: fsm.OpRouteAcquire, Caller: "w2", Lane: "coordinator", Route: "job-a"},
			{Op: fsm.OpRouteAcquire, Caller: "w2", Lane: "coordinator", Route: "job-b"},
			read(fsm.Command{Caller: "w1", GrantID: "g1", IdemKey: "k1", Route: "job-a"}),
			read(fsm.Command{Caller: "w1", GrantID: "g2", IdemKey: "k2", Route: "job-a", RouteGen: 1}),
			{Op: fsm.OpSpend, Caller: "w1", GrantID: "g2", IdemKey: "a2"},
			{Op: fsm.OpRouteRenew, Caller: "w1", Lane: "coordinator", Route: "job-a", TTL: int64(8 * time.Second)},
		}},
		{Time: t0 + int64(20*time.Second), Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRouteLapse, Caller: "issuer:n1", Route: "job-a"},
			{Op: fsm.OpRouteAcquire, Caller: "w3", Lane: "coordinator", Route: "job-a"},
			{Op: fsm.OpSpend, Caller: "w1", GrantID: "g1", IdemKey: "a1"},
			{Op: fsm.OpEffect, Caller: "w1", GrantID: "g2", Outcome: "confirmed", Verifier: "v"},
			{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w3"},
			{Op: fsm.OpRouteAcquire, Caller: "w2", Lane: "coordinator", Route: "job-b"},
			{Op: fsm.OpRouteRelease, Caller: "w2", Route: "job-b"},
		}},
		// A day on, at format level 7: both free records are forgotten and
		// job-b is acquired again above the generation high-water mark.
		{Time: t0 + int64(21*time.Second+fsm.RouteRetention), Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatRouteRetention},
			{Op: fsm.OpRouteForget, Caller: "issuer:n1", Route: "job-a"},
			{Op: fsm.OpRouteForget, Caller: "issuer:n1", Route: "job-b"},
			{Op: fsm.OpRouteAcquire, Caller: "w2", Lane: "coordinator", Route: "job-b"},
		}},
	}
}

// seedBatchesFleet are fleet entries at receipt format level 8 under the
// engine scripts' policy: spawns (one widening), a child's request, a
// restore, a subtree revocation, a respawn and a lift.
func seedBatchesFleet() []fsm.Batch {
	t0 := int64(1000 * time.Second)
	read := `{"file_path":"/work/w1-a/a"}`
	req := fsm.Command{Op: fsm.OpRequest, Caller: "w1-a", Lane: "specialist", Tool: "Read", GrantID: "gf1"}
	req.Digest, _ = grants.DigestArgs("Read", []byte(read))
	req.Args, _ = policy.FlattenArgs([]byte(read))
	return []fsm.Batch{
		{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSetPolicy, Caller: "operator:root", Policy: scriptPolicy("v2.yaml")},
			{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatFleet},
		}},
		{Time: t0, Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpSpawn, Caller: "w1", Key: "w1-a", Lane: "specialist", ParentLane: "specialist",
				ScopeTools: []string{"Read", "Bash"}, ScopeClasses: []string{"local_read"}, ScopeTargets: []string{"path:/work/*"}, TTL: int64(time.Hour)},
			{Op: fsm.OpSpawn, Caller: "w1-a", Key: "w1-a-x", Lane: "isolated", ScopeTools: []string{"Write"}},
			{Op: fsm.OpSpawn, Caller: "w1-a", Key: "w1-a-y", Lane: "isolated", ScopeTools: []string{"Read"}},
			req,
		}},
		{Time: t0 + int64(time.Second), Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRestore, Caller: "w1-a"},
			{Op: fsm.OpSpend, Caller: "w1-a", GrantID: "gf1", Digest: req.Digest},
			{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w1"},
			{Op: fsm.OpRespawn, Caller: "operator:root", Key: "w1", Lane: "specialist", Note: "inc-1"},
			{Op: fsm.OpLift, Caller: "operator:root", Key: "w1"},
		}},
		// Receipt format 12: a spawn names its child's NATS user key.
		{Time: t0 + 2*int64(time.Second), Node: "n1", Commands: []fsm.Command{
			{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: fsm.ReceiptFormatWorkerKeys},
			{Op: fsm.OpSpawn, Caller: "w1", Key: "w1-k", Lane: "isolated", TTL: int64(time.Hour),
				UserKey: "UA5WUJ54Z23KILLCUOUNAKTPBVZWKMQVO4O6EQ5GHLAERIMLLHNCTYM5"},
			{Op: fsm.OpSpawn, Caller: "w1", Key: "w1-j", Lane: "isolated", TTL: int64(time.Hour)},
		}},
	}
}
