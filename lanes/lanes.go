// Package lanes names the lanes a worker can run in — coordinator,
// isolated, specialist — and checks that a spawned worker's scope only ever
// narrows.
package lanes

import (
	"errors"
	"fmt"
	"path"
	"unicode/utf8"
)

// Built-in lane kinds. A policy may declare further lanes of its own.
const (
	Coordinator = "coordinator" // owns user intent, reviews and promotion
	Isolated    = "isolated"    // research, drafting, cron/heartbeat work
	Specialist  = "specialist"  // coding or browser runtime
)

// Builtin lists the built-in lanes in a stable order.
var Builtin = []string{Coordinator, Isolated, Specialist}

// ErrWiden is returned when a child scope is not a subset of its parent's.
var ErrWiden = errors.New("lanes: child scope is wider than its parent's")

// ErrBadPattern is returned for a tool pattern that is not a valid glob.
var ErrBadPattern = errors.New("lanes: bad tool pattern")

// ValidPattern returns nil for a well-formed tool pattern and an error
// wrapping ErrBadPattern otherwise. The syntax is that of path.Match: '*', '?', '[...]' classes (negated with '^',
// ranges with '-') and '\\' escapes.
func ValidPattern(p string) error {
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("%w: %q", ErrBadPattern, p)
	}
	return nil
}

// MatchTool reports whether tool matches a pattern: an exact name, "*", or
// a shell-style glob such as "mcp__github__*". Tool names are flat: unlike
// path.Match, '*' and '?' also match '/', so a denial such as "mcp__*"
// cannot be sidestepped by a tool name containing a slash. A malformed
// pattern matches only the identical name.
func MatchTool(pattern, tool string) bool {
	if pattern == "*" || pattern == tool {
		return true
	}
	if ValidPattern(pattern) != nil {
		return false
	}
	return globMatch(pattern, tool)
}

// globMatch is path.Match with '/' treated as an ordinary character. The
// pattern must be valid. The pattern is split at '*' into chunks; each
// chunk is matched at the earliest position it fits, which is optimal for
// every chunk but the last, and the last must end the name.
func globMatch(pattern, name string) bool {
Pattern:
	for len(pattern) > 0 {
		star, chunk, rest := scanChunk(pattern)
		pattern = rest
		if star && chunk == "" {
			return true // a trailing '*' matches the rest of the name
		}
		if t, ok := matchChunk(chunk, name); ok && (len(t) == 0 || len(pattern) > 0) {
			name = t
			continue
		}
		if star {
			for i := 0; i < len(name); {
				_, n := utf8.DecodeRuneInString(name[i:])
				i += n
				if t, ok := matchChunk(chunk, name[i:]); ok && (len(t) == 0 || len(pattern) > 0) {
					name = t
					continue Pattern
				}
			}
		}
		return false
	}
	return len(name) == 0
}

// scanChunk splits off the leading stars and the next star-free chunk.
func scanChunk(pattern string) (star bool, chunk, rest string) {
	for len(pattern) > 0 && pattern[0] == '*' {
		pattern = pattern[1:]
		star = true
	}
	inClass := false
	i := 0
scan:
	for ; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++ // skip the escaped byte
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '*':
			if !inClass {
				break scan
			}
		}
	}
	if i > len(pattern) {
		i = len(pattern)
	}
	return star, pattern[:i], pattern[i:]
}

// matchChunk matches a star-free chunk against the start of s and returns
// the rest of s.
func matchChunk(chunk, s string) (rest string, ok bool) {
	for len(chunk) > 0 {
		if len(s) == 0 {
			return "", false
		}
		switch chunk[0] {
		case '[':
			r, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			chunk = chunk[1:]
			negated := len(chunk) > 0 && chunk[0] == '^'
			if negated {
				chunk = chunk[1:]
			}
			matched := false
			for first := true; ; first = false {
				if len(chunk) > 0 && chunk[0] == ']' && !first {
					chunk = chunk[1:]
					break
				}
				var lo, hi rune
				var ok bool
				if lo, chunk, ok = classChar(chunk); !ok {
					return "", false
				}
				hi = lo
				if len(chunk) > 0 && chunk[0] == '-' {
					if hi, chunk, ok = classChar(chunk[1:]); !ok {
						return "", false
					}
				}
				if lo <= r && r <= hi {
					matched = true
				}
			}
			if matched == negated {
				return "", false
			}
		case '?':
			_, n := utf8.DecodeRuneInString(s)
			s = s[n:]
			chunk = chunk[1:]
		case '\\':
			chunk = chunk[1:]
			if len(chunk) == 0 {
				return "", false
			}
			fallthrough
		default:
			if chunk[0] != s[0] {
				return "", false
			}
			s = s[1:]
			chunk = chunk[1:]
		}
	}
	return s, true
}

// classChar reads one possibly escaped character of a class.
func classChar(chunk string) (rune, string, bool) {
	if len(chunk) == 0 || chunk[0] == '-' || chunk[0] == ']' {
		return 0, chunk, false
	}
	if chunk[0] == '\\' {
		chunk = chunk[1:]
		if len(chunk) == 0 {
			return 0, chunk, false
		}
	}
	r, n := utf8.DecodeRuneInString(chunk)
	if r == utf8.RuneError && n == 1 || len(chunk) == n {
		return 0, chunk, false
	}
	return r, chunk[n:], true
}

// Allowed reports whether any pattern in allow matches tool.
func Allowed(allow []string, tool string) bool {
	for _, p := range allow {
		if MatchTool(p, tool) {
			return true
		}
	}
	return false
}

// Attenuate checks that every pattern a child asks for is covered by one of
// its parent's patterns and returns a copy of the child's list. A child may
// name concrete tools its parent reaches through a glob, or repeat one of
// its parent's patterns exactly; any other glob is refused even when it
// looks narrower, because glob containment is not checked. Malformed child
// patterns are refused with ErrBadPattern.
func Attenuate(parent, child []string) ([]string, error) {
	for _, c := range child {
		if err := ValidPattern(c); err != nil {
			return nil, err
		}
		covered := false
		for _, p := range parent {
			if p == "*" || p == c || (!hasMeta(c) && MatchTool(p, c)) {
				covered = true
				break
			}
		}
		if !covered {
			return nil, fmt.Errorf("%w: %q", ErrWiden, c)
		}
	}
	return append([]string(nil), child...), nil
}

func hasMeta(s string) bool {
	for _, r := range s {
		switch r {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

// classes are the consequence classes a tool call can have, in the order
// the policy engine indexes them (policy.Consequences is the same list).
var classes = [...]string{
	"local_read", "local_mutation", "outbound_send", "remote_query",
	"credential_use", "arbitrary_execution", "device_actuation",
}

// Classes returns the consequence classes, in their fixed order.
func Classes() []string { return append([]string(nil), classes[:]...) }

// IsClass reports whether c names a consequence class.
func IsClass(c string) bool {
	for _, k := range classes {
		if k == c {
			return true
		}
	}
	return false
}
