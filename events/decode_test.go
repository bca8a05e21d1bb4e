package events

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"pgregory.net/rapid"
)

// dirtyEvent is an event with every list and Policy set (with spare
// capacity) and strings everywhere, to decode into with DecodeInto: nothing
// of it may show through.
func dirtyEvent() Event {
	evs, _ := goldenChain()
	e := evs[10] // approval_required: most singular fields
	e.Counters = append(make([]Counter, 0, 8), Counter{Key: "stale/a", Value: 7}, Counter{Key: "stale/b"})
	e.Cancelled = append(make([]string, 0, 8), "stale-1", "stale-2")
	e.Rules = append(make([]string, 0, 8), "stale-rule")
	e.Sources = append(make([]string, 0, 8), "stale-src", "", "x")
	e.Grounds = append(make([]string, 0, 8), "stale ground")
	e.Policy = append(make([]byte, 0, 512), "stale policy"...)
	e.Channel, e.Authority, e.Scope = "stale", "stale", "stale"
	e.ContentDigest = Sum([]byte("stale"))
	return e
}

// fatalf is what the checks below need of a *testing.T or *rapid.T.
type fatalf interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkAgainstReference asserts that Decode and DecodeInto agree with the
// original decoder (refDecode) on in: the same acceptance, the same error
// text, the same event; and that the decoded event does not depend on the
// input buffer afterwards.
func checkAgainstReference(t fatalf, in []byte) {
	t.Helper()
	want, wantErr := refDecode(in)

	buf := append([]byte(nil), in...)
	got, err := Decode(buf)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("Decode error %v, reference %v\n%x", err, wantErr, in)
	}
	// Callers reuse their buffers: scribbling over it must not change
	// the event.
	for i := range buf {
		buf[i] = 0xa5
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode differs from the reference:\n got  %+v\n want %+v", got, want)
	}

	into := dirtyEvent()
	copy(buf, in)
	err = DecodeInto(buf, &into)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("DecodeInto error %v, reference %v\n%x", err, wantErr, in)
	}
	for i := range buf {
		buf[i] = 0x5a
	}
	if !reflect.DeepEqual(normalize(into), normalize(want)) {
		t.Fatalf("DecodeInto differs from the reference:\n got  %+v\n want %+v", into, want)
	}

	// DecodeShared reads a buffer handed over for good: a fresh one,
	// left alone.
	shared := dirtyEvent()
	own := append([]byte(nil), in...)
	err = DecodeShared(own, &shared)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("DecodeShared error %v, reference %v\n%x", err, wantErr, in)
	}
	if !reflect.DeepEqual(normalize(shared), normalize(want)) {
		t.Fatalf("DecodeShared differs from the reference:\n got  %+v\n want %+v", shared, want)
	}
}

// TestDecodeMatchesReference runs the comparison with the original decoder
// over valid events (golden, bench mix, generated), every single-bit
// corruption and truncation of the golden events, and generated field
// sequences, sealed so that they reach the canonical-form checks.
func TestDecodeMatchesReference(t *testing.T) {
	_, encs := goldenChain()
	for _, b := range readGolden(t) {
		encs = append(encs, b)
	}
	encs = append(encs, benchMix().raw[:64]...)
	for _, enc := range encs {
		checkAgainstReference(t, enc)
	}
	// String values that run into bytes shaped like a trailing hash field
	// (which Decode leaves out of its string copy), with and without a
	// real hash field after them.
	fake := string(hashFieldHead[:]) + strings.Repeat("h", 32)
	for _, b := range [][]byte{
		body().str(tagNode, "n").str(tagWorker, "w"+fake),
		body().str(tagNode, "n").str(tagWorker, fake),
		body().str(tagWorker, "w"+fake),
		body().str(tagCancelled, "").str(tagCancelled, fake),
		body().str(tagCounters, "\x01k"+fake),
	} {
		checkAgainstReference(t, b)
		checkAgainstReference(t, sealBody(b))
	}
	// Rejections late in the loop: a kind out of range, a zero digest, a
	// field after the hash.
	checkAgainstReference(t, sealBody(body().key(tagKind, wireVarint).uv(0x10000)))
	checkAgainstReference(t, sealBody(body().str(tagDigest, string(make([]byte, 32)))))
	checkAgainstReference(t, append(sealBody(body().str(tagNode, "n")), raw{}.str(200, "late")...))
	for _, enc := range encs[:13] {
		for i := range enc {
			checkAgainstReference(t, enc[:i])
			for bit := range 8 {
				b := append([]byte(nil), enc...)
				b[i] ^= 1 << bit
				checkAgainstReference(t, b)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		e := genEvent(t)
		checkAgainstReference(t, e.Seal(nil))
	})
	rapid.Check(t, func(t *rapid.T) {
		b := genFields(t)
		if rapid.Bool().Draw(t, "seal") {
			b = sealBody(b)
		}
		checkAgainstReference(t, b)
		checkReaderAgainstReference(t, b[1:])
	})
}

// checkReaderAgainstReference asserts that Reader yields the same fields
// and the same error as the original reader (the state machine decodes its
// commands and snapshots with it).
func checkReaderAgainstReference(t fatalf, in []byte) {
	t.Helper()
	r, ref := NewReader(in), &refReader{data: in}
	var f, g Field
	for {
		ok, refOK := r.Next(&f), ref.Next(&g)
		if ok != refOK || !reflect.DeepEqual(f, g) || r.Offset() != ref.Offset() {
			t.Fatalf("Reader gave %v %+v at %d, reference %v %+v at %d\n%x", ok, f, r.Offset(), refOK, g, ref.Offset(), in)
		}
		if !ok {
			break
		}
	}
	if err, want := r.Err(), ref.Err(); (err == nil) != (want == nil) || err != nil && err.Error() != want.Error() {
		t.Fatalf("Reader error %v, reference %v\n%x", err, want, in)
	}
}

// genFields draws a version byte and a run of fields that is mostly, but
// not always, well formed: known, unknown and hash tags, in or out of
// order, repeated, with either wire type or a bad one, empty or zero
// values, non-minimal varints and counter elements.
func genFields(t *rapid.T) []byte {
	b := raw{Version}
	tag := uint64(0)
	for i := range rapid.IntRange(0, 12).Draw(t, "fields") {
		_ = i
		switch rapid.IntRange(0, 9).Draw(t, "step") {
		case 0:
			tag = rapid.Uint64Range(0, 130).Draw(t, "any_tag")
		case 1, 2:
			// repeat the tag
		default:
			tag += rapid.Uint64Range(1, 6).Draw(t, "tag_step")
		}
		wt := rapid.SampledFrom([]uint8{wireVarint, wireBytes, wireBytes, wireBytes, 1, 5}).Draw(t, "wire")
		b = b.key(tag, wt)
		switch wt {
		case wireVarint:
			if rapid.IntRange(0, 9).Draw(t, "non_minimal") == 0 {
				b = b.bytes(0x81, 0x00)
			} else {
				b = b.uv(rapid.OneOf(rapid.Just[uint64](0), rapid.Uint64Range(1, 300), rapid.Uint64()).Draw(t, "uint"))
			}
		case wireBytes:
			var v []byte
			switch rapid.IntRange(0, 4).Draw(t, "value") {
			case 0:
				v = make([]byte, 32) // a zero hash, or 32 zero bytes
			case 1:
				v = []byte(sumString(rapid.String().Draw(t, "digest_of")))
			case 2: // a counter element, possibly non-minimal
				v = binary.AppendUvarint(nil, rapid.Uint64Range(0, 1000).Draw(t, "counter"))
				if rapid.IntRange(0, 5).Draw(t, "pad") == 0 {
					v = append([]byte{0x80}, v...)
				}
				v = append(v, rapid.StringN(0, 10, -1).Draw(t, "counter_key")...)
			default:
				v = rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "bytes")
			}
			n := uint64(len(v))
			if rapid.IntRange(0, 15).Draw(t, "bad_len") == 0 {
				n += rapid.Uint64Range(1, 1<<30).Draw(t, "extra_len")
			}
			b = b.uv(n).bytes(v...)
		}
	}
	return []byte(b)
}

// TestDecodeIntoReuse decodes a stream of different kinds into one Event:
// each result equals Decode's, strings from earlier events survive, and
// slices are reused rather than reallocated.
func TestDecodeIntoReuse(t *testing.T) {
	_, encs := goldenChain()
	encs = append(encs, benchMix().raw[:40]...)
	var e Event
	var kept []string // strings taken from earlier events
	var keptWant []string
	for round := range 2 {
		for _, enc := range encs {
			buf := append([]byte(nil), enc...)
			if err := DecodeInto(buf, &e); err != nil {
				t.Fatalf("DecodeInto: %v", err)
			}
			clear(buf)
			want := mustDecode(t, enc)
			if !reflect.DeepEqual(normalize(e), normalize(want)) {
				t.Fatalf("round %d seq %d: DecodeInto differs from Decode:\n got  %+v\n want %+v", round, want.Seq, e, want)
			}
			kept = append(kept, e.Worker, e.Decision)
			keptWant = append(keptWant, want.Worker, want.Decision)
			for _, c := range e.Counters {
				kept, keptWant = append(kept, c.Key), append(keptWant, strings.Clone(c.Key))
			}
		}
	}
	if !reflect.DeepEqual(kept, keptWant) {
		t.Fatalf("strings of earlier events changed")
	}

	// After an error the event holds nothing, but keeps its slices' room.
	e = dirtyEvent()
	room := cap(e.Counters)
	bad := append([]byte(nil), encs[1]...)
	bad[len(bad)-1] ^= 1
	if err := DecodeInto(bad, &e); !isOneOf(err, ErrHashMismatch) {
		t.Fatalf("DecodeInto(corrupt) = %v, want ErrHashMismatch", err)
	}
	if !reflect.DeepEqual(normalize(e), Event{}) {
		t.Fatalf("DecodeInto left fields after an error: %+v", e)
	}
	if cap(e.Counters) != room {
		t.Fatalf("DecodeInto dropped the Counters backing array after an error")
	}
}

// TestDecodeSharedAliases: DecodeShared's strings are views of the input
// (what saves the copy), so they change with it, which is why its callers
// promise never to change it; DecodeInto's do not. The lists it reuses
// follow DecodeInto's rule.
func TestDecodeSharedAliases(t *testing.T) {
	_, encs := goldenChain()
	for _, enc := range encs {
		want := mustDecode(t, enc)
		if want.Worker == "" {
			continue
		}
		in := append([]byte(nil), enc...)
		var e Event
		if err := DecodeShared(in, &e); err != nil {
			t.Fatalf("seq %d: DecodeShared: %v", want.Seq, err)
		}
		at := bytes.Index(in, []byte(want.Worker))
		if at < 0 {
			t.Fatalf("seq %d: worker %q not in the encoding", want.Seq, want.Worker)
		}
		inside := func(s string) bool {
			p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
			lo := uintptr(unsafe.Pointer(&in[0]))
			return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(in))
		}
		if !inside(e.Worker) {
			t.Fatalf("seq %d: DecodeShared copied the worker instead of viewing the input", want.Seq)
		}
		var copied Event
		if err := DecodeInto(in, &copied); err != nil {
			t.Fatal(err)
		}
		if inside(copied.Worker) {
			t.Fatalf("seq %d: DecodeInto's worker points into the input", want.Seq)
		}
	}
}

// TestEncodedLen: bodyLen is exactly what appendBody writes, so Seal sizes
// its buffer once. Golden events set every field; generated ones reach the
// edges of the varints, and a long field needs a three-byte length.
func TestEncodedLen(t *testing.T) {
	check := func(t fatalf, e Event) {
		b := e.Encode()
		if n := e.bodyLen() + hashFieldLen; n != len(b) {
			t.Fatalf("bodyLen+hash = %d, encoding has %d bytes: %+v", n, len(b), e)
		}
	}
	for _, e := range goldenEvents() {
		check(t, e)
		e.Detail = strings.Repeat("d", 20000)
		e.Counters = append(e.Counters, Counter{Key: strings.Repeat("k", 200), Value: 1 << 63})
		check(t, e)
	}
	rapid.Check(t, func(t *rapid.T) { check(t, genEvent(t)) })
}

// TestAllocs pins the allocation counts the speed work bought (counts, not
// times): Seal allocates once into nil and never into a buffer with room;
// Decode allocates once for all strings plus once per list present;
// DecodeInto, once its slices have grown, only for the strings.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	mix := benchMix()
	permit, attempt := mix.evs[0], mix.evs[1]
	if permit.Kind != KindPermit || attempt.Kind != KindAttempt {
		t.Fatalf("bench mix starts with %v, %v", permit.Kind, attempt.Kind)
	}
	buf := make([]byte, 0, 1024)
	for _, c := range []struct {
		name string
		want float64
		f    func()
	}{
		{"Seal(nil)", 1, func() { _ = permit.Seal(nil) }},
		{"Seal(buf)", 0, func() { buf = permit.Seal(buf[:0]) }},
		// permit: the strings, Counters, Rules, Sources
		{"Decode(permit)", 4, func() { _, _ = Decode(mix.raw[0]) }},
		// attempt: the strings, Counters
		{"Decode(attempt)", 2, func() { _, _ = Decode(mix.raw[1]) }},
	} {
		if got := testing.AllocsPerRun(100, c.f); got != c.want {
			t.Errorf("%s: %v allocations, want %v", c.name, got, c.want)
		}
	}
	var e Event
	i := 0
	got := testing.AllocsPerRun(100, func() {
		if err := DecodeInto(mix.raw[i%len(mix.raw)], &e); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if got != 1 {
		t.Errorf("DecodeInto over the mix: %v allocations per event, want 1", got)
	}
	got = testing.AllocsPerRun(100, func() {
		if err := DecodeShared(mix.raw[i%len(mix.raw)], &e); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if got != 0 {
		t.Errorf("DecodeShared over the mix: %v allocations per event, want 0", got)
	}
}

// TestSealInPlace: Seal hashes exactly the bytes it appended, whatever the
// buffer held before, and reuses a buffer that has room.
func TestSealInPlace(t *testing.T) {
	e := benchMix().evs[0]
	want := e.Encode()
	buf := append(make([]byte, 0, 1024), "prefix"...)
	out := e.Seal(buf)
	if &out[0] != &buf[:1][0] {
		t.Fatalf("Seal reallocated a buffer with room")
	}
	if !bytes.Equal(out[len("prefix"):], want) || string(out[:len("prefix")]) != "prefix" {
		t.Fatalf("Seal into a buffer: got %x", out)
	}
	if [3]byte(want[len(want)-hashFieldLen:]) != hashFieldHead {
		t.Fatalf("hash field starts %x, want %x", want[len(want)-hashFieldLen:][:3], hashFieldHead)
	}
	if e.Hash != Sum(want[:len(want)-hashFieldLen]) {
		t.Fatalf("Seal hash is not the SHA-256 of the body")
	}
	// An event longer than the spare room of a buffer Seal appends to
	// without measuring: append grows it, the bytes are the same.
	big := e
	big.Detail = strings.Repeat("d", 3*sealSpare)
	if got, want := big.Seal(make([]byte, 0, sealSpare)), big.Encode(); !bytes.Equal(got, want) {
		t.Fatalf("Seal of a long event into a buffer with %d spare bytes differs from Encode", sealSpare)
	}
}
