package policy

import "strings"

// NormalizeShell returns the canonical form of a shell command for keying
// and matching: line continuations removed, each line break turned into
// " ; ", runs of blanks collapsed to one space, and the ends trimmed. It
// does not interpret the command; two commands that differ only in blank
// space inside quotes share a form (and so an effect-ledger key), which
// only ever asks for more review. It is idempotent.
func NormalizeShell(s string) string {
	if isNormalShell(s) {
		return s
	}
	return normalizeShell(s)
}

// normalizeShell is NormalizeShell without its check for the common form.
func normalizeShell(s string) string {
	if strings.Contains(s, "\\\n") || strings.Contains(s, "\\\r\n") {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "\\\r\n", ""), "\\\n", "")
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	emit := func(c byte) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\v', '\f':
			space = true
		case '\r', '\n':
			if i+1 < len(s) && c == '\r' && s[i+1] == '\n' {
				i++
			}
			space = true
			emit(';')
			space = true
		default:
			emit(c)
		}
	}
	return b.String()
}

// isNormalShell reports whether NormalizeShell would return s unchanged:
// no line break or blank other than a space, and every space single and
// between two other bytes. Most commands are already in that form, and
// the check costs one pass and no allocation.
func isNormalShell(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\t', '\v', '\f', '\r', '\n':
			return false
		case ' ':
			if i == 0 || i == len(s)-1 || s[i+1] == ' ' {
				return false
			}
		}
	}
	return true
}

// ScreenText is what shape rules see of a sink value: NormalizeShell's
// form with the trivial obfuscations a shell ignores taken out — quote
// characters and backslashes deleted (c”url, c\url and "curl" all read
// curl) and $IFS / ${IFS} read as a space. Matching the screen form makes
// a rule harder to sidestep; it is never used as a key.
func ScreenText(s string) string {
	n := NormalizeShell(s)
	if !strings.ContainsAny(n, "'\"\\$") {
		return n
	}
	n = strings.NewReplacer("${IFS}", " ", "$IFS", " ", "'", "", "\"", "", "\\", "").Replace(n)
	return NormalizeShell(n)
}

// shellTokens splits a screen-form command into words at blanks and shell
// operators, for boundary classification (paths and URLs a command
// mentions). It is a heuristic, not a shell parser; a word of the form
// --flag=value also yields value.
func shellTokens(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool {
		switch r {
		case ' ', ';', '|', '&', '<', '>', '(', ')', '`':
			return true
		}
		return false
	})
	out := f[:0:0]
	for _, w := range f {
		out = append(out, w)
		if i := strings.IndexByte(w, '='); i > 0 && i < len(w)-1 {
			out = append(out, w[i+1:])
		}
	}
	return out
}
