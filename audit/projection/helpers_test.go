package projection

import (
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/internal/testing/receipts"
)

func everyKind(t testing.TB) (*receipts.Sim, map[string]uint64) { return receipts.EveryKind(t) }

func openTemp(t *testing.T, name string, commitEvery int) *DB {
	t.Helper()
	cfg := DefaultConfig(filepath.Join(t.TempDir(), name))
	cfg.CommitEvery = commitEvery
	d, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func applyAll(t *testing.T, d *DB, raw [][]byte) {
	t.Helper()
	for _, b := range raw[d.Head().Seq:] {
		if err := d.Apply(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}
