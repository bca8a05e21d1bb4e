package fsm_test

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/policy"
)

// readStream reads a stream file of testdata/streams: one encoded event
// a line in hex, then "digest <hex>", the state digest the build that
// wrote it reached by applying the commands that produced the events.
func readStream(t *testing.T, path string) ([][]byte, string) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw [][]byte
	digest := ""
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if d, ok := strings.CutPrefix(line, "digest "); ok {
			digest = d
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		raw = append(raw, b)
	}
	if digest == "" || len(raw) == 0 {
		t.Fatalf("%s: no events or no digest", path)
	}
	return raw, digest
}

// Streams written before permits recorded their usage facts and source
// events had fields of their own (by the seed scenarios at commit
// bf5b225: effect-ledger, preauthorization and quota charges, and source
// registrations, one derived and model-made, among them) fold to the
// digest their writer reached: permits without the facts are charged from
// the policy in force, and packed source descriptors read as before.
func TestEarlierStreamsReplayToTheSameDigest(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "streams", "*.stream"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no streams (%v)", err)
	}
	charged, packed := 0, 0
	for _, f := range files {
		raw, want := readStream(t, f)
		s := fsm.New()
		for _, b := range raw {
			e, err := events.Decode(b)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if e.Charged {
				t.Fatalf("%s: seq %d already carries usage facts; the stream tests nothing", f, e.Seq)
			}
			if e.Kind == events.KindPermit && (e.LedgerKey != "" || e.Instrument != "") {
				charged++
			}
			if e.Kind == events.KindSource {
				if e.SourceID != "" {
					t.Fatalf("%s: seq %d already has source fields; the stream tests nothing", f, e.Seq)
				}
				packed++
			}
			if err := fsm.Evolve(s, e); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
		if got := s.Digest().String(); got != want {
			t.Fatalf("%s: replay digest %s, the writer reached %s", f, got, want)
		}
	}
	if charged == 0 || packed == 0 {
		t.Fatalf("the streams have %d permits charging the ledger or a preauthorization and %d source events; want some of each", charged, packed)
	}
}

// Permits record their usage facts, and folding them reads only the
// event: with another policy swapped in while the permits are folded (a
// version 1 policy has no ledger window, preauthorizations or quotas),
// the replayed state is still the live one.
func TestPermitUsageFactsAreAllTheFoldReads(t *testing.T) {
	live := applyAt(t, fsm.ReceiptFormatFacts, seedBatchesV2())
	var ledger, preauth, quotas int
	replay := fsm.New()
	var swapped *policy.Policy
	for _, p := range live.Outbox(0, 0) {
		e, err := events.Decode(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == events.KindPermit {
			if !e.Charged {
				t.Fatalf("permit seq %d does not carry its usage facts", e.Seq)
			}
			if e.LedgerUntil != 0 {
				ledger++
			}
			if e.InstrumentUntil != 0 {
				preauth++
			}
			quotas += len(e.Quotas)
			if swapped == nil {
				swapped = fsm.SwapPolicy(replay, policy.LegacyDefault())
			}
		}
		if e.Kind == events.KindEpoch && swapped != nil {
			fsm.SwapPolicy(replay, swapped)
			swapped = nil
		}
		if err := fsm.Evolve(replay, e); err != nil {
			t.Fatal(err)
		}
	}
	if swapped != nil {
		fsm.SwapPolicy(replay, swapped)
	}
	if ledger == 0 || preauth == 0 || quotas == 0 {
		t.Fatalf("the scenario records %d ledger, %d preauthorization and %d quota facts; want some of each", ledger, preauth, quotas)
	}
	if replay.Digest() != live.Digest() {
		t.Fatal("the replay under another policy differs from the live state: the fold read the policy")
	}
}

// unpackSource rewrites a packed source event (id and origins in
// Sources, the path as a "path:" Target, model-made as a Grounds line) in
// the source fields.
func unpackSource(e *events.Event) {
	e.SourceID, e.Origins, e.SourcePath, e.ModelMade = e.SourceDescriptor()
	e.Origins = slices.Clone(e.Origins)
	e.Sources, e.Target, e.Grounds = nil, "", nil
}

// A stream whose source events carry the descriptor in the source fields
// (resealed as one chain) folds to the registry the packed form Decide
// writes folds to.
func TestSourceEventFormsFoldAlike(t *testing.T) {
	replay := fsm.New()
	var chain events.Chain
	var ids []string
	modelMade, withPath := false, false
	live := fsm.New()
	for i, b := range seedBatches() {
		before := live.Chain().Seq
		fsm.Apply(live, uint64(i+1), b)
		for _, p := range live.Outbox(before, 0) {
			e, err := events.Decode(p.Data)
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == events.KindSource {
				unpackSource(&e)
				ids = append(ids, e.SourceID)
				modelMade = modelMade || e.ModelMade
				withPath = withPath || e.SourcePath != ""
			}
			chain.Append(&e, nil)
			if err := fsm.Evolve(replay, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ids) == 0 || !modelMade || !withPath {
		t.Fatalf("the scenario registers %d sources (model-made: %v, with a path: %v)", len(ids), modelMade, withPath)
	}
	for _, id := range ids {
		got, ok1 := replay.Source(id)
		want, ok2 := live.Source(id)
		if !ok1 || !ok2 || !reflect.DeepEqual(got, want) {
			t.Fatalf("source %s: the source fields fold to %+v (%v), the packed form to %+v (%v)", id, got, ok1, want, ok2)
		}
	}
	if replay.SourceCount() != live.SourceCount() {
		t.Fatalf("%d sources from the source fields, %d from the packed form", replay.SourceCount(), live.SourceCount())
	}
}

// Every event Decide writes passes events.Event.StaticValidate, so a
// replayed or audited stream of them is never refused for its shape.
func TestPropDecidedEventsValidate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness(t)
		for i, n := 0, drawSteps(t); i < n; i++ {
			for _, e := range h.next().evs {
				if err := e.StaticValidate(); err != nil {
					t.Fatalf("Decide wrote an event StaticValidate refuses: %v\n%+v", err, e)
				}
			}
		}
	})
}

// Seed scenarios cover what the property draws rarely (approvals, quota
// windows, derived sources): their events validate too.
func TestSeedEventsValidate(t *testing.T) {
	for _, seeds := range [][]fsm.Batch{seedBatches(), seedBatchesV2()} {
		s := fsm.New()
		for i, b := range seeds {
			before := s.Chain().Seq
			fsm.Apply(s, uint64(i+1), b)
			for _, p := range s.Outbox(before, 0) {
				e, err := events.Decode(p.Data)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.StaticValidate(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// Evolve refuses an event its kind's fields rule out, before folding
// anything of it: a permit that also carries a source id leaves the state
// as it was.
func TestEvolveRefusesInvalidEvents(t *testing.T) {
	s := fsm.New()
	var c events.Chain
	e := events.Event{Kind: events.KindPermit, Time: 1, GrantID: "g1", Worker: "w1", ExpiresAt: 100, SourceID: "s1"}
	c.Append(&e, nil)
	before := s.Digest()
	err := fsm.Evolve(s, e)
	if !errors.Is(err, fsm.ErrReplay) || !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("Evolve: %v", err)
	}
	if s.Digest() != before || s.Chain().Seq != 0 {
		t.Fatal("the refused event changed the state")
	}
	e.SourceID = ""
	var c2 events.Chain
	c2.Append(&e, nil)
	if err := fsm.Evolve(s, e); err != nil {
		t.Fatalf("the same permit without the source id: %v", err)
	}
}
