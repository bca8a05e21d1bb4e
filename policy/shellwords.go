package policy

import "strings"

// What FeatureShellWords (receipt format level 14) reads of a shell
// command beyond level 13: destinations a network tool is given through
// an expansion, and paths named relative to the working directory.

// maxAssignments bounds the NAME=value words one reading remembers.
const maxAssignments = 64

// builtHost stands for a destination built at run time of which no domain
// is known ($(cat host.txt), evil$(x).example). It is in the reserved
// .invalid domain, so only an allow-list that admits every host admits it.
const builtHost = "built-at-run-time.invalid"

// assignment is a NAME=value word of the command being read.
type assignment struct{ name, value string }

// collectAssignments remembers the NAME=value words of segs (X=1 before a
// command, export X=1, local X=1, ...). Any word of that form counts: a
// word that only looks like one is looked up only when a destination is
// exactly $NAME, and then costs at most a review.
func (rd *hostReading) collectAssignments(segs [][]string) {
	for _, seg := range segs {
		for _, w := range seg {
			eq := strings.IndexByte(w, '=')
			if eq <= 0 || !isName(w[:eq]) || len(rd.assigns) >= maxAssignments {
				continue
			}
			rd.assigns = append(rd.assigns, assignment{w[:eq], w[eq+1:]})
		}
	}
}

// appendHost is appendHost for one reading. Without expand, or for an
// operand with no expansion, it is appendHost. Otherwise the operand's
// expansions are masked and its host part found around them:
//   - a host with no expansion in it is read as usual (user@ or a path
//     may hold one: $USER@evil.example, evil.example/$(id));
//   - a host that is exactly a variable, $H or ${H}, is the host of each
//     value the command assigns to H; a variable the command does not set
//     comes from an environment the issuer cannot see and is left out, as
//     at level 13;
//   - a host whose last expansion is followed by a static domain of two or
//     more labels ($(whoami).evil.example, ${ID}-x.evil.example) is a
//     name under that domain, which is what a DNS query for it reaches;
//   - any other host with an expansion in it is builtHost.
func (rd *hostReading) appendHost(out []string, w string) []string {
	if !rd.expand || !strings.ContainsAny(w, "$`") {
		return appendHost(out, w)
	}
	m, names := maskExpansions(w)
	if strings.Contains(m, "://") {
		return out // a URL: classifyCommand has it
	}
	if k := strings.IndexAny(m, "/?#"); k >= 0 {
		m, w = m[:k], w[:k]
	}
	if at := strings.LastIndexByte(m, '@'); at >= 0 {
		m, w = m[at+1:], w[at+1:]
	}
	if k := strings.IndexByte(m, ':'); k >= 0 {
		m, w = m[:k], w[:k]
	}
	last := strings.LastIndexByte(m, 0)
	switch {
	case m == "":
		return out
	case last < 0:
		return appendHost(out, w)
	case strings.Trim(m, "\x00") == "" && len(names) == 1 && names[0] != "":
		// One expansion that is the whole host and names a variable: the
		// host is exactly $NAME or ${NAME}.
		for _, a := range rd.assigns {
			if a.name == names[0] && !strings.ContainsAny(a.value, "$`") {
				out = appendHost(out, a.value)
			}
		}
		return out
	}
	if dot := strings.IndexByte(m[last:], '.'); dot >= 0 {
		domain := strings.TrimSuffix(strings.ToLower(m[last+dot+1:]), ".")
		if isDottedName(domain) {
			return append(out, "x."+domain)
		}
	}
	return append(out, builtHost)
}

// maskExpansions returns w with every byte of each expansion in it
// ($(...), `...`, ${...}, $NAME, $1, $@ ...) replaced by 0, so the result
// has w's length and its indexes are w's; and, for each expansion in
// order, the variable it names ("" for a command substitution or a
// special parameter). An unclosed expansion runs to the end.
func maskExpansions(w string) (string, []string) {
	b := []byte(w)
	var names []string
	mask := func(i, j int) {
		for k := i; k < j; k++ {
			b[k] = 0
		}
	}
	for i := 0; i < len(w); i++ {
		switch {
		case w[i] == '`':
			end := len(w)
			if k := closingTick(w, i); k > 0 {
				end = k + 1
			}
			mask(i, end)
			names = append(names, "")
			i = end - 1
		case w[i] != '$' || i+1 == len(w):
		case w[i+1] == '(':
			end := len(w)
			if k := closingParen(w, i+1); k > 0 {
				end = k + 1
			}
			mask(i, end)
			names = append(names, "")
			i = end - 1
		case w[i+1] == '{':
			end, name := len(w), ""
			if k := strings.IndexByte(w[i:], '}'); k > 0 {
				end = i + k + 1
				if isName(w[i+2 : end-1]) {
					name = w[i+2 : end-1]
				}
			}
			mask(i, end)
			names = append(names, name)
			i = end - 1
		default:
			end := i + 1
			for end < len(w) && (w[end] == '_' || w[end] >= 'a' && w[end] <= 'z' || w[end] >= 'A' && w[end] <= 'Z' || end > i+1 && w[end] >= '0' && w[end] <= '9') {
				end++
			}
			if end == i+1 {
				end++ // $1, $@, $?, $$ ...
			}
			name := w[i+1 : end]
			if !isName(name) {
				name = ""
			}
			names = append(names, name)
			mask(i, end)
			i = end - 1
		}
	}
	return string(b), names
}

// shellPathWord returns the path a shell word names, or "": an absolute
// or home path, or a path relative to the working directory, which
// starts with a dot (.env, .ssh/x) or holds a slash (deploy/.env,
// $HOME/.ssh/id_rsa), with a leading @ taken off (curl -d @.env reads
// the file). Options, URLs and remote host:path forms are not paths. An
// expansion or a glob stays in the path as written, so a protected-path
// pattern can still match around it.
func shellPathWord(w string) string {
	w = strings.TrimPrefix(w, "@")
	switch {
	case w == "", w[0] == '-', strings.ContainsRune(w, ':'):
		return ""
	case w[0] == '/', w[0] == '~', w[0] == '.', strings.Contains(w, "/"):
		return w
	}
	return ""
}

// shellFileWord reports whether a word with no slash names a file in the
// working directory by its look (FeatureShellBareWords): a name with a
// dot inside it (ops.pw, terraform.tfstate, id_rsa.key), not an option,
// an assignment, a remote form or a number. Such a word is resolved and
// held to the protected paths as a path word is.
func shellFileWord(w string) bool {
	if w == "" || w[0] == '-' || w[0] == '.' || strings.ContainsAny(w, "/:=@") {
		return false
	}
	dot := strings.IndexByte(w, '.')
	if dot <= 0 || dot == len(w)-1 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if (w[i] < '0' || w[i] > '9') && w[i] != '.' {
			return true
		}
	}
	return false // 1.5, 10.0.0.1
}
