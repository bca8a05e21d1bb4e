package policy

import (
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/events"
)

// Canonicalization methods of a surface's target.
const (
	CanonPath   = "path"   // clean absolute path; relative paths resolve against cwd or the lane's workspace
	CanonURL    = "url"    // scheme://host[:port]/path: origin and normalized path, no userinfo, query or fragment
	CanonEmail  = "email"  // one address, lower-cased
	CanonShell  = "shell"  // the normalized command; receipts carry its SHA-256
	CanonRaw    = "raw"    // the value as given (at most MaxRawTarget bytes)
	CanonDigest = "digest" // the value's SHA-256 (for opaque or sensitive ids)
)

var canonMethods = []string{CanonPath, CanonURL, CanonEmail, CanonShell, CanonRaw, CanonDigest}

// Limits on a target value.
const (
	MaxTargetBytes = 4096
	MaxRawTarget   = 1024
)

// Resolution is the context a relative path target resolves in: the call's
// working directory (absolute), the path the worker's resolver reported
// for the target (realpath, symlinks followed; absolute), and the lane's
// workspace root. Cwd and Resolved come with the request; the grant binds
// them, and a spend that reports different ones is checked for drift.
type Resolution struct {
	Cwd       string
	Resolved  string
	Workspace string
}

// CanonTarget is a canonicalized target.
//
// Subject is what target patterns match ("path:/work/a.txt",
// "url:https://example.com/x", "email:bob@example.com",
// "shell:git push", "raw:...", "digest:<hex>"). Emit is what receipts,
// grants and the drift check carry: the Subject, except for shell targets,
// whose command text is content and is carried as "shell:sha256:<hex>".
// Path, Host and Domain are the parts boundary classification reads.
type CanonTarget struct {
	Subject string
	Emit    string
	Path    string // CanonPath: the clean path ("~/..." when home-relative)
	Host    string // CanonURL: the host, lower-cased
	URLPath string // CanonURL: the normalized path
	Domain  string // CanonEmail: the domain
}

// Canonicalize canonicalizes a raw target value by method. Errors wrap
// ErrTargetMissing (empty value) or ErrTargetAmbiguous.
func Canonicalize(method, raw string, res Resolution) (CanonTarget, error) {
	if strings.TrimSpace(raw) == "" {
		return CanonTarget{}, fmt.Errorf("%w: empty value", ErrTargetMissing)
	}
	if len(raw) > MaxTargetBytes {
		return CanonTarget{}, fmt.Errorf("%w: longer than %d bytes", ErrTargetAmbiguous, MaxTargetBytes)
	}
	var t CanonTarget
	switch method {
	case CanonPath:
		p, err := canonPath(raw, res)
		if err != nil {
			return t, err
		}
		t.Path, t.Subject = p, "path:"+p
	case CanonURL:
		scheme, host, p, err := canonURL(raw)
		if err != nil {
			return t, err
		}
		t.Host, t.URLPath, t.Subject = host, p, "url:"+scheme+"://"+host+p
	case CanonEmail:
		addr, domain, err := canonEmail(raw)
		if err != nil {
			return t, err
		}
		t.Domain, t.Subject = domain, "email:"+addr
	case CanonShell:
		n := NormalizeShell(raw)
		if n == "" {
			return t, fmt.Errorf("%w: empty command", ErrTargetMissing)
		}
		sum := events.Sum([]byte(n))
		t.Subject, t.Emit = "shell:"+n, "shell:sha256:"+hex.EncodeToString(sum[:])
		return t, nil
	case CanonRaw:
		if len(raw) > MaxRawTarget {
			return t, fmt.Errorf("%w: a raw target is at most %d bytes", ErrTargetAmbiguous, MaxRawTarget)
		}
		if hasControl(raw) {
			return t, fmt.Errorf("%w: control characters in the value", ErrTargetAmbiguous)
		}
		t.Subject = "raw:" + raw
	case CanonDigest:
		sum := events.Sum([]byte(raw))
		t.Subject = "digest:" + hex.EncodeToString(sum[:])
	default:
		return t, fmt.Errorf("%w: unknown canonicalization %q", ErrTargetAmbiguous, method)
	}
	t.Emit = t.Subject
	return t, nil
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// canonPath returns the clean absolute path of raw in res. A path starting
// with "~/" stays home-relative ("~/.ssh/id_rsa"): the issuer does not
// know the worker's home, and classification treats it as outside every
// workspace.
func canonPath(raw string, res Resolution) (string, error) {
	if strings.ContainsRune(raw, 0) || hasControl(raw) {
		return "", fmt.Errorf("%w: control characters in the path", ErrTargetAmbiguous)
	}
	if res.Resolved != "" {
		if !strings.HasPrefix(res.Resolved, "/") || hasControl(res.Resolved) {
			return "", fmt.Errorf("%w: the resolved path %q is not absolute", ErrTargetAmbiguous, res.Resolved)
		}
		return path.Clean(res.Resolved), nil
	}
	switch {
	case raw == "~" || strings.HasPrefix(raw, "~/"):
		rest := path.Clean("/" + strings.TrimPrefix(raw, "~"))
		if rest == "/" {
			return "~", nil
		}
		return "~" + rest, nil
	case strings.HasPrefix(raw, "~"):
		return "", fmt.Errorf("%w: %q names another user's home", ErrTargetAmbiguous, raw)
	case strings.HasPrefix(raw, "/"):
		return path.Clean(raw), nil
	}
	base := res.Cwd
	if base == "" {
		base = res.Workspace
	}
	if !strings.HasPrefix(base, "/") || hasControl(base) {
		return "", fmt.Errorf("%w: relative path %q without an absolute working directory or workspace", ErrTargetAmbiguous, raw)
	}
	return path.Clean(base + "/" + raw), nil
}

// within reports whether the clean path p is root or below it.
func within(p, root string) bool {
	return p == root || root == "/" && strings.HasPrefix(p, "/") || strings.HasPrefix(p, root) && len(p) > len(root) && p[len(root)] == '/'
}

// defaultPorts are dropped from canonical URLs.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443", "ftp": "21"}

// canonURL splits and normalizes an absolute URL without net/url (the
// state machine's import closure excludes net/...). Userinfo, query and
// fragment are dropped; the scheme and host are lower-cased; a default
// port is dropped; percent-encodings of unreserved characters are decoded,
// the others upper-cased; dot segments are removed; an empty path is "/".
// Anything two parsers could read differently (backslashes, spaces,
// control characters, percent-encoded hosts, a bad port) is ambiguous.
func canonURL(raw string) (scheme, host, p string, err error) {
	amb := func(why string) error { return fmt.Errorf("%w: url: %s", ErrTargetAmbiguous, why) }
	s := strings.TrimSpace(raw)
	if strings.ContainsAny(s, " \\\t\r\n") || hasControl(s) {
		return "", "", "", amb("spaces, backslashes or control characters")
	}
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", "", "", amb("no scheme:// (give an absolute URL)")
	}
	scheme = strings.ToLower(s[:i])
	for j, c := range scheme {
		if !(c >= 'a' && c <= 'z' || j > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", "", "", amb("bad scheme")
		}
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	host, err = canonHost(authority, scheme)
	if err != nil {
		return "", "", "", err
	}
	if q := strings.IndexAny(tail, "?#"); q >= 0 {
		tail = tail[:q]
	}
	p, err = normalizeURLPath(tail)
	if err != nil {
		return "", "", "", err
	}
	return scheme, host, p, nil
}

// canonHost normalizes host[:port].
func canonHost(authority, scheme string) (string, error) {
	amb := func(why string) error { return fmt.Errorf("%w: url host: %s", ErrTargetAmbiguous, why) }
	h, port := authority, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", amb("unclosed [")
		}
		h, port = strings.ToLower(h[:end+1]), h[end+1:]
		for _, c := range h[1 : len(h)-1] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == ':' || c == '.') {
				return "", amb("bad IPv6 literal")
			}
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return "", amb("text after ]")
		}
		port = strings.TrimPrefix(port, ":")
	} else {
		if c := strings.LastIndexByte(h, ':'); c >= 0 {
			h, port = h[:c], h[c+1:]
		}
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		if h == "" {
			return "", amb("empty host")
		}
		for _, label := range strings.Split(h, ".") {
			if label == "" {
				return "", amb("empty label")
			}
			for _, c := range label {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
					return "", amb(fmt.Sprintf("character %q in the host", c))
				}
			}
		}
	}
	if port != "" {
		if len(port) > 5 {
			return "", amb("bad port")
		}
		for _, c := range port {
			if c < '0' || c > '9' {
				return "", amb("bad port")
			}
		}
		if n, err := strconv.Atoi(port); err != nil || n > 65535 {
			return "", amb("bad port")
		}
		port = strings.TrimLeft(port, "0")
		if port == "" {
			port = "0"
		}
		if defaultPorts[scheme] == port {
			port = ""
		}
	}
	if port != "" {
		return h + ":" + port, nil
	}
	return h, nil
}

func isUnreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// normalizeURLPath normalizes percent-encodings and removes dot segments.
func normalizeURLPath(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(p) {
			return "", fmt.Errorf("%w: url path: truncated %%-escape", ErrTargetAmbiguous)
		}
		hi, ok1 := unhex(p[i+1])
		lo, ok2 := unhex(p[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: url path: bad %%-escape", ErrTargetAmbiguous)
		}
		if v := hi<<4 | lo; isUnreserved(v) {
			b.WriteByte(v)
		} else {
			b.WriteString("%" + strings.ToUpper(p[i+1:i+3]))
		}
		i += 2
	}
	s := b.String()
	if s == "" {
		return "/", nil
	}
	// Remove dot segments (RFC 3986 5.2.4) and keep a trailing slash.
	segs := strings.Split(s, "/")
	out := make([]string, 0, len(segs))
	for i, seg := range segs {
		last := i == len(segs)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r, nil
}

// canonEmail returns one lower-cased address and its domain. A display
// name form ("Bob <bob@example.com>") is reduced to the address; a list of
// recipients is ambiguous (one grant binds one destination).
func canonEmail(raw string) (addr, domain string, err error) {
	amb := func(why string) error { return fmt.Errorf("%w: email: %s", ErrTargetAmbiguous, why) }
	s := strings.TrimSpace(raw)
	if lt := strings.IndexByte(s, '<'); lt >= 0 {
		gt := strings.IndexByte(s, '>')
		if gt < lt || strings.Count(s, "<") != 1 || strings.Count(s, ">") != 1 || strings.TrimSpace(s[gt+1:]) != "" {
			return "", "", amb("bad <address> form")
		}
		s = strings.TrimSpace(s[lt+1 : gt])
	}
	s = strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(s, "mailto:"), "MAILTO:"))
	if strings.ContainsAny(s, " ,;\"()[]\\<>") || hasControl(s) {
		return "", "", amb("more than one address, or characters an address cannot carry unquoted")
	}
	local, dom, ok := strings.Cut(s, "@")
	if !ok || local == "" || dom == "" || strings.Contains(dom, "@") {
		return "", "", amb("want exactly one local@domain")
	}
	dom = strings.TrimSuffix(dom, ".")
	for _, label := range strings.Split(dom, ".") {
		if label == "" {
			return "", "", amb("empty domain label")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", "", amb(fmt.Sprintf("character %q in the domain", c))
			}
		}
	}
	return local + "@" + dom, dom, nil
}
