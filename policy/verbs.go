package policy

import "fmt"

// Tool verbs: a surface may take the tools its patterns match only when
// the tool's name says what the surface's consequence is. An MCP server
// names its tools for what they do (get_balance, send_money, unlock_door,
// BankManagerTransferFunds), and a document that judged every tool it has
// no surface for as a query would read a transfer as a lookup.
//
// A tool's own name is what follows mcp__<server>__ (the server's name
// says nothing about a tool), or the whole name for other tools. Its words
// are the runs of ASCII letters and digits, split again where a lower-case
// letter meets an upper-case one (sendEmail), before the last capital of
// a run of capitals followed by a lower-case letter (HTTPPost), and where
// letters meet digits (s3Upload), all lower-cased. Its verb is the first
// of its words that some surface of the document lists under verbs, so
// the order of the words decides, not the order of the surfaces:
// get_transfer_history is a get, BankManagerTransferFunds a transfer.

// Limits on verbs.
const (
	maxVerbBytes  = 32 // bytes of one verb
	maxNameWords  = 16 // words of a tool's name examined for its verb
	maxWordBuffer = 64 // bytes of one word compared (longer words are no verb)
)

// toolLocalName is the part of a tool name its words are read from: the
// tool's own name after mcp__<server>__, or the whole name.
func toolLocalName(tool string) string {
	const prefix = "mcp__"
	if len(tool) > len(prefix) && tool[:len(prefix)] == prefix {
		rest := tool[len(prefix):]
		for i := 0; i+1 < len(rest); i++ {
			if rest[i] == '_' && rest[i+1] == '_' {
				return rest[i+2:]
			}
		}
	}
	return tool
}

// nameWords calls fn with each word of name (lower-cased), in order, at
// most maxNameWords of them, until fn returns false. buf holds the
// lower-cased word; fn must not keep it.
func nameWords(name string, fn func(word []byte) bool) {
	var buf [maxWordBuffer]byte
	n, words := 0, 0
	long := false // the word in progress is longer than buf
	emit := func() bool {
		if n == 0 && !long {
			return true
		}
		ok := true
		if !long {
			ok = fn(buf[:n])
		}
		n, long = 0, false
		words++
		return ok && words < maxNameWords
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		kind := charKind(c)
		if kind == kindOther {
			if !emit() {
				return
			}
			continue
		}
		if n > 0 || long {
			prev := charKind(name[i-1])
			split := prev == kindLower && kind == kindUpper ||
				prev == kindDigit && kind != kindDigit ||
				prev != kindDigit && kind == kindDigit ||
				prev == kindUpper && kind == kindUpper && i+1 < len(name) && charKind(name[i+1]) == kindLower
			if split && !emit() {
				return
			}
		}
		if n == len(buf) {
			long = true
			continue
		}
		if kind == kindUpper {
			c += 'a' - 'A'
		}
		if !long {
			buf[n] = c
			n++
		}
	}
	emit()
}

const (
	kindOther = iota
	kindLower
	kindUpper
	kindDigit
)

func charKind(c byte) int {
	switch {
	case c >= 'a' && c <= 'z':
		return kindLower
	case c >= 'A' && c <= 'Z':
		return kindUpper
	case c >= '0' && c <= '9':
		return kindDigit
	}
	return kindOther
}

// NameWords are the words of a tool's own name, as the verbs of a
// document's surfaces are looked up in them (see verbs.go): for
// "mcp__bank__BankManagerTransferFunds", [bank manager transfer funds].
func NameWords(tool string) []string {
	var out []string
	nameWords(toolLocalName(tool), func(w []byte) bool {
		out = append(out, string(w))
		return true
	})
	return out
}

// verbOf is a tool's verb under the compiled document: the first word of
// its own name that a surface lists under verbs, or "" when none does.
func (c *compiled) verbOf(tool string) string {
	verb := ""
	nameWords(toolLocalName(tool), func(w []byte) bool {
		if _, ok := c.verbs[string(w)]; ok {
			verb = string(w)
			return false
		}
		return true
	})
	return verb
}

// checkVerbs validates a surface's verbs and returns them as a set (nil
// when the surface lists none).
func checkVerbs(f string, verbs []string) (map[string]bool, error) {
	if len(verbs) == 0 {
		return nil, nil
	}
	if len(verbs) > maxEntries {
		return nil, invalid(f, "more than %d entries", maxEntries)
	}
	set := make(map[string]bool, len(verbs))
	var ps problems
	for i, v := range verbs {
		vf := fmt.Sprintf("%s[%d]", f, i)
		switch {
		case v == "" || len(v) > maxVerbBytes:
			ps.add(invalid(vf, "a verb is 1-%d characters", maxVerbBytes))
		case !isWord(v):
			ps.add(invalid(vf, "%q is not one word of a tool name: use lower-case letters only, or digits only (names are split at _, -, . and case changes)", v))
		case set[v]:
			ps.add(invalid(vf, "duplicate verb %q", v))
		default:
			set[v] = true
		}
	}
	return set, ps.err()
}

// isWord reports whether v is a word nameWords can yield: lower-case
// letters only or digits only.
func isWord(v string) bool {
	k := charKind(v[0])
	if k != kindLower && k != kindDigit {
		return false
	}
	for i := 1; i < len(v); i++ {
		if charKind(v[i]) != k {
			return false
		}
	}
	return true
}
