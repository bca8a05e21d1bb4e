package policy

import (
	"strings"
)

// Features are judging behaviours added after the version 2 document
// first shipped. A log must replay to the decisions it recorded, so the
// state machine turns each one on only from the receipt format level that
// introduced it (package fsm), once every voter's build judges the same
// way; a Request without it is judged exactly as before.
type Features uint32

const (
	// FeatureShellHosts classifies the destinations that network tools in
	// a shell command name without a scheme (nc HOST PORT, ssh
	// user@HOST, scp FILE HOST:, curl HOST/path, dig NAME) against
	// boundaries.egress_allow, as a URL with a scheme always was
	// (shellHosts). Receipt format level 13.
	FeatureShellHosts Features = 1 << iota
	// FeatureShellWords reads more of a shell command's words
	// (shellwords.go): a relative path (.env, deploy/.ssh/id_rsa, curl's
	// @file) is resolved against the working directory and held to the
	// protected paths as an absolute one always was; a network tool's
	// destination built at run time is judged by what is known of it (the
	// static domain after $(whoami). or ${USER}., the value a NAME=host
	// word of the same command gives $NAME, or, built wholly by a command
	// substitution, as a host outside every allow-list). Receipt format
	// level 14.
	FeatureShellWords
	// FeatureCountedQuotas lists on a permit only the quotas the call
	// counts against (Quota.Counts): a quota that limits requests always,
	// one that limits only an amount or bytes when the call declares
	// some. Before it every quota of the lane was listed, so git status
	// named an amount-only refunds quota. Every quota is still checked and
	// charged as before; only the rules a receipt names change. Receipt
	// format level 14.
	FeatureCountedQuotas
	// FeatureProtectedUndeclared closes two gaps of the protected-content
	// check (provenance.protected): a remote query or send that names no
	// destination (an MCP tool's arguments go to its server, wherever
	// that is; a web search's query to the search engine) counts as
	// leaving, and every argument of an MCP tool (its server is handed
	// the whole object) or of a surface that names none of its fields is
	// checked, so a secret in a spare argument of a poisoned MCP tool is
	// refused (protected_transfer). Receipt format level 14.
	FeatureProtectedUndeclared
	// FeatureAuthorityUncarried closes a gap of the require rules
	// (provenance.require): a call that carries none of the fields a rule
	// reads (a delete by "path" where the rule names file_id, a chat send
	// to "user_id" where it names recipient and channel) had nothing
	// checked and passed. What such a call acts on is somewhere in its
	// arguments, so every argument must then trace as the rule requires;
	// a call that carries one of the fields is judged as before. Receipt
	// format level 15.
	FeatureAuthorityUncarried
	// FeaturePatchPaths reads the files a patch in the apply_patch format
	// names (patchpaths.go) on a surface without a target, and holds each
	// to the protected paths, boundaries.paths, the workspace and the
	// memory paths, as a Write's target always was: before it a Codex
	// patch to ~/.aws/config, outside the workspace or to CLAUDE.md was
	// judged by the shape rules alone. Receipt format level 15.
	FeaturePatchPaths
	// FeatureShellBareWords also holds a shell word with no slash that
	// looks like a file name (shellFileWord: cat ops.pw, cp
	// terraform.tfstate /tmp) to the protected paths, resolved against the
	// working directory; FeatureShellWords read only words that start
	// with a dot or hold a slash. Receipt format level 15.
	FeatureShellBareWords
)

// destGrammar is which operands of a network tool name its destination.
type destGrammar uint8

const (
	// firstOperand: the first operand is the destination (nc HOST PORT,
	// ssh HOST CMD, telnet HOST).
	firstOperand destGrammar = iota
	// everyOperand: each operand is one (curl and wget take URLs with or
	// without a scheme; the DNS tools take names).
	everyOperand
	// remoteOperands: operands of the form [user@]host:path name a host
	// (scp, rsync, git's scp-like addresses); other operands are local.
	remoteOperands
	// socatAddresses: operands are socat addresses (TCP:host:port).
	socatAddresses
)

// netTool says how one network tool names its destination.
type netTool struct {
	dest destGrammar
	// bareFirst: with remoteOperands, a first operand without host: is a
	// host too (sftp [user@]HOST).
	bareFirst bool
	// digWords: +option words are skipped and @server names the resolver
	// asked, a destination too (dig).
	digWords bool
	// shortValue are the one-letter options that take a value; longValue
	// the long ones (without their dashes) that take one when it is not
	// joined by '='. An option not listed takes none.
	shortValue string
	longValue  []string
	// listen are options that make the tool listen instead of connect:
	// then it names no destination.
	listen []string
	// hostValue are short options whose value is a destination too (ssh
	// -J, nc -x proxy).
	hostValue string
}

var (
	curlLong = []string{"data", "data-raw", "data-binary", "data-urlencode", "data-ascii", "json", "header", "output",
		"request", "user", "user-agent", "referer", "upload-file", "form", "form-string", "cookie", "cookie-jar",
		"config", "max-time", "connect-timeout", "write-out", "proxy", "proxy-user", "resolve", "connect-to",
		"cacert", "capath", "cert", "key", "retry", "retry-delay", "retry-max-time", "range", "limit-rate",
		"max-filesize", "dump-header", "output-dir", "interface", "dns-servers", "doh-url", "noproxy",
		"oauth2-bearer", "pass", "aws-sigv4", "trace", "trace-ascii", "stderr", "netrc-file", "ciphers",
		"variable", "cert-type", "key-type", "local-port", "max-redirs", "speed-limit", "speed-time", "time-cond",
		"unix-socket", "abstract-unix-socket", "expect100-timeout", "happy-eyeballs-timeout-ms", "hostpubmd5",
		"pinnedpubkey", "proto", "proto-redir", "quote", "socks4", "socks4a", "socks5", "socks5-hostname",
		"preproxy", "url-query", "rate", "etag-save", "etag-compare", "alt-svc", "hsts", "sasl-authzid",
		"login-options", "mail-from", "mail-rcpt", "mail-auth", "tls-max", "tlsuser", "tlspassword"}
	wgetLong = []string{"output-document", "output-file", "append-output", "directory-prefix", "user-agent",
		"header", "post-data", "post-file", "body-data", "body-file", "method", "user", "password",
		"http-user", "http-password", "ftp-user", "ftp-password", "referer", "tries", "timeout",
		"connect-timeout", "read-timeout", "dns-timeout", "wait", "waitretry", "input-file", "load-cookies",
		"save-cookies", "bind-address", "limit-rate", "quota", "level", "accept", "reject", "domains",
		"exclude-domains", "include-directories", "exclude-directories", "execute", "base", "config",
		"ca-certificate", "ca-directory", "certificate", "private-key", "restrict-file-names", "local-encoding",
		"remote-encoding", "progress", "report-speed", "cut-dirs", "default-page", "rejected-log",
		"regex-type", "accept-regex", "reject-regex", "max-redirect", "backups"}
)

// netcat and ping are the tools known under two names.
var (
	netcat = netTool{shortValue: "cegGiIOpPqsTwWxX", listen: []string{"l", "listen"}, hostValue: "x"}
	ping   = netTool{shortValue: "cfiIlmMpQsStTw"}
)

// netTools are the network tools whose operands shellHosts reads, by the
// command's base name.
var netTools = map[string]netTool{
	"curl": {dest: everyOperand, shortValue: "AbcCdDeEFHKmoPQrtTuUwxXyYz", longValue: curlLong, hostValue: "x"},
	"wget": {dest: everyOperand, shortValue: "aABeDiIlOoPQRtTUwX", longValue: wgetLong},
	"nc":   netcat,
	"ncat": {shortValue: "cegGiImpsw", longValue: []string{"proxy", "proxy-type", "proxy-auth", "source-port",
		"source", "wait", "idle-timeout", "exec", "sh-exec", "lua-exec", "output", "hex-dump", "max-conns",
		"allow", "allowfile", "deny", "denyfile", "ssl-cert", "ssl-key", "ssl-trustfile", "ssl-ciphers",
		"ssl-servername", "ssl-alpn"}, listen: []string{"l", "listen"}},
	"netcat":     netcat,
	"telnet":     {shortValue: "belnX"},
	"ssh":        {shortValue: "BbcDEeFIiJLlmOopQRSWw", hostValue: "J"},
	"sftp":       {dest: remoteOperands, bareFirst: true, shortValue: "BbcDFiJloPRSs", hostValue: "J"},
	"scp":        {dest: remoteOperands, shortValue: "cDFiJloPS", hostValue: "J"},
	"rsync":      {dest: remoteOperands, shortValue: "eBfMT", longValue: []string{"rsh", "rsync-path", "exclude", "include", "exclude-from", "include-from", "files-from", "filter", "password-file", "port", "bwlimit", "chmod", "chown", "log-file", "temp-dir", "partial-dir", "backup-dir", "suffix", "timeout", "contimeout", "compare-dest", "copy-dest", "link-dest", "max-size", "min-size", "block-size", "out-format", "sockopts", "address"}},
	"git":        {dest: remoteOperands, shortValue: "Cc", longValue: []string{"git-dir", "work-tree", "namespace", "exec-path", "config-env", "depth", "branch", "origin", "template", "reference", "separate-git-dir", "upload-pack", "receive-pack", "jobs", "filter", "shallow-since", "shallow-exclude", "push-option", "repo"}},
	"ftp":        {shortValue: "Pos"},
	"tftp":       {shortValue: "clmR"},
	"socat":      {dest: socatAddresses, shortValue: "dlLT"},
	"nslookup":   {dest: everyOperand},
	"dig":        {dest: everyOperand, digWords: true, shortValue: "bcfkpqtxy"},
	"host":       {dest: everyOperand, shortValue: "cNRtW"},
	"drill":      {dest: everyOperand, shortValue: "ckpqrstxy"},
	"ping":       ping,
	"ping6":      ping,
	"traceroute": {shortValue: "fFgimNpqszw"},
}

// commandPrefixes run the word after them (and their own options) as the
// command: sudo curl ..., env X=1 nc ..., timeout 5 ssh ....
var commandPrefixes = map[string]string{
	// the prefix's one-letter options that take a value
	"sudo": "CDghpRTUu", "doas": "Cu", "env": "CSu", "nohup": "", "time": "fo", "exec": "a",
	"command": "", "builtin": "", "nice": "n", "ionice": "cnp", "timeout": "ks", "stdbuf": "eio",
	"torsocks": "aPu", "proxychains": "f", "proxychains4": "f", "xargs": "adEeILnPs", "watch": "dn",
	"strace": "eoOpsSu", "then": "", "do": "", "else": "", "if": "", "while": "", "until": "", "!": "",
	"{": "", "nocorrect": "", "noglob": "", "eval": "",
}

// shells run the command after -c: bash -c "nc host 9".
var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "ash": true, "fish": true}

// shellHosts returns the hosts that network tools in a shell command
// name as destinations without a scheme. A URL with a scheme is
// classified by classifyCommand already and is left out here. It splits
// the command as a shell quotes it (shellSegments), reads each simple
// command whose command word, after prefixes such as sudo, env and
// timeout, is a tool of netTools, skips the values of the options that
// take one, and keeps the operands that name a destination in that tool's
// grammar: a dotted host name or an IP address (a single-label name such
// as db is a local name and is left out), with any user@, :port and /path
// taken off.
//
// It is a reading of common command lines, not a shell: a destination in
// a variable ($HOST) or built at run time is not seen, and a word it
// misreads as a destination only asks for a review.
func shellHosts(cmd string) []string {
	return appendShellHosts(nil, cmd, 0, &hostReading{})
}

// hostReading is one reading of a command's destinations: whether it
// reads expansions (FeatureShellWords) and the NAME=value words seen so
// far, which the commands nested in it inherit.
type hostReading struct {
	expand  bool
	assigns []assignment
}

// maxShellDepth bounds how deep sh -c "..." and "$(...)" are followed.
const maxShellDepth = 4

func appendShellHosts(out []string, cmd string, depth int, rd *hostReading) []string {
	if depth > maxShellDepth {
		return out
	}
	segs := shellSegments(cmd, depth, rd.expand)
	if rd.expand {
		rd.collectAssignments(segs)
	}
	for _, seg := range segs {
		out = segmentHosts(out, seg, depth, rd)
	}
	return out
}

// shellSegments splits a command into simple commands and their words the
// way a shell quotes: blanks (and $IFS) outside quotes end a word; ; | &
// ( ) ` < > and line breaks outside quotes also end the simple command;
// single quotes keep everything, double quotes keep everything but \ " $
// and ` after a backslash; a backslash outside quotes keeps the next
// character (a backslash-newline is a continuation). Quote characters are
// removed, so curl split by an empty pair of quotes or a backslash, or
// written in quotes, is the word curl. A command
// substitution inside double quotes ("$(nc h 1)") is also read as a
// command of its own.
//
// With expand (FeatureShellWords) a command substitution outside quotes,
// $(...) or `...`, stays part of its word, as a shell reads it
// ($(whoami).evil.example is one word), and its text is read as commands
// of their own; so is a `...` inside double quotes.
func shellSegments(s string, depth int, expand bool) [][]string {
	var (
		segs  [][]string
		words []string
		w     strings.Builder
		inW   bool
		pm    = parens{s: s}
	)
	endWord := func() {
		if inW {
			words = append(words, w.String())
			w.Reset()
			inW = false
		}
	}
	endSeg := func() {
		endWord()
		if len(words) > 0 {
			segs = append(segs, words)
			words = nil
		}
	}
	// keep reads the command substitution s[i..k], whose command starts
	// at from, as commands of their own, keeps its text in the word and
	// returns k.
	keep := func(i, from, k int) int {
		segs = append(segs, nestedSegments(s[from:k], depth, expand)...)
		w.WriteString(s[i : k+1])
		inW = true
		return k
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case expand && c == '$' && i+1 < len(s) && s[i+1] == '(' && pm.closing(i+1) > 0:
			i = keep(i, i+2, pm.closing(i+1))
		case expand && c == '`' && closingTick(s, i) > 0:
			i = keep(i, i+1, closingTick(s, i))
		case c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r':
			endWord()
		case c == ';' || c == '|' || c == '&' || c == '(' || c == ')' || c == '`' || c == '<' || c == '>' || c == '\n':
			endSeg()
		case c == '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
					inW = true
				}
			}
		case c == '\'':
			inW = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				w.WriteString(s[i+1:])
				i = len(s)
				break
			}
			w.WriteString(s[i+1 : i+1+j])
			i += 1 + j
		case c == '"':
			inW = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0:
					i++
					if s[i] != '\n' {
						w.WriteByte(s[i])
					}
				case s[i] == '$' && i+1 < len(s) && s[i+1] == '(' && pm.closing(i+1) > 0:
					i = keep(i, i+2, pm.closing(i+1))
				case expand && s[i] == '`' && closingTick(s, i) > 0:
					i = keep(i, i+1, closingTick(s, i))
				default:
					w.WriteByte(s[i])
				}
			}
		case c == '$' && strings.HasPrefix(s[i:], "${IFS}"):
			endWord()
			i += len("${IFS}") - 1
		case c == '$' && strings.HasPrefix(s[i:], "$IFS"):
			endWord()
			i += len("$IFS") - 1
		default:
			w.WriteByte(c)
			inW = true
		}
	}
	endSeg()
	return segs
}

// nestedSegments are the simple commands of a command substitution's
// text, one level deeper (none past maxShellDepth).
func nestedSegments(s string, depth int, expand bool) [][]string {
	if depth+1 > maxShellDepth {
		return nil
	}
	return shellSegments(s, depth+1, expand)
}

// closingTick returns the index of the backquote that closes the one at
// open, or -1.
func closingTick(s string, open int) int {
	if j := strings.IndexByte(s[open+1:], '`'); j >= 0 {
		return open + 1 + j
	}
	return -1
}

// parens answers closingParen for the '(' of one string, matching every
// pair in a single pass the first time it is asked: a command of many
// unclosed "$(" must not cost a scan to its end for each of them (the
// state machine judges it on every replica).
type parens struct {
	s     string
	close []int32 // the index of the ')' closing the '(' at each index, or -1
}

func (p *parens) closing(open int) int {
	if p.close == nil {
		p.close = matchParens(p.s)
	}
	return int(p.close[open])
}

// matchParens returns, for each index of s, the index of the ')' that
// closes a '(' there (as closingParen finds it), or -1.
func matchParens(s string) []int32 {
	m := make([]int32, len(s))
	var open []int32
	for i := 0; i < len(s); i++ {
		m[i] = -1
		switch s[i] {
		case '(':
			open = append(open, int32(i))
		case ')':
			if n := len(open); n > 0 {
				m[open[n-1]] = int32(i)
				open = open[:n-1]
			}
		}
	}
	return m
}

// closingParen returns the index of the ')' that closes the '(' at open,
// counting nesting, or -1.
func closingParen(s string, open int) int {
	n := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			n++
		case ')':
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// segmentHosts appends the destinations of one simple command's words.
func segmentHosts(out []string, words []string, depth int, rd *hostReading) []string {
	i := skipPrefixes(words)
	if i >= len(words) {
		return out
	}
	name := strings.ToLower(words[i])
	if k := strings.LastIndexByte(name, '/'); k >= 0 {
		name = name[k+1:]
	}
	name = strings.TrimSuffix(name, ".exe")
	if shells[name] {
		// sh -c CMD (also -lc, -ec): the word after it is a command.
		for k := i + 1; k < len(words); k++ {
			w := words[k]
			if len(w) < 2 || w[0] != '-' || strings.HasPrefix(w, "--") {
				break
			}
			if strings.ContainsRune(w[1:], 'c') {
				if k+1 < len(words) {
					return appendShellHosts(out, words[k+1], depth+1, rd)
				}
				break
			}
		}
		return out
	}
	tool, ok := netTools[name]
	if !ok {
		return out
	}
	var operands []string
	words = words[i+1:]
	for j := 0; j < len(words); j++ {
		w := words[j]
		if w == "--" {
			operands = append(operands, words[j+1:]...)
			break
		}
		if w == "" {
			operands = append(operands, w) // an empty quoted argument
			continue
		}
		if len(w) < 2 || w[0] != '-' {
			if tool.digWords && w[0] == '+' {
				continue // dig's +short and the like
			}
			if tool.digWords && w[0] == '@' {
				out = rd.appendHost(out, w[1:]) // the resolver asked
				continue
			}
			operands = append(operands, w)
			continue
		}
		if strings.HasPrefix(w, "--") {
			opt, _, joined := strings.Cut(w[2:], "=")
			if contains(tool.listen, opt) {
				return out
			}
			if !joined && contains(tool.longValue, opt) && j+1 < len(words) {
				j++
			}
			continue
		}
		// A cluster of short options (-sSL, -o file, -ofile): the first
		// letter that takes a value takes the rest of the word, or the
		// next word.
		for k := 1; k < len(w); k++ {
			c := string(w[k])
			if contains(tool.listen, c) {
				return out
			}
			if !strings.Contains(tool.shortValue, c) {
				continue
			}
			val := w[k+1:]
			if val == "" && j+1 < len(words) {
				j++
				val = words[j]
			}
			if strings.Contains(tool.hostValue, c) {
				for _, h := range strings.Split(val, ",") {
					out = rd.appendHost(out, h)
				}
			}
			break
		}
	}
	switch tool.dest {
	case socatAddresses:
		for _, op := range operands {
			out = rd.appendSocatHost(out, op)
		}
	case remoteOperands:
		for k, op := range operands {
			if host, ok := rd.remoteHost(op); ok {
				out = rd.appendHost(out, host)
			} else if tool.bareFirst && k == 0 {
				out = rd.appendHost(out, op)
			}
		}
	case everyOperand:
		for _, op := range operands {
			out = rd.appendHost(out, op)
		}
	default:
		if len(operands) > 0 {
			out = rd.appendHost(out, operands[0])
		}
	}
	return out
}

// skipPrefixes returns the index of the command word: past assignments
// (X=1) and the command prefixes with their options.
func skipPrefixes(words []string) int {
	i := 0
	for i < len(words) {
		w := words[i]
		if eq := strings.IndexByte(w, '='); eq > 0 && isName(w[:eq]) {
			i++
			continue
		}
		valued, ok := commandPrefixes[strings.ToLower(w)]
		if !ok {
			return i
		}
		i++
		timeout := strings.ToLower(w) == "timeout"
		for i < len(words) && len(words[i]) > 1 && words[i][0] == '-' {
			opt := words[i]
			i++
			if len(opt) == 2 && strings.ContainsRune(valued, rune(opt[1])) && i < len(words) {
				i++ // the option's value: sudo -u root
			}
		}
		if timeout && i < len(words) {
			i++ // timeout's duration
		}
	}
	return i
}

// isName reports whether s is a shell variable name.
func isName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// remoteHost returns the host of an scp-like address, [user@]host:path
// (or rsync's host::module), where the host has no '/' before the colon.
//
// Reading expansions, a '/' or ':' inside one ($(cat /etc/h):/tmp) is
// not the address's.
func (rd *hostReading) remoteHost(w string) (string, bool) {
	m := w
	if rd.expand && strings.ContainsAny(w, "$`") {
		m, _ = maskExpansions(w)
	}
	if strings.Contains(m, "://") {
		return "", false // a URL: classifyCommand has it
	}
	c := strings.IndexByte(m, ':')
	if c <= 0 || strings.ContainsRune(m[:c], '/') {
		return "", false
	}
	return w[:c], true
}

// appendSocatHost appends the host of a socat address that connects
// (TCP:host:port, OPENSSL:host:port, UDP-SENDTO:host:port, ...).
func (rd *hostReading) appendSocatHost(out []string, addr string) []string {
	kind, rest, ok := strings.Cut(addr, ":")
	if !ok {
		return out
	}
	switch strings.ToLower(kind) {
	case "tcp", "tcp4", "tcp6", "tcp-connect", "tcp4-connect", "tcp6-connect", "openssl", "openssl-connect", "ssl",
		"udp", "udp4", "udp6", "udp-connect", "udp4-connect", "udp6-connect", "udp-sendto", "udp4-sendto",
		"udp6-sendto", "socks", "socks4", "socks4a", "socks5", "proxy", "proxy-connect":
	default:
		return out
	}
	host, _, _ := strings.Cut(rest, ":")
	host, _, _ = strings.Cut(host, ",")
	return rd.appendHost(out, host)
}

// appendHost appends the host an operand names when it names one: a
// dotted DNS name whose last label is letters, or an IP address, after
// taking off user@, a path and a :port. Anything else (a file name without
// a dot, a variable, a glob, a URL with a scheme) is left out.
func appendHost(out []string, w string) []string {
	if strings.Contains(w, "://") {
		return out
	}
	if k := strings.IndexAny(w, "/?#"); k >= 0 {
		w = w[:k]
	}
	if w == "" || strings.ContainsAny(w, "$*{}\"'=,") || strings.ContainsAny(w, "[]") && !strings.HasPrefix(w, "[") {
		return out
	}
	if at := strings.LastIndexByte(w, '@'); at >= 0 {
		w = w[at+1:]
	}
	if strings.HasPrefix(w, "[") {
		if end := strings.IndexByte(w, ']'); end > 1 && strings.Contains(w[1:end], ":") {
			return append(out, strings.ToLower(w[:end+1]))
		}
		return out
	}
	if k := strings.IndexByte(w, ':'); k >= 0 {
		w = w[:k]
	}
	w = strings.TrimSuffix(strings.ToLower(w), ".")
	if isIPv4(w) || isDottedName(w) {
		return append(out, w)
	}
	return out
}

// isIPv4 reports whether s is a dotted-quad IPv4 address. It is written
// out rather than taken from net/netip: the state machine judges with
// this package, and its dependency tree holds no net package
// (internal/purity).
func isIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 3 {
			return false
		}
		n := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
			n = n*10 + int(c-'0')
		}
		if n > 255 {
			return false
		}
	}
	return true
}

// isDottedName reports whether s is a DNS name of two or more labels
// whose last label is two or more letters.
func isDottedName(s string) bool {
	labels := strings.Split(s, ".")
	if len(labels) < 2 || len(s) > 253 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	tld := labels[len(labels)-1]
	if len(tld) < 2 {
		return false
	}
	for _, c := range tld {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
