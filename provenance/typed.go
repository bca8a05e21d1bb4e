package provenance

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
)

// Typed matching. Text matching finds a value where its normalized
// spelling occurs; a number or an identifier is often copied with its
// spelling changed (98.70 EUR sent as 98.7, an IBAN typed in groups sent
// without them). Trace therefore also matches:
//
//   - numbers by value (TransformNumber): a value that is a plain decimal
//     number, optionally with a currency (a three-letter code such as EUR
//     or a sign such as €), matches a number of equal value written in a
//     source with or without trailing zeros, with a decimal point or
//     comma and with thousands separators (',', '.', '\''). The number in
//     the source must stand alone (not inside a word or a longer number).
//     The currency is part of the match: a currency written next to the
//     number in the source is recorded in the transform ("number:EUR"),
//     and a value that names a currency matches only a number the source
//     writes with the same one. A sign is not compared (a statement's
//     "-12.00" is the amount 12).
//   - identifiers by their characters (TransformIdent): a value of 9 to 40
//     letters and digits, at least 6 of them digits and no more letters
//     than digits, written in groups
//     separated by single spaces, dashes or dots (or not at all) matches
//     a source holding the same characters as a whole token in the
//     value's own grouping with any of those separators, without
//     separators, or in groups of four (how IBANs and card numbers are
//     printed). The identifier must stand alone in the source: not the
//     tail or head of a longer one.
//
// Both are whole-value matches: the value is exactly something the source
// said, under the normalization the transform names.

// Typed transforms.
const (
	// TransformNumber: the value equals a number in the source. With a
	// currency it is written "number:<CODE>".
	TransformNumber Transform = "number"
	// TransformIdent: the value is an identifier the source holds with
	// other separators.
	TransformIdent Transform = "ident"
)

// Bounds of typed matching.
const (
	maxNumberDigits = 30 // digits of a number looked for
	minIdentChars   = 9
	maxIdentChars   = 40
	minIdentDigits  = 6
)

// number is a parsed decimal: integer digits without leading zeros ("0"
// for none), fraction digits without trailing zeros, and the currency
// ("" for none, else an upper-case ISO code).
type number struct {
	intPart, frac, unit string
}

func (n number) canon() string {
	if n.frac == "" {
		return n.intPart
	}
	return n.intPart + "." + n.frac
}

// currencyCodes are the codes (lower case, as normalized) recognized next
// to a number.
var currencyCodes = map[string]bool{
	"eur": true, "usd": true, "gbp": true, "chf": true, "jpy": true, "cad": true, "aud": true, "nzd": true,
	"sek": true, "nok": true, "dkk": true, "pln": true, "czk": true, "huf": true, "inr": true, "cny": true,
	"hkd": true, "sgd": true, "zar": true, "brl": true, "mxn": true, "try": true, "krw": true, "ils": true,
}

// currencySigns map a currency sign to its code.
var currencySigns = []struct{ sign, code string }{
	{"€", "EUR"}, {"$", "USD"}, {"£", "GBP"}, {"¥", "JPY"},
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isNumByte(c byte) bool { return isDigit(c) || c == '.' || c == ',' || c == '\'' }

// parseLiteral reads a numeric literal (digits with '.', ',' and '\”
// separators, starting and ending with a digit) and returns the numbers
// it can be read as: one, or two when a single separator followed by
// three digits may be either a decimal or a thousands separator. prefer
// picks the decimal reading of a lone '.' and the grouping reading of a
// lone ',' instead (for a value the model wrote, where JSON's '.' is
// usual).
func parseLiteral(s string, prefer bool) []number {
	if s == "" || !isDigit(s[0]) || !isDigit(s[len(s)-1]) {
		return nil
	}
	var seps []int
	digits := 0
	for i := 0; i < len(s); i++ {
		switch {
		case isDigit(s[i]):
			digits++
		case isNumByte(s[i]):
			if isNumByte(s[i-1]) && !isDigit(s[i-1]) {
				return nil // two separators in a row
			}
			seps = append(seps, i)
		default:
			return nil
		}
	}
	if digits > maxNumberDigits {
		return nil
	}
	if len(seps) == 0 {
		return []number{mkNumber(s, "")}
	}
	lastSep := s[seps[len(seps)-1]]
	kinds := 0
	var seen [256]bool
	for _, i := range seps {
		if !seen[s[i]] {
			seen[s[i]] = true
			kinds++
		}
	}
	grouped := func(g byte, upto int) (string, bool) {
		// s[:upto] is digits in groups separated by g: 1-3 then 3s.
		parts := strings.Split(s[:upto], string(g))
		if len(parts[0]) == 0 || len(parts[0]) > 3 {
			return "", false
		}
		for _, p := range parts[1:] {
			if len(p) != 3 {
				return "", false
			}
		}
		return strings.Join(parts, ""), true
	}
	switch {
	case kinds > 2:
		return nil
	case kinds == 2:
		// The last separator is the decimal one; it occurs once.
		if lastSep == '\'' || strings.Count(s, string(lastSep)) != 1 {
			return nil
		}
		d := seps[len(seps)-1]
		g := s[seps[0]]
		in, ok := grouped(g, d)
		if !ok {
			return nil
		}
		return []number{mkNumber(in, s[d+1:])}
	case lastSep == '\'' || len(seps) > 1:
		in, ok := grouped(lastSep, len(s))
		if !ok {
			return nil
		}
		return []number{mkNumber(in, "")}
	}
	d := seps[0]
	dec := mkNumber(s[:d], s[d+1:])
	if len(s)-d-1 != 3 || d > 3 {
		return []number{dec}
	}
	grp := mkNumber(s[:d]+s[d+1:], "")
	switch {
	case !prefer:
		return []number{dec, grp}
	case lastSep == '.':
		return []number{dec}
	}
	return []number{grp}
}

func mkNumber(in, frac string) number {
	in = strings.TrimLeft(in, "0")
	if in == "" {
		in = "0"
	}
	return number{intPart: in, frac: strings.TrimRight(frac, "0")}
}

// parseValueNumber reads a value the model sent as a number with an
// optional currency: "98.7", "98.70 EUR", "EUR 98.70", "€98.70",
// "-12", "1,234.50". Anything else is not a typed number.
func parseValueNumber(v string) (number, bool) {
	s := strings.TrimSpace(v)
	if s == "" || len(s) > 64 {
		return number{}, false
	}
	unit := ""
	take := func(u string) { unit = u }
	for _, cs := range currencySigns {
		if rest, ok := strings.CutPrefix(s, cs.sign); ok {
			s, unit = strings.TrimSpace(rest), cs.code
			break
		}
		if rest, ok := strings.CutSuffix(s, cs.sign); ok {
			s, unit = strings.TrimSpace(rest), cs.code
			break
		}
	}
	if unit == "" && len(s) > 4 {
		if c := strings.ToLower(s[:3]); currencyCodes[c] && !isLetter(s[3]) {
			take(strings.ToUpper(c))
			s = strings.TrimSpace(s[3:])
		} else if c := strings.ToLower(s[len(s)-3:]); currencyCodes[c] && !isLetter(s[len(s)-4]) {
			take(strings.ToUpper(c))
			s = strings.TrimSpace(s[:len(s)-3])
		}
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	ns := parseLiteral(s, true)
	if len(ns) != 1 {
		return number{}, false
	}
	n := ns[0]
	n.unit = unit
	return n, true
}

// unitAt reads a currency written next to a number in normalized source
// text: before it (d[:i]) or after it (d[e:]), with at most one space
// between. It returns the upper-case code, or "".
func unitAt(d []byte, i, e int) string {
	after := d[e:]
	if len(after) > 0 && after[0] == ' ' {
		after = after[1:]
	}
	for _, cs := range currencySigns {
		if bytes.HasPrefix(after, []byte(cs.sign)) {
			return cs.code
		}
	}
	if len(after) >= 3 && currencyCodes[string(after[:3])] && (len(after) == 3 || !isTokenByte(after[3])) {
		return strings.ToUpper(string(after[:3]))
	}
	before := d[:i]
	if n := len(before); n > 0 && before[n-1] == ' ' {
		before = before[:n-1]
	}
	for _, cs := range currencySigns {
		if bytes.HasSuffix(before, []byte(cs.sign)) {
			return cs.code
		}
	}
	if n := len(before); n >= 3 && currencyCodes[string(before[n-3:])] && (n == 3 || !isTokenByte(before[n-4])) {
		return strings.ToUpper(string(before[n-3:]))
	}
	return ""
}

// letterBounded reports whether the letters adjacent to a literal (if
// any) are a currency code standing alone: "eur98.70" is a number, "x98"
// or "gb29" is part of a word.
func letterBounded(d []byte, i, e int) bool {
	sign := func(b []byte, suffix bool) bool {
		for _, cs := range currencySigns {
			if suffix && bytes.HasSuffix(b, []byte(cs.sign)) || !suffix && bytes.HasPrefix(b, []byte(cs.sign)) {
				return true
			}
		}
		return false
	}
	if i > 0 && isTokenByte(d[i-1]) && !sign(d[:i], true) {
		j := i
		for j > 0 && isLetter(d[j-1]) {
			j--
		}
		if i-j != 3 || !currencyCodes[string(d[j:i])] || j > 0 && isTokenByte(d[j-1]) {
			return false
		}
	}
	if e < len(d) && isTokenByte(d[e]) && !sign(d[e:], false) {
		j := e
		for j < len(d) && isLetter(d[j]) {
			j++
		}
		if j-e != 3 || !currencyCodes[string(d[e:j])] || j < len(d) && isTokenByte(d[j]) {
			return false
		}
	}
	return true
}

// numberIn looks for a number equal to want in bytes [lo, hi) of w's
// data, returning the currency written next to it. A value with a
// currency matches only a number with the same currency.
func numberIn(w *window, lo, hi int, want number, needle []byte) (string, bool) {
	d := w.data
	if hi > len(d) {
		hi = len(d)
	}
	for lo+len(needle) <= hi {
		j := bytes.Index(d[lo:hi], needle)
		if j < 0 {
			return "", false
		}
		at := lo + j
		lo = at + 1
		i, e := at, at+len(needle)
		// The needle ends the integer part: no digit follows it; and
		// when it is the whole integer part, none precedes it. Most
		// occurrences inside longer digit runs stop here.
		if e < len(d) && isDigit(d[e]) || len(needle) == len(want.intPart) && i > 0 && isDigit(d[i-1]) {
			continue
		}
		for i > 0 && isNumByte(d[i-1]) {
			i--
		}
		for e < len(d) && isNumByte(d[e]) {
			e++
		}
		// A literal that touches a cut between windows is read whole in
		// the neighbouring window (windows overlap by more than a
		// literal's length).
		if i == 0 && !w.first || e == len(d) && !w.last {
			continue
		}
		for i < e && !isDigit(d[i]) {
			i++
		}
		for e > i && !isDigit(d[e-1]) {
			e--
		}
		if !letterBounded(d, i, e) {
			continue
		}
		for _, n := range parseLiteral(string(d[i:e]), false) {
			if n.intPart != want.intPart || n.frac != want.frac {
				continue
			}
			u := unitAt(d, i, e)
			if want.unit != "" && u != want.unit {
				continue
			}
			return u, true
		}
	}
	return "", false
}

// numberQuery looks for a number in the blocks (see matchNumberLocked).
type numberQuery struct {
	n              number
	needle         []byte
	whole, grouped []probe
	hits           map[*source]string // the currency each source writes it with
	done           bool
}

// newNumberQuery prepares the search for a number equal to n. Blocks are
// narrowed by the filters: the number's integer part occurs as a word
// (or, when over five digits, as 4-byte grams), or its last three integer
// digits do (written with thousands separators).
func (r *Registry) newNumberQuery(n number) *numberQuery {
	ip := n.intPart
	needle := ip
	if len(ip) > 3 {
		needle = ip[len(ip)-3:]
	}
	q := &numberQuery{n: n, needle: []byte(needle), hits: map[*source]string{}}
	q.whole = r.shortProbes([]byte(ip), len(ip) <= maxWordLen, nil)
	if len(ip) > 3 {
		q.grouped = r.shortProbes(q.needle, true, nil)
	}
	return q
}

// admits reports whether block b may hold the number.
func (q *numberQuery) admits(b *fblock) bool {
	return b.mayHold(q.whole) || q.grouped != nil && b.mayHold(q.grouped)
}

// visit looks for the number in one range of an admitted block.
func (q *numberQuery) visit(rg frange) {
	w := rg.w
	if _, ok := q.hits[w.src]; ok {
		return
	}
	// The literal may extend past the range: numberIn reads the window
	// around each occurrence of the needle.
	if u, ok := numberIn(w, int(rg.lo), int(rg.hi), q.n, q.needle); ok {
		q.hits[w.src] = u
	}
}

// matchNumberLocked runs q over every block; r.mu must be held.
func (r *Registry) matchNumberLocked(q *numberQuery) {
	for _, b := range r.blocks {
		if b.gone || b.live == 0 || !q.admits(b) {
			continue
		}
		for _, rg := range b.ranges {
			if !rg.w.dead {
				q.visit(rg)
			}
		}
	}
	q.done = true
}

// matchShortNumberLocked is matchShort of v and matchNumberLocked of q in
// one pass over the blocks: a short raw value that is a number probes
// the same filter words for both, so the second costs little. r.mu must
// be held.
func (r *Registry) matchShortNumberLocked(v []byte, hits map[*source]hit, q *numberQuery) {
	token := len(v) < MinValueLen
	mode := ModeWhole
	if token {
		mode = ModeToken
	}
	var buf [2 * FragmentMin]probe
	ps := r.shortProbes(v, token, buf[:0])
	// When the number's probes are among v's (the raw "50.00" has the
	// word "50"), a block that fails them fails v too: one filter read
	// decides most blocks.
	implied := q.grouped == nil && len(q.whole) > 0
	for _, p := range q.whole {
		implied = implied && slices.Contains(ps, p)
	}
	for _, b := range r.blocks {
		if b.gone || b.live == 0 {
			continue
		}
		hn := q.admits(b)
		if !hn && implied {
			continue
		}
		hv := b.mayHold(ps)
		if !hv && !hn {
			continue
		}
		for _, rg := range b.ranges {
			w := rg.w
			if w.dead {
				continue
			}
			if _, ok := hits[w.src]; hv && !ok && containsIn(w, int(rg.lo), int(rg.hi), v, token) {
				hits[w.src] = hit{src: w.src, mode: mode, n: len(v)}
			}
			if hn {
				q.visit(rg)
			}
		}
	}
	q.done = true
}

// identVariants returns the normalized spellings an identifier-shaped
// value is looked for in (see TransformIdent), without its own spelling;
// nil if the value is not identifier-shaped.
func identVariants(v string) []string {
	s := strings.ToLower(strings.TrimSpace(v))
	plus := strings.HasPrefix(s, "+")
	if plus {
		s = s[1:]
	}
	if len(s) == 0 || len(s) > 2*maxIdentChars {
		return nil
	}
	var groups []string
	var sep byte
	chars, digits, letters, start := 0, 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (isDigit(s[i]) || isLetter(s[i])) {
			chars++
			if isDigit(s[i]) {
				digits++
			} else {
				letters++
			}
			continue
		}
		if i < len(s) && s[i] != ' ' && s[i] != '-' && s[i] != '.' {
			return nil
		}
		if i == start {
			return nil // a separator at an edge or two in a row
		}
		if i < len(s) {
			if sep != 0 && s[i] != sep {
				return nil // mixed separators: not one grouping
			}
			sep = s[i]
		}
		groups = append(groups, s[start:i])
		start = i + 1
	}
	if chars < minIdentChars || chars > maxIdentChars || digits < minIdentDigits {
		return nil
	}
	if sep == '.' && letters > 0 || letters > digits {
		return nil // a host name or words, not an identifier
	}
	pre := ""
	if plus {
		pre = "+"
	}
	own := pre + strings.Join(groups, string(sep))
	compact := strings.Join(groups, "")
	var out []string
	add := func(x string) {
		x = pre + x
		if x != own && !contains(out, x) {
			out = append(out, x)
		}
	}
	add(compact)
	if len(groups) > 1 {
		for _, sp := range []string{" ", "-", "."} {
			add(strings.Join(groups, sp))
		}
	}
	if len(compact) > 4 {
		var fours []string
		for i := 0; i < len(compact); i += 4 {
			fours = append(fours, compact[i:min(i+4, len(compact))])
		}
		add(strings.Join(fours, " "))
		add(strings.Join(fours, "-"))
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// matchWholeTokenLocked finds the sources holding v as a whole token, at
// any length; r.mu must be held. Short values go through the filters;
// from blockOverlap+1 bytes on (when an occurrence may straddle two filter
// ranges) through the gram index, seeded from each of the first
// gramStride grams of v so that one of them is an indexed one. skipped
// reports a stop gram among those seeds (an occurrence may have been
// missed).
func (r *Registry) matchWholeTokenLocked(v []byte) (hits map[*source]hit, skipped bool) {
	hits = map[*source]hit{}
	// at reports whether v occurs at d[i:e] as a whole identifier.
	at := func(w *window, i, e int) bool {
		d := w.data
		return (i > 0 && !isTokenByte(d[i-1]) || i == 0 && w.first) &&
			(e < len(d) && !isTokenByte(d[e]) || e == len(d) && w.last) && identBounded(d, i, e)
	}
	if len(v) <= blockOverlap {
		var buf [2 * FragmentMin]probe
		ps := r.shortProbes(v, false, buf[:0])
		for _, b := range r.blocks {
			if b.gone || b.live == 0 || !b.mayHold(ps) {
				continue
			}
			for _, rg := range b.ranges {
				w := rg.w
				if _, ok := hits[w.src]; ok || w.dead {
					continue
				}
				d := w.data
				for lo, hi := int(rg.lo), min(int(rg.hi), len(d)); lo+len(v) <= hi; {
					j := bytes.Index(d[lo:hi], v)
					if j < 0 {
						break
					}
					if at(w, lo+j, lo+j+len(v)) {
						hits[w.src] = hit{src: w.src, mode: ModeWhole, n: len(v)}
						break
					}
					lo += j + 1
				}
			}
		}
		return hits, false
	}
	var ps []posting
	for p := 0; p < gramStride && p+gramSize <= len(v); p++ {
		var stop bool
		ps, stop = r.gramPostings(binary.LittleEndian.Uint64(v[p:]), ps[:0])
		if stop {
			skipped = true
			continue
		}
		for _, pt := range ps {
			w := pt.win
			if _, ok := hits[w.src]; ok {
				continue
			}
			i := int(pt.off) - p
			e := i + len(v)
			if i < 0 || e > len(w.data) || !bytes.Equal(w.data[i:e], v) {
				continue
			}
			if at(w, i, e) {
				hits[w.src] = hit{src: w.src, mode: ModeWhole, n: len(v)}
			}
		}
	}
	return hits, skipped
}

// groupAt reports whether a separator sep next to an identifier, with
// next beyond it, starts another group of the same identifier: a digit
// after a space, '-', '.' or '/', or a letter after any of them but the
// space ("DE89 3704", "AB-12"); a space before a word does not.
func groupAt(sep, next byte) bool {
	isSep := sep == ' ' || sep == '-' || sep == '.' || sep == '/'
	return isSep && (isDigit(next) || sep != ' ' && isTokenByte(next))
}

// identBounded reports whether d[i:e] is not continued by another group
// on either side (see groupAt), so that the tail of a longer identifier
// ("3704 0044 0532 0130 00" in "DE89 3704 0044 0532 0130 00") is not one.
func identBounded(d []byte, i, e int) bool {
	return !(i >= 2 && groupAt(d[i-1], d[i-2])) && !(e+1 < len(d) && groupAt(d[e], d[e+1]))
}

// maxTypedValue bounds the values typed matching is tried on: numbers and
// identifiers are short.
const maxTypedValue = 128

// typedNumber returns the search for value as a typed number, or nil.
func (r *Registry) typedNumber(value string) *numberQuery {
	if len(value) > maxTypedValue {
		return nil
	}
	if num, ok := parseValueNumber(value); ok {
		return r.newNumberQuery(num)
	}
	return nil
}

// typedLocked reports the typed matches of value (see TransformNumber and
// TransformIdent) to add, with n the normalized length of the value and
// nq its number search (nil if it is not a number; run here unless it
// ran with the raw value); r.mu must be held.
func (r *Registry) typedLocked(value string, n int, nq *numberQuery, add func(*source, Transform, int)) {
	if len(value) > maxTypedValue || n == 0 {
		return
	}
	if nq != nil {
		if !nq.done {
			r.matchNumberLocked(nq)
		}
		for s, u := range nq.hits {
			t := TransformNumber
			if u != "" {
				t += Transform(":" + u)
			}
			add(s, t, n)
		}
	}
	for _, v := range identVariants(value) {
		// A stop gram may hide an occurrence; a missed typed match only
		// leaves out a source the value would have equalled, which never
		// raises the value's level.
		hits, _ := r.matchWholeTokenLocked(Normalize([]byte(v)))
		for s := range hits {
			add(s, TransformIdent, n)
		}
	}
}
