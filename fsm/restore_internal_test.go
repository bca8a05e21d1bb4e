package fsm

import (
	"errors"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// snap builds a snapshot by hand, field by field, in tag order.
func snap(fields func(w *events.Writer)) []byte {
	w := events.NewWriter(nil)
	w.Byte(snapshotVersion)
	fields(w)
	return w.Bytes()
}

func grantBytes(g grants.Grant) string { return string(encodeGrant(nil, &g)) }

func usageBytes(key string, count, amount, bytes uint64, start, until int64) string {
	return string(encodeUsage(nil, key, count, amount, bytes, start, until))
}

// Restore refuses everything a live state cannot have produced, with
// ErrBadSnapshot and no state.
func TestRestoreRejects(t *testing.T) {
	head := events.Sum([]byte("head"))
	okGrant := grants.Grant{ID: "g1", Worker: "w1", ExpiresAt: 2000, Status: grants.StatusPermitted}
	canon := policy.LegacyDefault().Canonical()
	cases := map[string][]byte{
		"empty":            {},
		"wrong version":    {2},
		"garbage":          {1, 0xff, 0xff, 0xff},
		"unknown tag":      snap(func(w *events.Writer) { w.Uint(15, 1) }),
		"ledger as varint": snap(func(w *events.Writer) { w.Uint(stLedger, 1) }),
		"ledger no key":    snap(func(w *events.Writer) { w.Strings(stLedger, []string{usageBytes("", 1, 0, 0, 0, 5)}) }),
		"ledger no count":  snap(func(w *events.Writer) { w.Strings(stLedger, []string{usageBytes("k", 0, 0, 0, 0, 5)}) }),
		"ledger unordered": snap(func(w *events.Writer) {
			w.Strings(stLedger, []string{usageBytes("b", 1, 0, 0, 0, 5), usageBytes("a", 1, 0, 0, 0, 5)})
		}),
		"ledger dup": snap(func(w *events.Writer) {
			w.Strings(stLedger, []string{usageBytes("a", 1, 0, 0, 0, 5), usageBytes("a", 1, 0, 0, 0, 5)})
		}),
		"ledger quota fields": snap(func(w *events.Writer) { w.Strings(stLedger, []string{usageBytes("a", 1, 0, 9, 0, 5)}) }),
		"ledger past retain": snap(func(w *events.Writer) {
			w.Int(stClock, 5)
			w.Strings(stLedger, []string{usageBytes("a", 1, 0, 0, 0, 5)})
		}),
		"preauth quota field": snap(func(w *events.Writer) { w.Strings(stPreauth, []string{usageBytes("p", 1, 2, 0, 3, 5)}) }),
		"quota backwards":     snap(func(w *events.Writer) { w.Strings(stQuota, []string{usageBytes("q", 1, 0, 0, 9, 5)}) }),
		"usage unknown tag":   snap(func(w *events.Writer) { w.Strings(stQuota, []string{usageBytes("q", 1, 0, 0, 0, 5) + "\x38\x01"}) }),
		"clock as bytes":      snap(func(w *events.Writer) { w.String(stClock, "x") }),
		"epoch as bytes":      snap(func(w *events.Writer) { w.String(stEpoch, "x") }),
		"seq as bytes":        snap(func(w *events.Writer) { w.String(stChainSeq, "x"); w.Hash(stChainHead, head) }),
		"head as varint":      snap(func(w *events.Writer) { w.Uint(stChainSeq, 1); w.Uint(stChainHead, 1) }),
		"seq without head":    snap(func(w *events.Writer) { w.Uint(stChainSeq, 1) }),
		"head without seq":    snap(func(w *events.Writer) { w.Hash(stChainHead, head) }),
		"policy, no epoch":    snap(func(w *events.Writer) { w.Raw(stPolicy, canon) }),
		"epoch, no policy":    snap(func(w *events.Writer) { w.Uint(stEpoch, 1) }),
		"non-canonical pol":   snap(func(w *events.Writer) { w.Uint(stEpoch, 1); w.Raw(stPolicy, append([]byte(" "), canon...)) }),
		"invalid policy":      snap(func(w *events.Writer) { w.Uint(stEpoch, 1); w.String(stPolicy, `{"version":2}`) }),
		"zero counter":        snap(func(w *events.Writer) { writeCounter(w, stCounter, events.Counter{Key: "worker/w1"}) }),
		"bad counter key":     snap(func(w *events.Writer) { writeCounter(w, stCounter, events.Counter{Key: "nope", Value: 1}) }),
		"counters unordered": snap(func(w *events.Writer) {
			writeCounter(w, stCounter, events.Counter{Key: "worker/w2", Value: 1})
			writeCounter(w, stCounter, events.Counter{Key: "worker/w1", Value: 1})
		}),
		"counter varint":     snap(func(w *events.Writer) { w.Strings(stCounter, []string{"\x81\x00worker/w1"}) }),
		"counter as varint":  snap(func(w *events.Writer) { w.Uint(stCounter, 1) }),
		"empty barred":       snap(func(w *events.Writer) { w.Strings(stBarred, []string{""}) }),
		"repeated barred":    snap(func(w *events.Writer) { w.Strings(stBarred, []string{"w1", "w1"}) }),
		"grant as varint":    snap(func(w *events.Writer) { w.Uint(stGrant, 1) }),
		"grant without id":   snap(func(w *events.Writer) { w.Strings(stGrant, []string{grantBytes(grants.Grant{Status: 1})}) }),
		"grant bad status":   snap(func(w *events.Writer) { w.Strings(stGrant, []string{grantBytes(grants.Grant{ID: "g", Status: 9})}) }),
		"grant dup":          snap(func(w *events.Writer) { w.Strings(stGrant, []string{grantBytes(okGrant), grantBytes(okGrant)}) }),
		"grant unknown tag":  snap(func(w *events.Writer) { w.Strings(stGrant, []string{grantBytes(okGrant) + "\xc0\x02\x01"}) }),
		"grant id varint":    snap(func(w *events.Writer) { w.Strings(stGrant, []string{"\x08\x01"}) }),
		"grant status bytes": snap(func(w *events.Writer) { w.Strings(stGrant, []string{"\x0a\x01g\x7a\x01x"}) }),
		"grant past retain": snap(func(w *events.Writer) {
			w.Int(stClock, okGrant.ExpiresAt+RetainMargin)
			w.Strings(stGrant, []string{grantBytes(okGrant)})
		}),
		"idem without key": snap(func(w *events.Writer) {
			w.Strings(stIdem, []string{string(encodeIdem(nil, idemID{Worker: "w1"}, &idemRecord{Until: 5}))})
		}),
		"idem dup": snap(func(w *events.Writer) {
			b := string(encodeIdem(nil, idemID{"w1", "k"}, &idemRecord{Until: 5}))
			w.Strings(stIdem, []string{b, b})
		}),
		"idem past retain": snap(func(w *events.Writer) {
			w.Int(stClock, 5)
			w.Strings(stIdem, []string{string(encodeIdem(nil, idemID{"w1", "k"}, &idemRecord{Until: 5}))})
		}),
		"idem until bytes":  snap(func(w *events.Writer) { w.Strings(stIdem, []string{"\x12\x01k\x62\x01x"}) }),
		"published past":    snap(func(w *events.Writer) { w.Uint(stPublished, 1) }),
		"outbox past chain": snap(func(w *events.Writer) { w.Strings(stOutbox, []string{"\x08\x01\x1a\x01x"}) }),
		"outbox no data": snap(func(w *events.Writer) {
			w.Uint(stChainSeq, 1)
			w.Hash(stChainHead, head)
			w.Strings(stOutbox, []string{"\x08\x01"})
		}),
		"outbox unordered": snap(func(w *events.Writer) {
			w.Uint(stChainSeq, 2)
			w.Hash(stChainHead, head)
			w.Strings(stOutbox, []string{"\x08\x02\x1a\x01x", "\x08\x01\x1a\x01x"})
		}),
		"outbox published": snap(func(w *events.Writer) {
			w.Uint(stChainSeq, 2)
			w.Hash(stChainHead, head)
			w.Uint(stPublished, 1)
			w.Strings(stOutbox, []string{"\x08\x01\x1a\x01x"})
		}),
	}
	for name, data := range cases {
		s, err := Restore(data)
		if err == nil || s != nil || !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: Restore = %v, %v; want nil, ErrBadSnapshot", name, s != nil, err)
		}
	}
	// The hand-built encoding is right: the same state without the fault
	// restores.
	good := snap(func(w *events.Writer) {
		w.Int(stClock, 10)
		w.Uint(stEpoch, 1)
		w.Raw(stPolicy, canon)
		writeCounter(w, stCounter, events.Counter{Key: "worker/w1", Value: 1})
		w.Strings(stBarred, []string{"w1"})
		w.Strings(stGrant, []string{grantBytes(okGrant)})
		w.Strings(stIdem, []string{string(encodeIdem(nil, idemID{"w1", "k"}, &idemRecord{GrantID: "g1", Until: 2000 + RetainMargin}))})
		w.Uint(stChainSeq, 2)
		w.Hash(stChainHead, head)
		w.Strings(stLedger, []string{usageBytes("w1|path:/a", 1, 0, 0, 0, 600)})
		w.Strings(stPreauth, []string{usageBytes("refunds", 2, 150, 0, 0, 900)})
		w.Strings(stQuota, []string{usageBytes("q/worker/w1", 3, 10, 20, 0, 60)})
		w.Uint(stPublished, 1)
		w.Strings(stOutbox, []string{"\x08\x02\x1a\x01x"})
	})
	s, err := Restore(good)
	if err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	if string(s.Snapshot()) != string(good) {
		t.Fatalf("good snapshot does not round-trip")
	}
}

// Evolve keeps the per-worker index consistent even when a replayed stream
// reuses a live grant id for another worker (Decide never does): the old
// worker's revocation must not cancel the new worker's grant.
func TestEvolveReusedGrantIDKeepsIndex(t *testing.T) {
	s := New()
	var c events.Chain
	fold := func(e events.Event) {
		t.Helper()
		c.Append(&e, nil)
		if err := Evolve(s, e); err != nil {
			t.Fatal(err)
		}
	}
	fold(events.Event{Kind: events.KindPermit, Time: 1, GrantID: "g1", Worker: "w1", ExpiresAt: 100})
	fold(events.Event{Kind: events.KindPermit, Time: 1, GrantID: "g1", Worker: "w2", ExpiresAt: 100})
	if got := s.outstanding("w1", 1); len(got) != 0 {
		t.Fatalf("w1 still indexed with %v", got)
	}
	if got := s.outstanding("w2", 1); len(got) != 1 {
		t.Fatalf("w2 outstanding %v", got)
	}
	if _, ok := s.byWorker["w1"]; ok {
		t.Fatal("stale index entry for w1")
	}
}

// Evolve forgets, before it returns, anything an event itself recorded
// whose retention has already passed, so every state it leaves restores.
func TestEvolvePrunesWhatItAdds(t *testing.T) {
	s := New()
	var c events.Chain
	for _, e := range []events.Event{
		{Kind: events.KindEpoch, Time: 10 * RetainMargin, Epoch: 1, Policy: policy.LegacyDefault().Canonical()},
		{Kind: events.KindPermit, Time: 10 * RetainMargin, GrantID: "g1", Worker: "w1", IdemKey: "k", ExpiresAt: 1},
		{Kind: events.KindDeny, Time: 1, Worker: "w1", IdemKey: "k2"},
	} {
		c.Append(&e, nil)
		if err := Evolve(s, e); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.grants) != 0 || len(s.idem) != 0 {
		t.Fatalf("kept %d grants and %d idempotency records past retention", len(s.grants), len(s.idem))
	}
	if _, err := Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
}
