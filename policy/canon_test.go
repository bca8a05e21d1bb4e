package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/policy"
)

// TestCanonicalize: each method's canonical form, and the inputs it
// refuses as missing or ambiguous.
func TestCanonicalize(t *testing.T) {
	ws := policy.Resolution{Workspace: "/work/w1"}
	cases := []struct {
		method, raw string
		res         policy.Resolution
		want        string // Emit; "missing" or "ambiguous" for errors
	}{
		{policy.CanonPath, "/a/b/../c//d/", ws, "path:/a/c/d"},
		{policy.CanonPath, "notes.txt", ws, "path:/work/w1/notes.txt"},
		{policy.CanonPath, "./src/../notes.txt", ws, "path:/work/w1/notes.txt"},
		{policy.CanonPath, "../../etc/passwd", ws, "path:/etc/passwd"},
		{policy.CanonPath, "notes.txt", policy.Resolution{Cwd: "/tmp/x", Workspace: "/work/w1"}, "path:/tmp/x/notes.txt"},
		{policy.CanonPath, "notes.txt", policy.Resolution{Resolved: "/data//real.txt", Workspace: "/work/w1"}, "path:/data/real.txt"},
		{policy.CanonPath, "~/.ssh/id_rsa", ws, "path:~/.ssh/id_rsa"},
		{policy.CanonPath, "~/../../etc", ws, "path:~/etc"},
		{policy.CanonPath, "~", ws, "path:~"},
		{policy.CanonPath, "~root/.ssh", ws, "ambiguous"},
		{policy.CanonPath, "notes.txt", policy.Resolution{}, "ambiguous"},
		{policy.CanonPath, "notes.txt", policy.Resolution{Cwd: "relative"}, "ambiguous"},
		{policy.CanonPath, "a\x00b", ws, "ambiguous"},
		{policy.CanonPath, "notes.txt", policy.Resolution{Resolved: "real.txt"}, "ambiguous"},
		{policy.CanonPath, "", ws, "missing"},
		{policy.CanonPath, "   ", ws, "missing"},
		{policy.CanonURL, "HTTPS://User:pw@Example.COM:443/a/./b/../c?q=1#f", ws, "url:https://example.com/a/c"},
		{policy.CanonURL, "http://example.com", ws, "url:http://example.com/"},
		{policy.CanonURL, "http://example.com:8080/%7euser/%2f%41", ws, "url:http://example.com:8080/~user/%2FA"},
		{policy.CanonURL, "https://example.com./x/", ws, "url:https://example.com/x/"},
		{policy.CanonURL, "https://[::1]:8443/x", ws, "url:https://[::1]:8443/x"},
		{policy.CanonURL, "https://good.example@evil.example/x", ws, "url:https://evil.example/x"},
		{policy.CanonURL, "https://evil.example\\@good.example/", ws, "ambiguous"},
		{policy.CanonURL, "example.com/x", ws, "ambiguous"},
		{policy.CanonURL, "https://exa mple.com/", ws, "ambiguous"},
		{policy.CanonURL, "https://ex%61mple.com/", ws, "ambiguous"},
		{policy.CanonURL, "https://example.com:99999/", ws, "ambiguous"},
		{policy.CanonURL, "https://example.com:8x/", ws, "ambiguous"},
		{policy.CanonURL, "https://example.com/%zz", ws, "ambiguous"},
		{policy.CanonURL, "https:///x", ws, "ambiguous"},
		{policy.CanonURL, "1http://x/", ws, "ambiguous"},
		{policy.CanonEmail, " Bob.Smith@Example.COM ", ws, "email:bob.smith@example.com"},
		{policy.CanonEmail, "Bob <bob@example.com>", ws, "email:bob@example.com"},
		{policy.CanonEmail, "mailto:bob@example.com", ws, "email:bob@example.com"},
		{policy.CanonEmail, "a@example.com, b@example.com", ws, "ambiguous"},
		{policy.CanonEmail, "a@example.com;b@example.com", ws, "ambiguous"},
		{policy.CanonEmail, "a@b@example.com", ws, "ambiguous"},
		{policy.CanonEmail, "example.com", ws, "ambiguous"},
		{policy.CanonEmail, "a@exa_mple..com", ws, "ambiguous"},
		{policy.CanonEmail, "<a@x.com> <b@y.com>", ws, "ambiguous"},
		{policy.CanonShell, "  ls\t -la \\\n /tmp\n", ws, "shell:sha256:"},
		{policy.CanonShell, " \n ", ws, "missing"},
		{policy.CanonRaw, "cus_123", ws, "raw:cus_123"},
		{policy.CanonRaw, strings.Repeat("x", policy.MaxRawTarget+1), ws, "ambiguous"},
		{policy.CanonRaw, "a\nb", ws, "ambiguous"},
		{policy.CanonDigest, "db-password", ws, "digest:"},
		{"teleport", "x", ws, "ambiguous"},
		{policy.CanonPath, "/" + strings.Repeat("a", policy.MaxTargetBytes), ws, "ambiguous"},
	}
	for _, tc := range cases {
		got, err := policy.Canonicalize(tc.method, tc.raw, tc.res)
		switch tc.want {
		case "missing":
			if !errors.Is(err, policy.ErrTargetMissing) {
				t.Errorf("Canonicalize(%s, %q) = %+v, %v; want ErrTargetMissing", tc.method, tc.raw, got, err)
			}
		case "ambiguous":
			if !errors.Is(err, policy.ErrTargetAmbiguous) {
				t.Errorf("Canonicalize(%s, %q) = %+v, %v; want ErrTargetAmbiguous", tc.method, tc.raw, got, err)
			}
		default:
			if err != nil || !strings.HasPrefix(got.Emit, tc.want) || !strings.HasSuffix(tc.want, ":") && got.Emit != tc.want {
				t.Errorf("Canonicalize(%s, %q) = %q, %v; want %q", tc.method, tc.raw, got.Emit, err, tc.want)
			}
		}
	}
	// A shell target's receipt form hides the command; its subject keeps it.
	sh, _ := policy.Canonicalize(policy.CanonShell, "curl -H 'Authorization: Bearer s3cret' x", ws)
	if strings.Contains(sh.Emit, "s3cret") || !strings.Contains(sh.Subject, "s3cret") || len(sh.Emit) != len("shell:sha256:")+64 {
		t.Errorf("shell target %+v", sh)
	}
}

// FuzzCanonicalize: canonicalization never panics, refuses only with its
// two errors, and is idempotent: a canonical value canonicalizes to itself.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{"/a/../b", "x.txt", "~/.ssh/k", "HTTPS://a.b:443/%7e/./x?y", "https://[::1]/", "Bob <B@X.com>",
		"ls  -la\n", "c''url x|sh", "http://a/%2F/..", "a@b", "https://x/a/b/../../../c"} {
		for _, m := range []string{policy.CanonPath, policy.CanonURL, policy.CanonEmail, policy.CanonShell, policy.CanonRaw, policy.CanonDigest} {
			f.Add(m, s, "/cwd")
		}
	}
	f.Fuzz(func(t *testing.T, method, raw, cwd string) {
		res := policy.Resolution{Cwd: cwd, Workspace: "/work/w1"}
		got, err := policy.Canonicalize(method, raw, res)
		if err != nil {
			if !errors.Is(err, policy.ErrTargetMissing) && !errors.Is(err, policy.ErrTargetAmbiguous) {
				t.Fatalf("error %v wraps neither target error", err)
			}
			return
		}
		if !strings.HasPrefix(got.Subject, method+":") || got.Emit == "" {
			t.Fatalf("Canonicalize(%s, %q) = %+v", method, raw, got)
		}
		value := strings.TrimPrefix(got.Subject, method+":")
		if method == policy.CanonDigest || method == policy.CanonPath && strings.HasPrefix(value, "~") {
			return // a digest is not re-canonicalized; ~ paths are home-relative
		}
		again, err := policy.Canonicalize(method, value, res)
		if err != nil {
			t.Fatalf("canonical %q of %q does not canonicalize: %v", value, raw, err)
		}
		if again != got {
			t.Fatalf("not idempotent: %q -> %+v -> %+v", raw, got, again)
		}
	})
}

// TestNormalizeShell and TestScreenText: keying and screening forms.
func TestNormalizeShell(t *testing.T) {
	cases := map[string]string{
		"  ls   -la  ":           "ls -la",
		"a\tb\vc\fd":             "a b c d",
		"make \\\n  test":        "make test",
		"a\nb\r\nc":              "a ; b ; c",
		"\n\nx":                  "; ; x",
		"echo 'a   b'":           "echo 'a b'",
		"":                       "",
		"tr -d '\\r' < f\r\nx":   "tr -d '\\r' < f ; x",
		"a \\\r\n b":             "a b",
		"multi\n\n\nline\n":      "multi ; ; ; line ;",
		"curl${IFS}x|sh":         "curl${IFS}x|sh",
		"echo \"$IFS\" 'q' \\x ": `echo "$IFS" 'q' \x`,
	}
	for in, want := range cases {
		if got := policy.NormalizeShell(in); got != want {
			t.Errorf("NormalizeShell(%q) = %q, want %q", in, got, want)
		}
		if again := policy.NormalizeShell(want); again != want {
			t.Errorf("NormalizeShell not idempotent on %q: %q", want, again)
		}
	}
	screen := map[string]string{
		"c''url x | \"sh\"":   "curl x | sh",
		`c\url x|s\h`:         "curl x|sh",
		"curl${IFS}x|$IFS sh": "curl x| sh",
		"ls  -la":             "ls -la",
	}
	for in, want := range screen {
		if got := policy.ScreenText(in); got != want {
			t.Errorf("ScreenText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzNormalizeShell: normalization is idempotent and never leaves a line
// break, a tab or a doubled or outer blank.
func FuzzNormalizeShell(f *testing.F) {
	for _, s := range []string{"a\\\nb", "a\r\n\tb", "  x  ", "\\\r\n", "a\\\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := policy.NormalizeShell(s)
		if policy.NormalizeShell(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, policy.NormalizeShell(n))
		}
		// Only ASCII blanks separate words in a shell; U+00A0 and friends
		// are ordinary characters and stay.
		if strings.ContainsAny(n, "\r\n\t\v\f") || strings.Contains(n, "  ") || strings.Trim(n, " ") != n {
			t.Fatalf("NormalizeShell(%q) = %q", s, n)
		}
		_ = policy.ScreenText(s)
	})
}
