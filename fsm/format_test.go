package fsm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// raiseBatch raises the receipt format level; it records no event, so it
// can go before a scenario without moving its sequence numbers or clock.
func raiseBatch(level uint64) fsm.Batch {
	return fsm.Batch{Node: "n1", Commands: []fsm.Command{{Op: fsm.OpRaiseFormat, Caller: "issuer:n1", Format: level}}}
}

// applyAt applies batches to a fresh state raised to level first (1: not
// raised), with the raft indexes a plain run of them would have.
func applyAt(t *testing.T, level uint64, batches []fsm.Batch) *fsm.State {
	t.Helper()
	s := fsm.New()
	if level > fsm.ReceiptFormatLegacy {
		if env := fsm.Apply(s, 0, raiseBatch(level))[0]; env.Decision != grants.Permit {
			t.Fatalf("raise to %d: %+v", level, env)
		}
	}
	for i, b := range batches {
		fsm.Apply(s, uint64(i+1), b)
	}
	return s
}

// At the legacy level Decide writes exactly what the build before levels
// wrote: the seed scenarios give, byte for byte, the streams recorded at
// commit bf5b225 (testdata/streams), and reach the digest recorded there.
func TestLegacyLevelWritesEarlierStreams(t *testing.T) {
	for name, seeds := range map[string][]fsm.Batch{
		"seed-v1-bf5b225.stream": seedBatches(),
		"seed-v2-bf5b225.stream": seedBatchesV2(),
	} {
		raw, digest := readStream(t, filepath.Join("testdata", "streams", name))
		s := applyAt(t, fsm.ReceiptFormatLegacy, seeds)
		if s.ReceiptFormat() != fsm.ReceiptFormatLegacy {
			t.Fatalf("%s: level %d", name, s.ReceiptFormat())
		}
		got := s.Outbox(0, 0)
		// The scenarios confirm some receipts published; compare what
		// the outbox still holds with the stream's tail.
		if len(got) == 0 || len(got) > len(raw) {
			t.Fatalf("%s: %d receipts in the outbox, %d in the stream", name, len(got), len(raw))
		}
		tail := raw[len(raw)-len(got):]
		for i, p := range got {
			if !bytes.Equal(p.Data, tail[i]) {
				t.Fatalf("%s: seq %d differs from the earlier build's receipt:\n got  %x\n want %x", name, p.Seq, p.Data, tail[i])
			}
		}
		if s.Chain().Seq != uint64(len(raw)) {
			t.Fatalf("%s: chain at %d, the stream has %d receipts", name, s.Chain().Seq, len(raw))
		}
		if last, err := events.Decode(raw[len(raw)-1]); err != nil || last.Hash != s.Chain().Head {
			t.Fatalf("%s: chain head %s, the stream's last receipt %s (%v)", name, s.Chain().Head.Short(), last.Hash.Short(), err)
		}
		if got := s.Digest().String(); got != digest {
			t.Fatalf("%s: digest %s, the earlier build reached %s", name, got, digest)
		}
	}
}

// At ReceiptFormatFacts permits carry their usage facts and source events
// their descriptor in the source fields; at the legacy level neither does.
// Either way the registry and every record but the chain fold alike.
func TestFormatDecidesTheReceiptForm(t *testing.T) {
	for _, level := range []uint64{fsm.ReceiptFormatLegacy, fsm.ReceiptFormatFacts} {
		s := applyAt(t, level, append(seedBatches(), seedBatchesV2()[1:]...))
		permits, sources := 0, 0
		for _, p := range s.Outbox(0, 0) {
			e, err := events.Decode(p.Data)
			if err != nil {
				t.Fatal(err)
			}
			facts := level >= fsm.ReceiptFormatFacts
			switch e.Kind {
			case events.KindPermit:
				permits++
				if e.Charged != facts {
					t.Fatalf("level %d: permit seq %d charged=%v", level, e.Seq, e.Charged)
				}
			case events.KindSource:
				sources++
				if (e.SourceID != "") != facts || (len(e.Sources) > 0) == facts {
					t.Fatalf("level %d: source seq %d in the wrong form: id %q, sources %v", level, e.Seq, e.SourceID, e.Sources)
				}
			}
			if err := e.StaticValidate(); err != nil {
				t.Fatalf("level %d: %v", level, err)
			}
		}
		if permits == 0 || sources == 0 {
			t.Fatalf("level %d: %d permits and %d source events in the outbox", level, permits, sources)
		}
	}
}

// The level only goes up, is answered without a receipt, is kept out of
// the digest and survives a snapshot; a snapshot written before levels
// existed restores at the legacy level, and one at a level this build
// does not write is refused.
func TestRaiseFormat(t *testing.T) {
	s := applyAt(t, fsm.ReceiptFormatLegacy, seedBatches())
	seq, digest := s.Chain().Seq, s.Digest()
	legacySnap := s.Snapshot()
	ask := func(level uint64) grants.Envelope {
		t.Helper()
		return fsm.Apply(s, 99, fsm.Batch{Time: s.Clock() + 1, Node: "n1", Commands: []fsm.Command{{Op: fsm.OpRaiseFormat, Format: level}}})[0]
	}
	for _, bad := range []uint64{0, fsm.MaxReceiptFormat + 1, 1 << 40} {
		if env := ask(bad); env.Decision != grants.Deny || env.Reason != grants.ReasonUnknownVersion {
			t.Fatalf("raise to %d: %+v", bad, env)
		}
	}
	if env := ask(fsm.ReceiptFormatLegacy); env.Decision != grants.Permit || s.ReceiptFormat() != fsm.ReceiptFormatLegacy {
		t.Fatalf("raise to the level in force: %+v (level %d)", env, s.ReceiptFormat())
	}
	if !bytes.Equal(s.Snapshot(), legacySnap) {
		t.Fatal("asking for the legacy level changed the snapshot")
	}
	if env := ask(fsm.ReceiptFormatFacts); env.Decision != grants.Permit || s.ReceiptFormat() != fsm.ReceiptFormatFacts {
		t.Fatalf("raise to 2: %+v (level %d)", env, s.ReceiptFormat())
	}
	if env := ask(fsm.ReceiptFormatFacts); env.Decision != grants.Permit || s.ReceiptFormat() != fsm.ReceiptFormatFacts {
		t.Fatalf("raise to 2 again: %+v (level %d)", env, s.ReceiptFormat())
	}
	if env := ask(fsm.ReceiptFormatLegacy); env.Decision != grants.Deny || env.Reason != grants.ReasonInvalidRequest || s.ReceiptFormat() != fsm.ReceiptFormatFacts {
		t.Fatalf("lowering to 1: %+v (level %d)", env, s.ReceiptFormat())
	}
	if s.Chain().Seq != seq || s.Digest() != digest {
		t.Fatal("raising the level wrote a receipt or moved the digest")
	}
	snap := s.Snapshot()
	r, err := fsm.Restore(snap)
	if err != nil || r.ReceiptFormat() != fsm.ReceiptFormatFacts || !bytes.Equal(r.Snapshot(), snap) || r.Digest() != digest {
		t.Fatalf("restore at level 2: %v", err)
	}
	if r, err := fsm.Restore(legacySnap); err != nil || r.ReceiptFormat() != fsm.ReceiptFormatLegacy {
		t.Fatalf("restore of the legacy snapshot: %v", err)
	}
	if f := s.Freeze(); !bytes.Equal(f.Encode(), snap) {
		t.Fatal("a frozen view lost the level")
	}
	// The level is the snapshot's last field (tag 22: a two-byte key,
	// then the value): a level above MaxReceiptFormat is one this build
	// does not write, and is refused.
	if n := len(snap); !bytes.Equal(snap[n-3:], []byte{22<<3 | 0x80, 22 >> 4, 2}) {
		t.Fatalf("snapshot ends %x", snap[n-3:])
	}
	bad := append(bytes.Clone(snap[:len(snap)-1]), byte(fsm.MaxReceiptFormat+1))
	if _, err := fsm.Restore(bad); err == nil {
		t.Fatal("a snapshot above the highest level restored")
	}
	one := append(bytes.Clone(snap[:len(snap)-1]), 1)
	if _, err := fsm.Restore(one); err == nil {
		t.Fatal("a snapshot writing the legacy level restored (it is written as absence)")
	}
}

// Snapshots written by earlier builds restore at the legacy level.
func TestEarlierSnapshotsRestoreAtTheLegacyLevel(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "snapshots", "*.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshots (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fsm.Restore(b)
		if err != nil || s.ReceiptFormat() != fsm.ReceiptFormatLegacy {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
