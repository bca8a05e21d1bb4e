package lanes

import (
	"errors"
	"path"
	"reflect"
	"strings"
	"testing"
)

// TestMatchTool: exact names, "*", globs and classes match as documented,
// with '/' an ordinary character.
func TestMatchTool(t *testing.T) {
	cases := []struct {
		pattern, tool string
		want          bool
	}{
		{"Read", "Read", true},
		{"Read", "read", false},
		{"Read", "ReadFile", false},
		{"*", "anything", true},
		{"*", "", true},
		{"*", "a/b", true},
		{"mcp__github__*", "mcp__github__create_issue", true},
		{"mcp__github__*", "mcp__github__", true},
		{"mcp__github__*", "mcp__gitlab__create_issue", false},
		{"mcp__github__*", "xmcp__github__create_issue", false},
		{"mcp__*", "mcp__evil/tool", true}, // path.Match says false: a deny bypass
		{"mcp__*", "mcp__a/b/c", true},
		{"*__create_*", "mcp__github__create_issue", true},
		{"*__create_*", "mcp__github__delete_issue", false},
		{"Web?etch", "WebFetch", true},
		{"Web?etch", "Web/etch", true},
		{"Web?etch", "Webetch", false},
		{"?", "é", true}, // one rune, two bytes
		{"[RW]rite", "Write", true},
		{"[RW]rite", "Bite", false},
		{"[^RW]rite", "Grite", true},
		{"[^RW]rite", "Write", false},
		{"tool[0-9]", "tool7", true},
		{"tool[0-9]", "toolx", false},
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "abcabd", false},
		{"a*c", "abcbc", true}, // the last chunk must end the name
		{"[", "[", true},       // malformed pattern: only the identical name
		{"[", "x", false},
		{"a[", "ab", false},
		{"", "", true},
		{"", "Read", false},
	}
	for _, tc := range cases {
		if got := MatchTool(tc.pattern, tc.tool); got != tc.want {
			t.Errorf("MatchTool(%q, %q) = %v, want %v", tc.pattern, tc.tool, got, tc.want)
		}
	}
}

// TestValidPattern: ValidPattern accepts exactly what path.Match accepts.
func TestValidPattern(t *testing.T) {
	for _, p := range []string{"*", "Read", "mcp__*", "[a-z]*", "[^a]", `\*`, "a?b", "**"} {
		if err := ValidPattern(p); err != nil {
			t.Errorf("ValidPattern(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"[", "a[", "[]", "[a-", `a\`, "*[", "[z-"} {
		if err := ValidPattern(p); !errors.Is(err, ErrBadPattern) {
			t.Errorf("ValidPattern(%q) = %v, want ErrBadPattern", p, err)
		}
	}
}

// TestAllowed: a tool is allowed when any pattern in the list matches it;
// an empty list allows nothing.
func TestAllowed(t *testing.T) {
	allow := []string{"Read", "Grep", "mcp__github__get_*"}
	cases := []struct {
		allow []string
		tool  string
		want  bool
	}{
		{allow, "Read", true},
		{allow, "mcp__github__get_issue", true},
		{allow, "mcp__github__create_issue", false},
		{allow, "Bash", false},
		{nil, "Read", false},
		{[]string{}, "", false},
		{[]string{"*"}, "Bash", true},
	}
	for _, tc := range cases {
		if got := Allowed(tc.allow, tc.tool); got != tc.want {
			t.Errorf("Allowed(%v, %q) = %v, want %v", tc.allow, tc.tool, got, tc.want)
		}
	}
}

// TestAttenuate: a child's scope may only narrow: subsets, concrete tools
// under a parent glob and exact repeats are accepted; anything else is
// ErrWiden.
func TestAttenuate(t *testing.T) {
	parent := []string{"Read", "Grep", "mcp__github__*"}
	cases := []struct {
		name   string
		parent []string
		child  []string
		err    error
	}{
		{"empty child", parent, nil, nil},
		{"subset", parent, []string{"Read"}, nil},
		{"same list", parent, parent, nil},
		{"concrete tool under parent glob", parent, []string{"mcp__github__create_issue"}, nil},
		{"same glob as parent", parent, []string{"mcp__github__*"}, nil},
		{"anything under star", []string{"*"}, []string{"Bash", "mcp__*", "*"}, nil},
		{"tool outside parent", parent, []string{"Read", "Bash"}, ErrWiden},
		{"star under concrete parent", parent, []string{"*"}, ErrWiden},
		{"glob under concrete parent", []string{"Read"}, []string{"Rea?"}, ErrWiden},
		{"glob matching only the parent's tool", []string{"Read"}, []string{"Read*"}, ErrWiden},
		{"class under concrete parent", []string{"Read"}, []string{"[R]ead"}, ErrWiden},
		{"narrower-looking glob under glob", parent, []string{"mcp__github__get_*"}, ErrWiden},
		{"wider glob under glob", parent, []string{"mcp__*"}, ErrWiden},
		{"empty parent", nil, []string{"Read"}, ErrWiden},
		{"malformed child pattern", []string{"*"}, []string{"["}, ErrBadPattern},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.child...)
			got, err := Attenuate(tc.parent, in)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Attenuate(%v, %v) error = %v, want %v", tc.parent, tc.child, err, tc.err)
			}
			if err != nil {
				if got != nil {
					t.Errorf("a refused attenuation returned %v", got)
				}
				return
			}
			if len(got) != len(tc.child) || (len(got) > 0 && !reflect.DeepEqual(got, tc.child)) {
				t.Fatalf("Attenuate returned %v, want %v", got, tc.child)
			}
			if len(got) > 0 {
				got[0] = "mutated"
				if in[0] == "mutated" {
					t.Errorf("Attenuate returned the caller's slice, not a copy")
				}
			}
			// Every tool the child reaches, its parent reaches.
			for _, c := range tc.child {
				if !strings.ContainsAny(c, `*?[\`) && !Allowed(tc.parent, c) {
					t.Errorf("accepted child tool %q is not allowed to the parent", c)
				}
			}
		})
	}
}

func TestBuiltin(t *testing.T) {
	want := []string{Coordinator, Isolated, Specialist}
	if !reflect.DeepEqual(Builtin, want) {
		t.Fatalf("Builtin = %v", Builtin)
	}
}

// FuzzMatchTool: MatchTool agrees with path.Match for valid patterns and
// names without '/'; with '/', it matches at least what path.Match matches;
// malformed patterns match only the identical name; nothing panics.
func FuzzMatchTool(f *testing.F) {
	for _, s := range [][2]string{
		{"mcp__*", "mcp__a/b"}, {"[^a-c]?*x", "dzzx"}, {`\[*`, "[a"}, {"*a*b*", "xxaybz"},
		{"[é-ü]", "ö"}, {"[", "["}, {"a*b*c", "abcabd"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, tool string) {
		got := MatchTool(pattern, tool)
		want, err := path.Match(pattern, tool)
		switch {
		case err != nil:
			if got != (pattern == tool) {
				t.Fatalf("malformed %q vs %q: MatchTool = %v", pattern, tool, got)
			}
		case pattern == "*" || pattern == tool:
			if !got {
				t.Fatalf("MatchTool(%q, %q) = false", pattern, tool)
			}
		case !strings.Contains(tool, "/"):
			if got != want {
				t.Fatalf("MatchTool(%q, %q) = %v, path.Match = %v", pattern, tool, got, want)
			}
		default:
			if want && !got {
				t.Fatalf("MatchTool(%q, %q) = false but path.Match matches", pattern, tool)
			}
			// With '/' replaced by a character the pattern does not
			// mention specially, the answers must agree again.
			if !strings.ContainsAny(pattern, "/\x01") && !strings.Contains(tool, "\x01") {
				w2, _ := path.Match(pattern, strings.ReplaceAll(tool, "/", "\x01"))
				if got != w2 {
					t.Fatalf("MatchTool(%q, %q) = %v, path.Match with '/' hidden = %v", pattern, tool, got, w2)
				}
			}
		}
	})
}

// FuzzGlob: a compiled Glob matches exactly what MatchTool matches, for
// every valid pattern.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"mcp__*", "mcp__a/b"}, {"*__send", "mcp__x__send"}, {"Read", "Read"}, {"*", ""},
		{"a*b*c", "abcabd"}, {`a\*`, "a*"}, {"[RW]*", "Write"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		g, err := CompileGlob(pattern)
		if err != nil {
			if ValidPattern(pattern) == nil {
				t.Fatalf("CompileGlob(%q) refused a valid pattern: %v", pattern, err)
			}
			return
		}
		if got, want := g.Match(name), MatchTool(pattern, name); got != want {
			t.Fatalf("Glob(%q).Match(%q) = %v, MatchTool = %v", pattern, name, got, want)
		}
		if g.String() != pattern {
			t.Fatalf("String() = %q", g.String())
		}
	})
}

// TestGlob: the fast shapes agree with MatchTool.
func TestGlob(t *testing.T) {
	cases := []struct {
		pattern, name string
		want, literal bool
	}{
		{"Read", "Read", true, true},
		{"Read", "ReadX", false, true},
		{"*", "x/y", true, false},
		{"mcp__*", "mcp__a/b", true, false},
		{"mcp__*", "mcp_", false, false},
		{"*__send", "mcp__x__send", true, false},
		{"*__send", "mcp__x__sendx", false, false},
		{"*/.ssh/*", "/home/u/.ssh/id_rsa", true, false},
		{"*/.ssh/*", "/.ssh/", true, false},
		{"*/.ssh/*", "/home/u/.sshx/k", false, false},
		{"a?c", "abc", true, false},
		{`a\*`, "a*", true, false},
		{`a\*`, "ab", false, false},
	}
	for _, tc := range cases {
		g, err := CompileGlob(tc.pattern)
		if err != nil {
			t.Fatalf("CompileGlob(%q): %v", tc.pattern, err)
		}
		if got := g.Match(tc.name); got != tc.want || got != MatchTool(tc.pattern, tc.name) {
			t.Errorf("Glob(%q).Match(%q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
		if g.Literal() != tc.literal {
			t.Errorf("Glob(%q).Literal() = %v", tc.pattern, g.Literal())
		}
	}
	if _, err := CompileGlob("["); !errors.Is(err, ErrBadPattern) {
		t.Errorf("CompileGlob([) = %v", err)
	}
}
