package policy

import (
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A prefilter is a necessary condition for a shape rule's expression to
// match: the case-folded text (see fold) must contain one of its
// case-folded literals. It is
// derived from the expression's syntax tree, so it never skips a text the
// expression matches; an empty prefilter means "always run the
// expression". Checking a few substrings is far cheaper than running
// large alternations through the regexp engine, and most calls contain
// none of a rule's literals.
type prefilter []string

// maxPrefilter bounds the literals of one prefilter; a larger set is not
// worth checking.
const maxPrefilter = 32

// newPrefilter returns the prefilter of expr, case-folded (nil when no
// useful literal is required). An expression that does not parse gets
// none; compile reports it.
func newPrefilter(expr string) prefilter {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	set, ok := required(re.Simplify())
	if !ok {
		return nil
	}
	for _, s := range set {
		if s == "" {
			return nil
		}
	}
	if set = minimal(set); len(set) > maxPrefilter {
		return nil
	}
	return set
}

// minimal returns set without the literals that repeat or contain another
// of its literals, keeping the order of the rest. It is the same condition:
// a text that contains a literal also contains every literal inside it. A
// large alternation that names one stem several times (".ssh/" and ".ssh",
// say) fits within maxPrefilter this way.
func minimal(set []string) []string {
	out := set[:0:0]
	for i, s := range set {
		redundant := false
		for j, t := range set {
			if i != j && strings.Contains(s, t) && (len(t) < len(s) || j < i) {
				redundant = true
				break
			}
		}
		if !redundant {
			out = append(out, s)
		}
	}
	return out
}

// required returns a set of literals one of which every match contains.
func required(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		// Folding a case-sensitive literal too keeps the condition
		// necessary: folding maps each rune on its own, so it preserves
		// containment.
		s := fold(string(re.Rune))
		if !utf8.ValidString(s) || s == "" {
			return nil, false
		}
		return []string{s}, true
	case syntax.OpCapture:
		return required(re.Sub[0])
	case syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
		return nil, false
	case syntax.OpConcat:
		// Any child's requirement holds for the whole; keep the one whose
		// shortest literal is longest (the most selective).
		var best []string
		bestLen := 0
		for _, sub := range re.Sub {
			set, ok := required(sub)
			if !ok {
				continue
			}
			if m := shortest(set); m > bestLen {
				best, bestLen = set, m
			}
		}
		return best, best != nil
	case syntax.OpAlternate:
		var union []string
		for _, sub := range re.Sub {
			set, ok := required(sub)
			if !ok {
				return nil, false
			}
			union = append(union, set...)
		}
		return minimal(union), true
	}
	return nil, false
}

func shortest(set []string) int {
	m := -1
	for _, s := range set {
		if m < 0 || len(s) < m {
			m = len(s)
		}
	}
	return m
}

// mayMatch reports whether a text, given case-folded, can match.
func (p prefilter) mayMatch(folded string) bool {
	if len(p) == 0 {
		return true
	}
	for _, lit := range p {
		if strings.Contains(folded, lit) {
			return true
		}
	}
	return false
}

// fold maps every rune to the smallest rune of its case-folding orbit (the
// orbit (?i) matches: k, K and the Kelvin sign all map to K), so that a
// text matching a literal under (?i) contains the folded literal once
// folded itself. ASCII text takes a fast path.
func fold(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s)
	}
	return strings.Map(func(r rune) rune {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < m {
				m = f
			}
		}
		return m
	}, s)
}
