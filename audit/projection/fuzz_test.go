package projection

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzApply: whatever bytes arrive as the next receipt, Apply either
// extends the projection by exactly one receipt or refuses it and leaves
// the committed file as it was; the projection still reaches the issuer's
// digest when the real receipt follows.
func FuzzApply(f *testing.F) {
	m, _ := everyKind(f)
	raw := m.Raw()
	prefix, next := raw[:len(raw)-1], raw[len(raw)-1]
	f.Add(next)
	f.Add(raw[0])
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	path := filepath.Join(f.TempDir(), "base.db")
	{
		d, err := Open(DefaultConfig(path))
		if err != nil {
			f.Fatal(err)
		}
		for _, b := range prefix {
			if err := d.Apply(b, 0); err != nil {
				f.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Open(DefaultConfig(path))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		before, _ := d.IndexDigest()
		if err := d.Apply(data, 0); err != nil {
			if after, _ := d.IndexDigest(); after != before || d.Head().Seq != uint64(len(prefix)) {
				t.Fatalf("a refused receipt changed the projection: %v", err)
			}
			return
		}
		if d.Head().Seq != uint64(len(prefix))+1 {
			t.Fatalf("head at %d after one receipt", d.Head().Seq)
		}
		// Accepted: undo by not flushing (the file is reused by the
		// next input).
		d.tx.Rollback()
		d.tx = nil
	})
}

// FuzzParseGround: any line parses, and a parsed field never holds a
// space.
func FuzzParseGround(f *testing.F) {
	f.Add("field=/to source=s1 authority=evidence counter=source/s1=0 transform=raw")
	f.Add("model_made")
	f.Fuzz(func(t *testing.T, line string) {
		g := ParseGround(line)
		for _, v := range []string{g.Field, g.Source, g.Authority, g.Counter, g.Transform} {
			if bytes.ContainsAny([]byte(v), " \t\n") {
				t.Fatalf("%q parsed to a value with a space: %+v", line, g)
			}
		}
	})
}
