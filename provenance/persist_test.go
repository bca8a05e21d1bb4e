package provenance

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/authority"
)

var update = flag.Bool("update", false, "rewrite testdata/registry-v2.bin")

var goldenOptions = Options{MaxBytes: 8192, WindowSize: 512, Overlap: 64}

// goldenScript registers the content of the golden files. The version 1
// file was written by the version 1 code from the same registrations.
func goldenScript(t testing.TB, r *Registry) {
	mustRegister(t, r, "prompt", authority.ChannelUserPrompt, Instruction, "Please pay my rent to "+iban+" today; ls -la is fine.")
	// 448 = WindowSize-Overlap: the second window starts at "ab", inside the word "qqab".
	long := strings.Repeat("x", 440) + " 4711 qqab rest of the line, invoice 2026-03-04 amount 1200.00 EUR"
	long += strings.Repeat(" filler text", 60)
	mustRegister(t, r, "long", authority.ChannelWebFetch, Evidence, long)
	mustRegister(t, r, "unicode", authority.ChannelFileRead, Preference, "Grüße an ÄRGER über straße, \u212Aelvin 42")
	var flood strings.Builder
	for i := 0; flood.Len() < 12000; i++ {
		flood.WriteString("flood line filler ")
		flood.WriteString(strings.Repeat("z", i%7))
		flood.WriteString("\n")
	}
	flood.WriteString("tail-marker-0042")
	mustRegister(t, r, "flood", authority.ChannelToolResult, Evidence, flood.String())
}

// goldenTraces are the traces both golden files must give. Version 1
// matched "ab" as a token at the cut between two windows, inside "qqab";
// it no longer does.
var goldenTraces = []struct {
	value   string
	sources []string
	auth    Level
}{
	{"ab", nil, Evidence},
	{"qqab", []string{"long"}, Evidence},
	{"4711", []string{"long"}, Evidence},
	{"ls", []string{"prompt"}, Instruction},
	{"1200.00", []string{"long"}, Evidence},
	{"2026-03-04", []string{"long"}, Evidence},
	{"kelvin", []string{"unicode"}, Preference},
	{"GRÜSSE", nil, Evidence},
	{"grüße", []string{"unicode"}, Preference},
	{"tail-marker-0042", []string{"flood"}, Evidence},
	{iban, []string{"prompt"}, Instruction},
	{"please pay my rent to " + iban, []string{"prompt"}, Instruction},
}

func checkGolden(t *testing.T, r *Registry) {
	t.Helper()
	if r.Options() != goldenOptions.withDefaults() {
		t.Fatalf("options %+v", r.Options())
	}
	total, per := r.Bytes()
	if total > goldenOptions.MaxBytes || per["prompt"] == 0 || per["flood"] == 0 {
		t.Fatalf("bytes %d %v", total, per)
	}
	if p := r.Pressure(); len(p) != 1 || p["flood"] != 7168 {
		t.Fatalf("pressure %v", p)
	}
	if d, ok := r.Source("unicode"); !ok || d.Authority != Preference || d.Channel != authority.ChannelFileRead || d.Owner != "alice" {
		t.Fatalf("source %+v", d)
	}
	for _, g := range goldenTraces {
		tr := r.Trace("f", g.value)
		if !reflect.DeepEqual(tr.Sources, g.sources) || tr.Authority != g.auth {
			t.Errorf("%q: %v %v, want %v %v", g.value, tr.Sources, tr.Authority, g.sources, g.auth)
		}
	}
}

func TestGoldenV1(t *testing.T) {
	r, err := LoadFile("testdata/registry-v1.bin", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, r)
	checkInvariants(t, r)
	// Re-encoded as version 2, it decodes to the same registry.
	data, err := r.MarshalBinary()
	if err != nil || data[4] != persistVersion {
		t.Fatal(err, data[:5])
	}
	r2 := NewRegistry(Options{})
	if err := r2.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, r2)
	// Registering into a version 1 registry works as into any.
	mustRegister(t, r, "late", authority.ChannelToolResult, Evidence, "a late result with token zq81")
	if tr := r.Trace("f", "zq81"); !reflect.DeepEqual(tr.Sources, []string{"late"}) {
		t.Fatalf("%+v", tr)
	}
	checkInvariants(t, r)
}

func TestGoldenV2(t *testing.T) {
	r := newRegistry(goldenOptions, 0x5eed)
	goldenScript(t, r)
	checkGolden(t, r)
	data, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	const path = "testdata/registry-v2.bin"
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, golden) {
		t.Fatalf("encoding differs from %s (%d vs %d bytes): a format change needs a new version", path, len(data), len(golden))
	}
	loaded, err := LoadFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, loaded)
	checkInvariants(t, loaded)
	if again, _ := loaded.MarshalBinary(); !bytes.Equal(again, golden) {
		t.Fatal("re-encoding the golden file changes it")
	}
}

// Decoding never aliases the caller's buffer, and registering into a
// loaded registry (which aliases the file's buffer) changes neither the
// file nor an earlier encoding.
func TestDecodeDoesNotAliasInput(t *testing.T) {
	golden, err := os.ReadFile("testdata/registry-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Clone(golden)
	r := NewRegistry(Options{})
	if err := r.UnmarshalBinary(in); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		mustRegister(t, r, "more", authority.ChannelToolResult, Evidence, strings.Repeat("new words here ", 20))
	}
	if !bytes.Equal(in, golden) {
		t.Fatal("UnmarshalBinary's input was modified")
	}
	checkInvariants(t, r)
}

// Structurally invalid encodings with a valid checksum are rejected.
func TestDecodeRejectsBadStructure(t *testing.T) {
	golden, err := os.ReadFile("testdata/registry-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	rejected := 0
	for i := 5; i < len(golden)-4; i += 29 {
		for _, delta := range []byte{1, 0xff} {
			b := bytes.Clone(golden)
			b[i] += delta
			fixCRC(b)
			r := NewRegistry(Options{})
			if err := r.UnmarshalBinary(b); err != nil {
				rejected++
				continue
			}
			// Accepted (e.g. a changed window byte or filter bit): it
			// must still be usable.
			exercise(t, r)
		}
	}
	if rejected == 0 {
		t.Fatal("nothing rejected")
	}
}

func fixCRC(b []byte) {
	if len(b) >= 4 {
		binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	}
}

// exercise uses a decoded registry the ways the hook does; nothing may
// panic, and it must encode to something that decodes.
func exercise(t *testing.T, r *Registry) {
	t.Helper()
	total, _ := r.Bytes()
	if total > r.Options().MaxBytes {
		t.Fatalf("loaded %d bytes over bound", total)
	}
	values := []string{"hello world", "ls", "-", "1200.00", "ab", iban, "flood line filler zzz", "a b", "42"}
	r.mu.RLock()
	for _, s := range r.sources {
		for _, w := range s.windows {
			for _, l := range []int{1, 3, 7, 15, 40} {
				if l <= len(w.data) {
					values = append(values, string(w.data[len(w.data)-l:]))
				}
			}
			break
		}
	}
	r.mu.RUnlock()
	for _, v := range values {
		tr := r.Trace("f", v)
		if tr.ModelMade != (len(tr.Matches) == 0) || tr.ModelMade && tr.Authority != Evidence {
			t.Fatalf("%q: %+v", v, tr)
		}
	}
	d, c := src("fuzz-new", authority.ChannelToolResult, Evidence, strings.Repeat("fresh content 77 ", 40))
	if err := r.Register(d, c); err != nil {
		t.Fatal(err)
	}
	data, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := NewRegistry(Options{}).UnmarshalBinary(data); err != nil {
		t.Fatalf("re-encoding does not decode: %v", err)
	}
}

// v1Encoding encodes, in version 1, one evidence source "s" holding the
// given windows.
func v1Encoding(opt Options, windows ...string) []byte {
	b := []byte("WPRV\x01")
	for _, v := range []int64{opt.MaxBytes, int64(opt.WindowSize), int64(opt.Overlap), 1} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = append(b, 1, 's', 11)
	b = append(b, "tool_result"...)
	b = append(b, 0, byte(ScopeSession), byte(Evidence))
	b = append(b, make([]byte, 32)...)
	b = append(b, 0, 0, 0, byte(len(windows))) // origins, counters, evicted
	for _, w := range windows {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func FuzzUnmarshalBinary(f *testing.F) {
	// Small seeds: the fuzzer minimizes every input that finds new
	// coverage, which takes long for large ones. The golden files are
	// checked by TestGoldenV1 and TestGoldenV2.
	opt := Options{MaxBytes: 1024, WindowSize: 64, Overlap: 16}.withDefaults()
	r := newRegistry(opt, 1)
	d, c := src("s", authority.ChannelToolResult, Evidence, "hello world "+iban+" ls -la; "+strings.Repeat("abcdefgh", 10))
	_ = r.Register(d, c)
	d, c = src("t", authority.ChannelUserPrompt, Instruction, "pay 1200.00 to "+iban)
	_ = r.Register(d, c)
	good, _ := r.MarshalBinary()
	f.Add(good)
	// Version 3: a structured result with fields.
	d, c = src("u", authority.ChannelToolResult, Evidence, `{"messages":[{"sender":"alice","body":"hi bob"}]}`)
	leaves, _ := ResultLeaves(c)
	_ = r.RegisterResult(d, c, leaves)
	withFields, _ := r.MarshalBinary()
	f.Add(withFields)
	f.Add(v1Encoding(opt, "hello world "+iban+" ls -la; abcdefghabcdefghabcdefghabcdefghabcd", "abcdefghabcdefgh tail"))
	f.Add([]byte("WPRV\x01"))
	f.Add([]byte("WPRV\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		if nr := NewRegistry(Options{}); nr.UnmarshalBinary(data) == nil {
			exercise(t, nr)
		}
		// With the checksum fixed, mutations reach the structure checks.
		fixed := bytes.Clone(data)
		fixCRC(fixed)
		if nr := NewRegistry(Options{}); nr.UnmarshalBinary(fixed) == nil {
			exercise(t, nr)
		}
	})
}

// A version 1 source cut into windows: the cut between them is no token
// boundary once decoded (the second window continues the first).
func TestDecodeV1Windows(t *testing.T) {
	opt := Options{MaxBytes: 1024, WindowSize: 64, Overlap: 16}.withDefaults()
	content := strings.Repeat("w", 45) + " qqab " + strings.Repeat("v", 30) + " end"
	step := opt.WindowSize - opt.Overlap
	if !strings.HasPrefix(content[step:], "ab ") {
		t.Fatalf("second window %q", content[step:])
	}
	data := v1Encoding(opt, content[:opt.WindowSize], content[step:])
	r := NewRegistry(Options{})
	if err := r.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	for v, want := range map[string]bool{"ab": false, "qqab": true, "end": true, "ab vvvv": true} {
		if got := len(r.Trace("f", v).Matches) > 0; got != want {
			t.Errorf("%q: matched %v", v, got)
		}
	}
	// Without the continuation, the second window's start is a content
	// edge, as version 1 took it.
	data = v1Encoding(opt, content[:opt.WindowSize], "ab zz")
	if err := r.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if len(r.Trace("f", "ab").Matches) != 1 {
		t.Error("ab at a content edge")
	}
}
