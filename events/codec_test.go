package events

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// genString draws either printable text or arbitrary bytes: the encoding
// carries strings as bytes and must not care which.
func genString(t *rapid.T, label string) string {
	return rapid.OneOf(
		rapid.Just(""),
		rapid.StringN(0, 12, 48),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 24), func(b []byte) string { return string(b) }),
	).Draw(t, label)
}

func genHash(t *rapid.T, label string) Hash {
	if rapid.Bool().Draw(t, label+"_zero") {
		return Hash{}
	}
	h, _ := HashFromBytes(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	return h
}

func genStrings(t *rapid.T, label string) []string {
	n := rapid.IntRange(0, 4).Draw(t, label+"_n")
	var out []string
	for i := range n {
		_ = i
		out = append(out, genString(t, label)) // empty elements included
	}
	return out
}

func genUint(t *rapid.T, label string) uint64 {
	return rapid.OneOf(rapid.Just[uint64](0), rapid.Uint64Range(0, 300), rapid.Uint64()).Draw(t, label)
}

func genInt(t *rapid.T, label string) int64 {
	return rapid.OneOf(rapid.Just[int64](0), rapid.Int64Range(-300, 300), rapid.Int64(),
		rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, -1})).Draw(t, label)
}

// genEvent draws an unsealed event with every field possibly set.
func genEvent(t *rapid.T) Event {
	e := Event{
		Seq:         genUint(t, "seq"),
		Kind:        Kind(rapid.OneOf(rapid.Uint16Range(0, 12), rapid.Uint16()).Draw(t, "kind")),
		RaftIndex:   genUint(t, "raft_index"),
		Time:        genInt(t, "time"),
		Prev:        genHash(t, "prev"),
		Node:        genString(t, "node"),
		GrantID:     genString(t, "grant_id"),
		Worker:      genString(t, "worker"),
		Lane:        genString(t, "lane"),
		Session:     genString(t, "session"),
		Tool:        genString(t, "tool"),
		Digest:      genHash(t, "digest"),
		Epoch:       genUint(t, "epoch"),
		Decision:    genString(t, "decision"),
		Reason:      genString(t, "reason"),
		Missing:     genString(t, "missing"),
		Recovery:    genString(t, "recovery"),
		IssuedAt:    genInt(t, "issued_at"),
		ExpiresAt:   genInt(t, "expires_at"),
		IdemKey:     genString(t, "idem_key"),
		Outcome:     genString(t, "outcome"),
		Verifier:    genString(t, "verifier"),
		RefSeq:      genUint(t, "ref_seq"),
		Cancelled:   genStrings(t, "cancelled"),
		Rules:       genStrings(t, "rules"),
		Target:      genString(t, "target"),
		Consequence: genString(t, "consequence"),
		Actor:       genString(t, "actor"),
		Policy:      rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "policy"),
		// Counters are nested: a value and a key inside one element.
		PolicyDigest: genHash(t, "policy_digest"),
		Sources:      genStrings(t, "sources"),
		Detail:       genString(t, "detail"),
		ReviewID:     genString(t, "review_id"),
		TargetLabel:  genString(t, "target_label"),
		Surface:      genString(t, "surface"),
		Operation:    genString(t, "operation"),
		Instrument:   genString(t, "instrument"),
		// InstrumentLeft, LedgerKey, Cwd and Resolved below.
		Amount: genUint(t, "amount"),
		Bytes:  genUint(t, "bytes"),
	}
	e.InstrumentLeft = genString(t, "instrument_left")
	e.LedgerKey = genString(t, "ledger_key")
	e.Cwd = genString(t, "cwd")
	e.Resolved = genString(t, "resolved")
	e.Charged = rapid.Bool().Draw(t, "charged")
	e.LedgerUntil = genInt(t, "ledger_until")
	e.InstrumentUntil = genInt(t, "instrument_until")
	for range rapid.IntRange(0, 3).Draw(t, "quotas_n") {
		e.Quotas = append(e.Quotas, QuotaWindow{Key: genString(t, "quota_key"), Start: genInt(t, "quota_start"), Until: genInt(t, "quota_until")})
	}
	e.SourceID = genString(t, "source_id")
	e.Origins = genStrings(t, "origins")
	e.SourcePath = genString(t, "source_path")
	e.ModelMade = rapid.Bool().Draw(t, "model_made")
	e.ArtifactPath = genString(t, "artifact_path")
	e.ArtifactVersion = genUint(t, "artifact_version")
	if rapid.Bool().Draw(t, "artifact_digest") {
		e.ArtifactDigest = Sum([]byte(genString(t, "artifact")))
	}
	e.Caption = genString(t, "caption")
	e.Transition = genString(t, "transition")
	e.Destination = genString(t, "destination")
	e.ReviewerRole = genString(t, "reviewer_role")
	e.ReplyChannel = genString(t, "reply_channel")
	e.ReplySender = genString(t, "reply_sender")
	e.ReplyAt = genInt(t, "reply_at")
	e.ReplyText = genString(t, "reply_text")
	e.Candidates = genStrings(t, "candidates")
	e.Route = genString(t, "route")
	e.RouteGen = genUint(t, "route_gen")
	e.PrevOwner = genString(t, "prev_owner")
	e.PrevGen = genUint(t, "prev_gen")
	e.Routes = genStrings(t, "routes")
	e.RouteStale = rapid.Bool().Draw(t, "route_stale")
	e.Parent = genString(t, "parent")
	e.Incarnation = genUint(t, "incarnation")
	e.ScopeTools = genStrings(t, "scope_tools")
	e.ScopeClasses = genStrings(t, "scope_classes")
	e.ScopeTargets = genStrings(t, "scope_targets")
	e.Reviews = genStrings(t, "reviews")
	e.Blocked = rapid.Bool().Draw(t, "blocked")
	e.Workers = genStrings(t, "workers")
	e.ParentLane = genString(t, "parent_lane")
	e.UserKey = genString(t, "user_key")
	for i := range rapid.IntRange(0, 4).Draw(t, "counters_n") {
		_ = i
		e.Counters = append(e.Counters, Counter{Key: genString(t, "counter_key"), Value: genUint(t, "counter_value")})
	}
	return e
}

// TestRoundTrip: Seal then Decode returns the sealed event, and the decoded
// event re-encodes to the same bytes.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEvent(t)
		b := e.Seal(nil)
		if e.Version != Version {
			t.Fatalf("Seal set version %d", e.Version)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Seal(e)): %v\n%x", err, b)
		}
		if !reflect.DeepEqual(normalize(got), normalize(e)) {
			t.Fatalf("round trip changed the event:\n got  %+v\n want %+v", got, e)
		}
		if re := got.Encode(); !bytes.Equal(re, b) {
			t.Fatalf("decoded event re-encodes differently:\n got  %x\n want %x", re, b)
		}
	})
}

// TestEncodeDeterministic: encoding depends only on the event's fields: two
// encodings agree, Encode agrees with Seal, Seal appends after a prefix
// without hashing it, and a stale Hash field does not leak into the output.
func TestEncodeDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genEvent(t)
		want := e.Encode()
		if again := e.Encode(); !bytes.Equal(again, want) {
			t.Fatalf("Encode is not deterministic")
		}
		stale := e
		stale.Hash = genHash(t, "stale_hash")
		stale.Version = rapid.Uint8().Draw(t, "stale_version")
		if got := stale.Encode(); !bytes.Equal(got, want) {
			t.Fatalf("Encode depends on the Hash/Version fields")
		}
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		sealed := e
		out := sealed.Seal(append([]byte(nil), prefix...))
		if !bytes.HasPrefix(out, prefix) || !bytes.Equal(out[len(prefix):], want) {
			t.Fatalf("Seal with a prefix: got %x, want %x + %x", out, prefix, want)
		}
		if d, err := Decode(want); err != nil || sealed.Hash != d.Hash {
			t.Fatalf("Seal set a hash that Decode does not read back: %v", err)
		}
	})
}

// TestWriterOmitsZeroValues: each zero value is omitted from the encoding,
// which is what gives an event a single encoding.
func TestWriterOmitsZeroValues(t *testing.T) {
	w := NewWriter(nil)
	w.Uint(1, 0)
	w.Int(2, 0)
	w.Bool(3, false)
	w.Raw(4, nil)
	w.String(5, "")
	w.Strings(6, nil)
	w.Hash(7, Hash{})
	if w.Len() != 0 {
		t.Fatalf("zero values wrote %x", w.Bytes())
	}
	w.Strings(6, []string{""})
	if !bytes.Equal(w.Bytes(), []byte{6<<3 | wireBytes, 0}) {
		t.Fatalf("an empty list element must keep its position, got %x", w.Bytes())
	}
}

// raw is a hand-written encoding helper for malformed inputs.
type raw []byte

func (r raw) key(tag uint64, wt uint8) raw { return binary.AppendUvarint(r, tag<<3|uint64(wt)) }
func (r raw) uv(v uint64) raw              { return binary.AppendUvarint(r, v) }
func (r raw) bytes(b ...byte) raw          { return append(r, b...) }
func (r raw) str(tag uint64, s string) raw {
	return append(r.key(tag, wireBytes).uv(uint64(len(s))), s...)
}

func body() raw { return raw{Version} }

// TestDecodeRejectsNonCanonical: every way of writing an event other than
// the canonical one is refused with ErrMalformed (the hash is correct, so
// nothing but the form can be at fault).
func TestDecodeRejectsNonCanonical(t *testing.T) {
	var zeroHash [32]byte
	valid := body().key(tagSeq, wireVarint).uv(1).key(tagKind, wireVarint).uv(uint64(KindPermit))
	cases := []struct {
		name   string
		input  []byte // sealed with a correct hash unless noSeal
		noSeal bool
		want   string // substring of the error
	}{
		{name: "non-minimal varint value", input: body().key(tagSeq, wireVarint).bytes(0x81, 0x00), want: "non-minimal varint"},
		{name: "non-minimal varint key", input: body().bytes(tagSeq<<3|0x80, 0x00).uv(1), want: "non-minimal varint"},
		{name: "non-minimal length", input: body().key(tagNode, wireBytes).bytes(0x81, 0x00).bytes('n'), want: "non-minimal varint"},
		{name: "varint overflow", input: body().key(tagSeq, wireVarint).bytes(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), want: "bad varint"},
		{name: "truncated varint", input: body().key(tagSeq, wireVarint).bytes(0x80), noSeal: true, want: "bad varint"},
		{name: "descending tags", input: body().key(tagKind, wireVarint).uv(1).key(tagSeq, wireVarint).uv(1), want: "tag 1 after tag 2"},
		{name: "repeated scalar tag", input: body().key(tagSeq, wireVarint).uv(1).key(tagSeq, wireVarint).uv(2), want: "repeated scalar tag 1"},
		{name: "repeated singular string", input: body().str(tagNode, "a").str(tagNode, "b"), want: "repeated field 6"},
		{name: "repeated hash field", input: body().str(tagPrev, sumString("a")).str(tagPrev, sumString("b")), want: "repeated field 5"},
		{name: "repeated policy", input: body().str(tagPolicy, "{}").str(tagPolicy, "{}"), want: "repeated field 30"},
		{name: "zero varint seq", input: body().key(tagSeq, wireVarint).uv(0), want: "zero value"},
		{name: "zero zig-zag time", input: body().key(tagTime, wireVarint).uv(0), want: "zero value"},
		{name: "zero varint unknown tag", input: body().key(50, wireVarint).uv(0), want: "zero value"},
		{name: "empty singular string", input: body().str(tagNode, ""), want: "empty value"},
		{name: "empty policy", input: body().str(tagPolicy, ""), want: "empty value"},
		{name: "zero prev hash", input: body().str(tagPrev, string(zeroHash[:])), want: "zero hash"},
		{name: "short digest", input: body().str(tagDigest, "0123456789abcdef0123456789abcde"), want: "want 32 bytes"},
		{name: "bytes for a varint field", input: body().str(tagSeq, "1"), want: "tag 1 has wire type 2, want 0"},
		{name: "varint for a string field", input: body().key(tagNode, wireVarint).uv(1), want: "tag 6 has wire type 0, want 2"},
		{name: "huge length", input: body().key(60, wireBytes).uv(MaxFieldLen + 1), noSeal: true, want: "exceeds input"},
		{name: "length past the end", input: body().key(tagNode, wireBytes).uv(1 << 40).bytes('x'), noSeal: true, want: "exceeds input"},
		{name: "max uint64 length", input: body().key(tagNode, wireBytes).uv(math.MaxUint64), noSeal: true, want: "exceeds input"},
		{name: "tag 0", input: body().key(0, wireVarint).uv(1), want: "tag 0"},
		{name: "tag out of range", input: body().key(1<<24+1, wireVarint).uv(1), want: "out of range"},
		{name: "kind out of range", input: body().key(tagKind, wireVarint).uv(0x10000), want: "kind 65536 out of range"},
		{name: "counter without value", input: body().str(tagCounters, ""), want: "counter value"},
		{name: "counter non-minimal value", input: body().str(tagCounters, "\x80\x00worker/w1"), want: "counter value"},
		{name: "missing hash", input: valid, noSeal: true, want: "missing hash"},
		{name: "field after hash", input: raw(sealBody(valid)).key(128, wireVarint).uv(1), noSeal: true, want: "field 128 after hash"},
		{name: "hash field twice", input: append(sealBody(valid), sealBody(nil)...), noSeal: true, want: "field 127 after hash"},
		{name: "hash as varint", input: valid.key(tagHash, wireVarint).uv(1), noSeal: true, want: "tag 127 has wire type 0"},
		{name: "empty input", input: nil, noSeal: true, want: "empty input"},
	}
	// Only wire types 0 and 2 exist, for known and unknown tags alike.
	for _, wt := range []uint8{1, 3, 4, 5, 6, 7} {
		for _, tag := range []uint64{tagSeq, tagNode, 60} {
			cases = append(cases, struct {
				name   string
				input  []byte
				noSeal bool
				want   string
			}{
				name:  fmt.Sprintf("wire type %d on tag %d", wt, tag),
				input: body().key(tag, wt).bytes(1, 2, 3, 4, 5, 6, 7, 8),
				want:  fmt.Sprintf("unknown wire type %d", wt),
			})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input
			if !tc.noSeal {
				in = sealBody(in)
			}
			e, err := Decode(in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode(%x) = %+v, %v; want ErrMalformed", in, e, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if !reflect.DeepEqual(e, Event{}) {
				t.Errorf("a failed Decode returned a partial event: %+v", e)
			}
		})
	}
	// Positive control: the valid body the failing cases start from decodes.
	if e, err := Decode(sealBody(valid)); err != nil || e.Seq != 1 || e.Kind != KindPermit {
		t.Fatalf("control input did not decode: %+v %v", e, err)
	}
}

func sumString(s string) string { h := Sum([]byte(s)); return string(h[:]) }

// TestDecodeVersion: only version 1 decodes; anything else is
// ErrUnsupportedVersion, not ErrMalformed.
func TestDecodeVersion(t *testing.T) {
	good := (&Event{Seq: 1, Kind: KindEpoch}).Seal(nil)
	for _, v := range []byte{0, 2, 0x80, 0xff} {
		b := append([]byte{v}, good[1:]...)
		if _, err := Decode(b); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("version %d: got %v, want ErrUnsupportedVersion", v, err)
		}
	}
	if _, err := Decode(good); err != nil {
		t.Fatalf("version 1 rejected: %v", err)
	}
}

// TestDecodeSkipsUnknownTags: fields from a newer writer (unknown tags of
// either wire type, repeated or not, between the known tags and the hash)
// are skipped on decode but covered by the hash.
func TestDecodeSkipsUnknownTags(t *testing.T) {
	b := body().key(tagSeq, wireVarint).uv(7).
		key(tagKind, wireVarint).uv(uint64(KindRevoke)).
		str(tagWorker, "w1").
		str(tagDetail, "known detail").
		str(100, "future list 1").
		str(100, "future list 2").
		key(101, wireVarint).uv(1234).
		str(126, "")
	in := sealBody(b)
	e, err := Decode(in)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := Event{Version: Version, Seq: 7, Kind: KindRevoke, Worker: "w1", Detail: "known detail", Hash: Sum(b)}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	// Re-encoding drops what it does not know, so it hashes differently;
	// the stored hash covered the unknown fields.
	if bytes.Equal(e.Encode(), in) {
		t.Fatalf("re-encoding kept unknown fields; the test input is not what it claims")
	}
	// Flipping a byte inside the unknown payload breaks the hash.
	i := bytes.Index(in, []byte("future list 2"))
	tampered := append([]byte(nil), in...)
	tampered[i] ^= 0x20
	if _, err := Decode(tampered); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("tampered unknown field: got %v, want ErrHashMismatch", err)
	}
}

// TestTamperEveryBit: flipping any single bit of an encoded event is
// detected: the version byte gives ErrUnsupportedVersion, any other byte
// ErrHashMismatch or ErrMalformed.
func TestTamperEveryBit(t *testing.T) {
	_, encs := goldenChain()
	for _, enc := range [][]byte{encs[1], encs[7]} { // permit and revoke: every list type
		for i := range enc {
			for bit := range 8 {
				b := append([]byte(nil), enc...)
				b[i] ^= 1 << bit
				_, err := Decode(b)
				switch {
				case i == 0 && !errors.Is(err, ErrUnsupportedVersion):
					t.Fatalf("byte 0 bit %d: got %v, want ErrUnsupportedVersion", bit, err)
				case i > 0 && !isOneOf(err, ErrHashMismatch, ErrMalformed):
					t.Fatalf("byte %d bit %d: got %v, want ErrHashMismatch or ErrMalformed", i, bit, err)
				}
			}
		}
	}
}

// TestTruncationAndExtension: every proper prefix of an encoded event, and
// the event with any byte appended, fails to decode with ErrMalformed.
func TestTruncationAndExtension(t *testing.T) {
	_, encs := goldenChain()
	for _, enc := range encs {
		for n := range len(enc) {
			if _, err := Decode(enc[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("prefix of %d/%d bytes: got %v, want ErrMalformed", n, len(enc), err)
			}
		}
		for _, extra := range []byte{0x00, 0x08, 0xfa, 0xff} {
			if _, err := Decode(append(append([]byte(nil), enc...), extra)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("appended %#x: got %v, want ErrMalformed", extra, err)
			}
		}
	}
}

// TestReaderFieldValues: the Reader exposes varint, zig-zag and bytes
// fields as the Writer wrote them, for the state machine's own encodings.
func TestReaderFieldValues(t *testing.T) {
	w := NewWriter(make([]byte, 10)) // NewWriter starts at buf[:0]
	w.Uint(1, math.MaxUint64)
	w.Int(2, math.MinInt64)
	w.Int(3, -1)
	w.Bool(4, true)
	w.Strings(5, []string{"a", "", "c"})
	w.Hash(6, Sum([]byte("x")))
	r := NewReader(w.Bytes())
	var f Field
	var got []any
	for r.Next(&f) {
		switch f.Wire {
		case WireVarint:
			if f.Tag == 2 || f.Tag == 3 {
				got = append(got, f.Int())
			} else {
				got = append(got, f.Uint)
			}
		case WireBytes:
			got = append(got, string(f.Data))
		}
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	want := []any{uint64(math.MaxUint64), int64(math.MinInt64), int64(-1), uint64(1), "a", "", "c", sumString("x")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if r.Offset() != w.Len() {
		t.Fatalf("reader stopped at %d of %d", r.Offset(), w.Len())
	}
}

// TestFastUvarintMatchesChecked: the fast varint reader accepts exactly the
// minimal, non-zero encodings of up to nine bytes, with the value and
// length binary.Uvarint gives, and refuses everything else (which Next then
// leaves to its checking path). Drawn bytes cover truncated, non-minimal,
// zero and overlong input; drawn values cover every length exactly.
func TestFastUvarintMatchesChecked(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, p []byte) {
		v, n := fastUvarint(p)
		want, m := binary.Uvarint(p)
		ok := m > 0 && m <= 9 && want != 0 && (m == 1 || p[m-1] != 0)
		switch {
		case ok && (n != m || v != want):
			t.Fatalf("% x: fast (%d, %d), checked (%d, %d)", p, v, n, want, m)
		case !ok && n != 0:
			t.Fatalf("% x: fast accepted (%d, %d), checked (%d, %d) refuses", p, v, n, want, m)
		}
	}
	for _, p := range [][]byte{
		{}, {0}, {1}, {0x7f}, {0x80}, {0x80, 0}, {0x80, 1}, {0xff, 0x7f},
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1},
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff},
		{0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0, 5, 5},
	} {
		check(t, p)
	}
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.SliceOfN(rapid.Byte(), 0, 12).Draw(t, "p")
		check(t, p)
		v := rapid.Uint64().Draw(t, "v") >> rapid.IntRange(0, 63).Draw(t, "shift")
		enc := binary.AppendUvarint(nil, v)
		enc = append(enc, rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "tail")...)
		check(t, enc)
	})
}
