package fsm_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/fsm"
)

// Snapshots written by earlier builds restore to the same state: the same
// snapshot bytes (so the same digest), every entry scheduled for removal.
// testdata/snapshots/v1-e753700.bin was written at commit e753700 (before
// expiry items were shared per grant and maps shrank) by a run of the
// property harness: grants in every status, idempotency records of
// permits and refusals, counters, barred workers, ledger, preauthorization
// and quota records, sources and an outbox. testdata/snapshots/levels/
// holds snapshots written at raised receipt format levels: v8-fleet.bin
// holds fleet records (snapshot section 30): spawned children with and
// without scopes, a revoked and respawned child, a respawned root whose
// block was lifted, and incarnation counters.
func TestRestoresEarlierSnapshots(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "snapshots", "*.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no snapshots (%v)", err)
	}
	raised, err := filepath.Glob(filepath.Join("testdata", "snapshots", "levels", "*.bin"))
	if err != nil || len(raised) == 0 {
		t.Fatalf("no snapshots at raised levels (%v)", err)
	}
	for _, f := range append(files, raised...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := fsm.Restore(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(s.Snapshot(), b) {
			t.Fatalf("%s: restored state encodes differently", f)
		}
		if _, left := fsm.ExpiryRemovals(s); len(left) > 0 {
			t.Fatalf("%s: entries never scheduled for removal: %v", f, left)
		}
	}
}
