package provenance

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Nested decodings. A value may carry copied content under several
// encodings (base64 of base64, hex of base64, percent-encoded base64, a
// JSON document in a string field whose strings are encoded again). Trace
// decodes each candidate again, to MaxDecodeDepth levels, and names the
// chain in the match's transform, outermost decoding first: "base64",
// "hex+base64" (hex-decoded, then base64-decoded), "json+base64".
//
// The work is bounded: at most MaxDecodeDepth levels, maxDecodeSteps
// decodings, maxDecodedBytes decoded bytes and maxCandidates candidates
// per value, and decodeTimeBudget of wall time. When a bound stops the
// decoding while something decodable is left, the trace is marked
// Truncated and DecodeLimit: nothing about the value can then be trusted,
// so it counts as model-made (Evidence) whatever its matches, which still
// name their sources (a protected one still refuses a transfer).

// TransformJSON: a string of a JSON document held in the value.
const TransformJSON Transform = "json"

// Bounds of nested decoding.
const (
	// MaxDecodeDepth is how many decodings deep Trace looks.
	MaxDecodeDepth = 4
	maxDecodeSteps = 256
	maxJSONStrings = 64
)

// decodeTimeBudget is a backstop: the other bounds keep the work to a few
// megabytes scanned; wall time on a loaded machine must not make an
// ordinary value count as model-made. When it runs out the value is
// judged as model-made (the strictest reading), never as its matches
// would make it: under load the matcher refuses trust, it does not skip
// the check. A variable only so that tests can exhaust it.
var decodeTimeBudget = 20 * time.Millisecond

// decodeSteps are the names of the decodings a chain is made of.
var decodeSteps = []Transform{TransformBase64, TransformHex, TransformPercent, TransformJSON}

// ValidTransform reports whether t is a transform Trace may report: raw,
// a chain of 1..MaxDecodeDepth decodings joined by '+', dns_labels,
// dns_labels+hex, number (optionally ":" and a three-letter currency
// code) or ident.
func ValidTransform(t string) bool {
	switch Transform(t) {
	case TransformRaw, TransformDNSLabels, TransformDNSHex, TransformNumber, TransformIdent:
		return true
	}
	if code, ok := strings.CutPrefix(t, string(TransformNumber)+":"); ok {
		return len(code) == 3 && isUpper(code[0]) && isUpper(code[1]) && isUpper(code[2])
	}
	steps := strings.Split(t, "+")
	if len(steps) > MaxDecodeDepth {
		return false
	}
	for _, s := range steps {
		found := false
		for _, d := range decodeSteps {
			found = found || s == string(d)
		}
		if !found {
			return false
		}
	}
	return true
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }

// ValueTransform reports whether t says the whole value equals something
// its source holds (a typed match), as raw does, rather than that a
// decoding or a part of it matched.
func ValueTransform(t string) bool {
	return t == string(TransformNumber) || t == string(TransformIdent) || strings.HasPrefix(t, string(TransformNumber)+":")
}

// unwrapper expands a value into its nested decodings.
type unwrapper struct {
	// add offers a decoded candidate; false means a bound refused it.
	add      func(t Transform, b []byte) bool
	steps    int
	deadline time.Time
	limit    bool // a bound stopped decoding with something left
}

// expand decodes text, reached through the chain via ("" for the raw
// value), one level further and recurses into each decoding that reads
// as text.
func (d *unwrapper) expand(via Transform, text string, depth int) {
	if d.limit {
		return
	}
	d.children(text, func(step Transform, b []byte) bool {
		if !mostlyText(b) {
			return true
		}
		if depth >= MaxDecodeDepth || d.steps >= maxDecodeSteps || time.Now().After(d.deadline) {
			d.limit = true
			return false
		}
		d.steps++
		t := step
		if via != "" {
			t = via + "+" + step
		}
		if !d.add(t, b) {
			d.limit = true
			return false
		}
		d.expand(t, string(b), depth+1)
		return !d.limit
	})
}

// children calls fn with each one-level decoding of text, until fn
// returns false: its percent-decoding, each base64 and hex run of at
// least minEncodedRun characters, and the strings of a JSON document it
// is.
func (d *unwrapper) children(text string, fn func(Transform, []byte) bool) {
	if strings.Contains(text, "%") {
		if b, ok := percentDecode(text); ok && !fn(TransformPercent, b) {
			return
		}
	}
	for _, run := range runs(text, isB64Byte, minEncodedRun) {
		if b, ok := decodeBase64(run); ok && !fn(TransformBase64, b) {
			return
		}
	}
	for _, run := range runs(text, isHexByte, minEncodedRun) {
		if len(run)%2 == 1 {
			run = run[:len(run)-1]
		}
		if b, err := hex.DecodeString(run); err == nil && !fn(TransformHex, b) {
			return
		}
	}
	for _, s := range jsonStrings(text) {
		if !fn(TransformJSON, []byte(s)) {
			return
		}
	}
}

// jsonStrings returns the strings (keys and values) of text when it is a
// JSON object or array, at most maxJSONStrings of them; nil otherwise.
func jsonStrings(text string) []string {
	t := strings.TrimSpace(text)
	if len(t) < 2 || !(t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']') {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var out []string
	for len(out) < maxJSONStrings {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if s, ok := tok.(string); ok && s != "" {
			// A string the document holds verbatim is already matched
			// in the raw text; only escaped ones need a candidate.
			if !bytes.Contains([]byte(t), []byte(s)) {
				out = append(out, s)
			}
		}
	}
	return out
}
