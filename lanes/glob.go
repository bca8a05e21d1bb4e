package lanes

import "strings"

// Glob is a tool pattern checked once and prepared for repeated matching
// on the policy engine's hot path. It matches exactly what MatchTool
// matches for the same pattern; the common shapes (an exact name, "*",
// "prefix*", "*suffix", "*infix*") skip the general matcher.
type Glob struct {
	pattern string
	kind    globKind
	lit     string // the literal part for globExact, globPrefix, globSuffix, globContains
}

type globKind uint8

const (
	globExact    globKind = iota // no metacharacters: equality
	globAll                      // "*"
	globPrefix                   // "lit*"
	globSuffix                   // "*lit"
	globContains                 // "*lit*"
	globGeneral                  // anything else
)

// CompileGlob validates pattern (see ValidPattern) and prepares it.
func CompileGlob(pattern string) (Glob, error) {
	if err := ValidPattern(pattern); err != nil {
		return Glob{}, err
	}
	g := Glob{pattern: pattern, kind: globGeneral}
	switch {
	case pattern == "*":
		g.kind = globAll
	case !hasMeta(pattern):
		g.kind, g.lit = globExact, pattern
	case strings.HasSuffix(pattern, "*") && !hasMeta(pattern[:len(pattern)-1]):
		g.kind, g.lit = globPrefix, pattern[:len(pattern)-1]
	case strings.HasPrefix(pattern, "*") && !hasMeta(pattern[1:]):
		g.kind, g.lit = globSuffix, pattern[1:]
	case len(pattern) > 2 && pattern[0] == '*' && pattern[len(pattern)-1] == '*' && !hasMeta(pattern[1:len(pattern)-1]):
		g.kind, g.lit = globContains, pattern[1:len(pattern)-1]
	}
	return g, nil
}

// String returns the pattern as written.
func (g Glob) String() string { return g.pattern }

// Literal reports whether the pattern has no metacharacters (it matches one
// name only).
func (g Glob) Literal() bool { return g.kind == globExact }

// Match reports whether name matches, as MatchTool(g.String(), name) does.
func (g Glob) Match(name string) bool {
	switch g.kind {
	case globExact:
		return name == g.lit
	case globAll:
		return true
	case globPrefix:
		return strings.HasPrefix(name, g.lit)
	case globSuffix:
		return strings.HasSuffix(name, g.lit)
	case globContains:
		return strings.Contains(name, g.lit)
	}
	return name == g.pattern || globMatch(g.pattern, name)
}
