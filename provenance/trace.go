package provenance

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Transform names the decoding under which a value matched.
type Transform string

// Transforms, each applied at most one level deep.
const (
	TransformRaw       Transform = "raw"
	TransformBase64    Transform = "base64"
	TransformHex       Transform = "hex"
	TransformPercent   Transform = "percent"
	TransformDNSLabels Transform = "dns_labels"     // subdomain labels joined
	TransformDNSHex    Transform = "dns_labels+hex" // joined labels, hex-decoded
)

// MatchMode says how much of a candidate matched.
type MatchMode string

// Match modes.
const (
	ModeToken    MatchMode = "token"    // short value equal to a whole token
	ModeWhole    MatchMode = "whole"    // the whole candidate occurs in the source
	ModeFragment MatchMode = "fragment" // a run of >= FragmentMin bytes occurs
)

// Bounds on the work one Trace call does.
const (
	MaxTraceInput   = 256 << 10 // bytes of the value examined
	maxCandidates   = 64
	maxDecodedBytes = 512 << 10
	minEncodedRun   = 12 // shortest base64/hex run tried (>= 6 decoded bytes)
	minIdentLen     = 8  // shortest identifier token looked for inside a longer value
	maxIdentTokens  = 16 // identifier tokens tried per value
)

// Match is one source a value traced to.
type Match struct {
	Source    string    `json:"source"`
	Channel   Channel   `json:"channel"`
	Authority Level     `json:"authority"`
	Transform Transform `json:"transform"`
	// Part is "" for the whole value, "host"/"path" for a URL component, or
	// "token" for an identifier found inside a longer value.
	Part   string    `json:"part,omitempty"`
	Mode   MatchMode `json:"mode"`
	Length int       `json:"length"` // normalized bytes matched
	// UnderPressure: windows of this source have been evicted, so other
	// parts of the value may also have come from it.
	UnderPressure bool `json:"under_pressure"`
	// Fields: for a raw match of the whole value in a structured result
	// (RegisterResult), the fields the value equals whole, or else the
	// first field containing it (see fieldMatchesLocked).
	Fields []FieldRef `json:"fields,omitempty"`
}

// Trace is the provenance of one argument value.
type Trace struct {
	Field   string   `json:"field"`
	Matches []Match  `json:"matches"` // sorted by source, transform, part
	Sources []string `json:"sources"` // sorted, deduplicated
	// Authority is the lowest authority of the matched sources; it is
	// Evidence when nothing matched or when part of the raw value is not
	// covered by raw matches (the uncovered part is model-made).
	Authority Level `json:"authority"`
	// Length is the normalized length of the raw value; Covered is how many
	// of its bytes raw matches cover.
	Length  int `json:"length"`
	Covered int `json:"covered"`
	// StopGrams counts grams of the raw value too common in the registry to
	// seed a match (see Trace); when non-zero the trace is incomplete and
	// its authority is Evidence.
	StopGrams int `json:"stop_grams"`
	// ModelMade: the value traced to nothing registered, so it is treated
	// as written by the model (Evidence).
	ModelMade bool `json:"model_made"`
	// Complete is false when the registry has evicted anything (see
	// PressuredSources) or a scan bound was hit (Truncated): absence of a
	// match is then not proof the value is not copied.
	Complete         bool     `json:"complete"`
	PressuredSources []string `json:"pressured_sources,omitempty"`
	Truncated        bool     `json:"truncated"`
}

type candidate struct {
	t    Transform
	part string
	data []byte // normalized
}

// Trace matches a security-relevant argument value (recipient, amount, URL,
// command, email body, file path or content) against the registry.
//
// Matching rule, on normalized text (see Normalize), per candidate:
//   - shorter than MinValueLen (6) bytes: must equal a whole token of a
//     window (bounded by non-alphanumerics, or by the start or end of the
//     registered content, not by a cut between windows), so "ls" or "1"
//     match only where they stand alone;
//   - MinValueLen..FragmentMin-1 (6..15) bytes: must occur whole;
//   - FragmentMin (16) bytes or more: some run of at least 16 bytes must
//     occur; the longest run per source is reported. Runs are seeded from
//     8-byte grams indexed every 8 bytes; grams with more than 64 postings
//     are stop grams and seed nothing (postings of evicted windows may
//     still be counted, which only makes more grams stop grams).
//
// Short candidates are looked for only in the windows the short-value
// filters admit, long ones through the gram index (see Registry); neither
// changes what matches: a short candidate matches where a scan of every
// window finds it, a long one as the grams of every window seed it.
//
// Uncertainty never raises authority: unmatched values, raw values only
// partly covered by raw matches, and raw values with stop grams (a source
// holding the same text may have been missed) count as Evidence.
//
// Candidates are the raw value; its percent-decoding; every base64 (std or
// URL alphabet) and hex run of at least 12 characters, decoded once; for
// URL-shaped values the host and path; for host names with three or more
// labels the concatenation of the subdomain labels (raw and hex-decoded),
// which catches data split across DNS labels; and in a value of 16 bytes
// or more, each identifier token of 8-15 letters and digits with a digit
// in it (part "token": a passport or account number quoted in a sentence),
// which names its source but does not cover the value.
func (r *Registry) Trace(field, value string) Trace {
	tr := Trace{Field: field}
	if len(value) > MaxTraceInput {
		value = value[:MaxTraceInput]
		tr.Truncated = true
	}
	cands, capped := candidates(value)
	tr.Truncated = tr.Truncated || capped

	r.mu.RLock()
	defer r.mu.RUnlock()
	type key struct {
		src  string
		t    Transform
		part string
	}
	best := map[key]Match{}
	for i, c := range cands {
		var hits map[*source]hit
		var covered, skipped int
		if c.part == "token" {
			hits = r.matchTokenLocked(c.data)
		} else {
			hits, covered, skipped = r.matchLocked(c.data)
		}
		if i == 0 { // the raw candidate
			tr.Length, tr.Covered, tr.StopGrams = len(c.data), covered, skipped
		}
		for s, h := range hits {
			k := key{s.desc.ID, c.t, c.part}
			if m, ok := best[k]; ok && m.Length >= h.n {
				continue
			}
			best[k] = Match{
				Source: s.desc.ID, Channel: s.desc.Channel, Authority: s.desc.Authority,
				Transform: c.t, Part: c.part, Mode: h.mode, Length: h.n,
				UnderPressure: s.evicted > 0,
			}
		}
	}
	if len(r.pressured) > 0 {
		tr.PressuredSources = append([]string(nil), r.pressured...)
	}
	tr.Complete = !tr.Truncated && tr.StopGrams == 0 && len(tr.PressuredSources) == 0

	seen := map[string]bool{}
	levels := []Level{}
	for _, m := range best {
		tr.Matches = append(tr.Matches, m)
		levels = append(levels, m.Authority)
		if !seen[m.Source] {
			seen[m.Source] = true
			tr.Sources = append(tr.Sources, m.Source)
		}
	}
	sort.Strings(tr.Sources)
	sort.Slice(tr.Matches, func(i, j int) bool {
		a, b := tr.Matches[i], tr.Matches[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Transform != b.Transform {
			return a.Transform < b.Transform
		}
		return a.Part < b.Part
	})
	if len(cands) > 0 && cands[0].t == TransformRaw && cands[0].part == "" {
		if r.fieldMatchesLocked(&tr, cands[0].data) {
			levels = levels[:0]
			for _, m := range tr.Matches {
				levels = append(levels, m.Authority)
			}
		}
	}
	tr.ModelMade = len(tr.Matches) == 0
	if tr.Covered < tr.Length || tr.StopGrams > 0 {
		levels = append(levels, Evidence)
	}
	tr.Authority = Lowest(levels...) // Evidence when nothing matched
	return tr
}

// candidates derives the normalized forms of value to match. The bool
// reports whether a bound cut the list short.
func candidates(value string) ([]candidate, bool) {
	var out []candidate
	budget := maxDecodedBytes
	capped := false
	seen := map[string]bool{}
	add := func(t Transform, part string, b []byte) {
		if t != TransformRaw && !mostlyText(b) {
			return
		}
		n := Normalize(b)
		if len(n) == 0 {
			return
		}
		k := string(t) + "\x00" + part + "\x00" + string(n)
		if seen[k] {
			return
		}
		if len(out) >= maxCandidates || len(n) > budget {
			capped = true
			return
		}
		seen[k] = true
		budget -= len(n)
		out = append(out, candidate{t: t, part: part, data: n})
	}
	add(TransformRaw, "", []byte(value))

	if strings.Contains(value, "%") {
		if d, ok := percentDecode(value); ok {
			add(TransformPercent, "", d)
		}
	}
	for _, run := range runs(value, isB64Byte, minEncodedRun) {
		if d, ok := decodeBase64(run); ok {
			add(TransformBase64, "", d)
		}
	}
	for _, run := range runs(value, isHexByte, minEncodedRun) {
		if len(run)%2 == 1 {
			run = run[:len(run)-1]
		}
		if d, err := hex.DecodeString(run); err == nil {
			add(TransformHex, "", d)
		}
	}
	if u, err := url.Parse(strings.TrimSpace(value)); err == nil && u.Scheme != "" && u.Host != "" {
		add(TransformRaw, "host", []byte(u.Hostname()))
		if len(u.Path) > 1 {
			add(TransformRaw, "path", []byte(u.Path))
		}
	}
	// Identifiers inside a longer value: a passport, account or ticket
	// number the model wrote into a sentence shares no 16-byte run with
	// its source, so each token of 8-15 characters with a digit in it is
	// also looked for on its own (occurring whole). These matches name
	// their source but never count towards covering the value.
	if len(value) >= FragmentMin {
		n := 0
		for _, tok := range runs(value, isIdentByte, minIdentLen) {
			if len(tok) >= FragmentMin || !strings.ContainsAny(tok, "0123456789") {
				continue
			}
			if n++; n > maxIdentTokens {
				capped = true
				break
			}
			add(TransformRaw, "token", []byte(tok))
		}
	}
	for _, host := range runs(value, isHostByte, 5) {
		labels := strings.Split(strings.Trim(host, ".-"), ".")
		if len(labels) < 3 {
			continue
		}
		joined := strings.Join(labels[:len(labels)-2], "")
		if len(joined) < MinValueLen {
			continue
		}
		add(TransformDNSLabels, "host", []byte(joined))
		if len(joined)%2 == 0 {
			if d, err := hex.DecodeString(joined); err == nil {
				add(TransformDNSHex, "host", d)
			}
		}
	}
	return out, capped
}

// mostlyText reports whether decoded bytes look like text (valid UTF-8,
// at least 90% printable): one-level decodings of random-looking runs
// (IBAN digits read as hex, words read as base64) are dropped instead of
// being scanned for.
func mostlyText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	bad, n := 0, 0
	for _, r := range string(b) {
		n++
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			bad++
		}
	}
	return n > 0 && bad*10 <= n
}

// runs returns the maximal runs of bytes satisfying ok with length >= min.
func runs(s string, ok func(byte) bool, min int) []string {
	var out []string
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && ok(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= min {
			out = append(out, s[start:i])
			if len(out) >= maxCandidates {
				return out
			}
		}
		start = -1
	}
	return out
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isB64Byte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
		c == '+' || c == '/' || c == '-' || c == '_'
}

func isHostByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-'
}

// decodeBase64 decodes a run in the std or URL alphabet, padded or not.
func decodeBase64(run string) ([]byte, bool) {
	s := run // runs exclude '=', so padding is already stripped
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		if strings.ContainsAny(s, "+/") {
			return nil, false
		}
		enc = base64.RawURLEncoding
	}
	if len(s)%4 == 1 {
		return nil, false
	}
	d, err := enc.DecodeString(s)
	if err != nil || len(d) < MinValueLen {
		return nil, false
	}
	return d, true
}

// percentDecode decodes %XX escapes leniently (malformed escapes are kept
// as-is, '+' is kept). ok is false if nothing was decoded.
func percentDecode(s string) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	decoded := false
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHexByte(s[i+1]) && isHexByte(s[i+2]) {
			b, _ := hex.DecodeString(s[i+1 : i+3])
			out = append(out, b[0])
			i += 2
			decoded = true
			continue
		}
		out = append(out, s[i])
	}
	return out, decoded
}

// isIdentByte: the bytes of an identifier token (letters, digits).
func isIdentByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// matchTokenLocked finds the sources holding v (an identifier of fewer
// than FragmentMin bytes) as a whole token, whatever its length; r.mu must
// be held. The block filters are probed as for a whole match, which any
// token occurrence also satisfies, and each candidate window is then
// checked for a token-bounded occurrence.
func (r *Registry) matchTokenLocked(v []byte) map[*source]hit {
	hits := map[*source]hit{}
	r.matchBlocks(v, false, true, ModeToken, hits)
	return hits
}
