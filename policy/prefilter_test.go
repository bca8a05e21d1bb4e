package policy

import (
	"regexp"
	"testing"
)

// TestPrefilter: the literals derived from an expression, and that texts
// without them are skipped.
func TestPrefilter(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`(?i)\bcurl\b[^|]*\|\s*sh`, []string{"CURL"}},
		{`(curl|wget)x`, []string{"CURL", "WGET"}},
		{`a?b`, []string{"B"}},
		{`x*`, nil},
		{`(foo|.)`, nil},
		{`(ab)+cde`, []string{"CDE"}},
		{`\bsudo\b`, []string{"SUDO"}},
		{`(`, nil},
	}
	for _, tc := range cases {
		got := newPrefilter(tc.expr)
		if len(got) != len(tc.want) {
			t.Errorf("newPrefilter(%q) = %q, want %q", tc.expr, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("newPrefilter(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		}
	}
	p := newPrefilter(`(?i)\bsudo\b`)
	for text, want := range map[string]bool{"SUDO ls": true, "ſudo": true, "su do": false} {
		if got := p.mayMatch(fold(text)); got != want {
			t.Errorf("mayMatch(%q) = %v", text, got)
		}
	}
}

// FuzzPrefilter: the prefilter is sound: whenever an expression matches a
// text, its prefilter admits the text.
func FuzzPrefilter(f *testing.F) {
	for _, s := range [][2]string{
		{`(?i)\bcurl\b[^|]*\|\s*sh`, "CURL x | SH"}, {`(?i)k`, "\u212a"}, {`(?i)s`, "ſ"},
		{`(a|b)+c`, "abc"}, {`(?i)(kworker|kthreadd)`, "KTHREADD"}, {`x{2,}y`, "xxy"},
		{`(?i)straße`, "STRASSE"}, {`[a-c]d`, "bd"}, {`(?i)ǅ`, "ǆ"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		if re.MatchString(text) && !newPrefilter(expr).mayMatch(fold(text)) {
			t.Fatalf("%q matches %q but its prefilter %q rejects it", expr, text, newPrefilter(expr))
		}
	})
}

// TestRecommendedRulesPrefiltered: every shape rule of the recommended
// policy has a prefilter, so a call that names none of a rule's literals
// never runs the rule's expression (an unfiltered rule cost the issuer
// 20-25 us per 256-byte shell command on every replica).
func TestRecommendedRulesPrefiltered(t *testing.T) {
	q, err := Parse(Recommended().Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if len(q.c.shape) == 0 {
		t.Fatal("the recommended policy compiled no shape rules")
	}
	for _, sh := range q.c.shape {
		if len(sh.pre) == 0 {
			t.Errorf("shape rule %s has no prefilter: its expression runs on every call", sh.id)
		}
	}
}

// TestMinimal: repeated literals and literals containing another go; the
// order of the rest stays.
func TestMinimal(t *testing.T) {
	cases := []struct{ in, want []string }{
		{[]string{"A", "B"}, []string{"A", "B"}},
		{[]string{".SSH/", ".SSH", ".AWS"}, []string{".SSH", ".AWS"}},
		{[]string{"X", "X", "Y", "X"}, []string{"X", "Y"}},
		{[]string{"CURL", "WGET", "URL"}, []string{"WGET", "URL"}},
	}
	for _, tc := range cases {
		got := minimal(tc.in)
		if len(got) != len(tc.want) {
			t.Errorf("minimal(%q) = %q, want %q", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("minimal(%q) = %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}

// FuzzNormalizeShellFastPath: NormalizeShell's shortcut for text already
// in normal form gives exactly what the full normalization gives.
func FuzzNormalizeShellFastPath(f *testing.F) {
	for _, s := range []string{"echo a b", " a", "a ", "a  b", "a\tb", "a\\\nb", "", "x", "a ; b", "\u00a0a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := NormalizeShell(s), normalizeShell(s); got != want {
			t.Fatalf("NormalizeShell(%q) = %q, the full normalization %q", s, got, want)
		}
	})
}
