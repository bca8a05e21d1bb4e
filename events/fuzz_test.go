package events

import (
	"bytes"
	"reflect"
	"testing"
)

// knownTag reports whether this version of the package decodes tag.
func knownTag(tag uint32) bool {
	return tag >= tagSeq && tag <= tagLast && !gapTag(tag) || tag == tagHash
}

// hasUnknownTags reports whether a decodable encoding carries fields this
// version skips.
func hasUnknownTags(b []byte) bool {
	r := NewReader(b[1:])
	var f Field
	for r.Next(&f) {
		if !knownTag(f.Tag) {
			return true
		}
	}
	return false
}

// FuzzDecode: Decode never panics; whatever it accepts re-encodes to an
// encoding that decodes to the same event, and, when it carries no unknown
// tags, to exactly the input bytes (one event, one encoding).
func FuzzDecode(f *testing.F) {
	_, encs := goldenChain()
	for _, b := range encs {
		f.Add(b)
	}
	for _, b := range readGolden(f) {
		f.Add(b)
	}
	f.Add(sealBody(body().key(tagSeq, wireVarint).uv(1).str(100, "future").key(101, wireVarint).uv(9)))
	f.Add(sealBody(body().str(tagCounters, "\x00").str(tagCancelled, "").str(tagCancelled, "")))
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Fuzz(checkDecode)
}

// FuzzDecodeSealed feeds Decode bodies that carry a correct hash, so the
// fuzzer explores what the canonical-form checks accept rather than
// stopping at the hash. The body is everything after the version byte.
func FuzzDecodeSealed(f *testing.F) {
	_, encs := goldenChain()
	for _, b := range encs {
		f.Add(b[1 : len(b)-35])
	}
	f.Add([]byte(body().key(tagSeq, wireVarint).uv(1).str(100, "future").key(101, wireVarint).uv(9))[1:])
	f.Add([]byte(body().str(tagCounters, "\x00").str(tagCancelled, "").str(tagCancelled, ""))[1:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, sealBody(append([]byte{Version}, b...)))
	})
}

// checkDecode asserts the decoding properties for one input, starting with
// agreement with the original decoder.
func checkDecode(t *testing.T, in []byte) {
	checkAgainstReference(t, in)
	if len(in) > 0 {
		checkReaderAgainstReference(t, in[1:])
	}
	e, err := Decode(in)
	if err != nil {
		return
	}
	if e.Version != Version {
		t.Fatalf("decoded version %d", e.Version)
	}
	unknown := hasUnknownTags(in)
	re := e.Encode()
	if !unknown && !bytes.Equal(re, in) {
		t.Fatalf("accepted a non-canonical encoding:\n in %x\n re %x", in, re)
	}
	e2, err := Decode(re)
	if err != nil {
		t.Fatalf("re-encoding does not decode: %v", err)
	}
	if unknown {
		e.Hash = e2.Hash // the original hash also covered the dropped fields
	}
	if !reflect.DeepEqual(normalize(e2), normalize(e)) {
		t.Fatalf("Decode(Encode(e)) != e:\n got  %+v\n want %+v", e2, e)
	}
}
