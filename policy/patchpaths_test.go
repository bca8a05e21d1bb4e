package policy

import (
	"slices"
	"strings"
	"testing"
)

// TestPatchPaths: the files a patch names, each once, in order, from
// every header kind, with blanks and a carriage return trimmed; text
// without headers, a header with no path and a line that only mentions a
// header name none.
func TestPatchPaths(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		want        []string
	}{
		{"every header", "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Update File: src/b.go\n*** Move to: src/c.go\n@@\n-a\n+b\n*** Delete File: /tmp/d\n*** End Patch\n",
			[]string{"a.txt", "src/b.go", "src/c.go", "/tmp/d"}},
		{"blanks, CRLF and case", "  *** update file:  ~/.zshrc \r\n\t*** ADD FILE: x y.md\r\n", []string{"~/.zshrc", "x y.md"}},
		{"each once", "*** Update File: a\n*** Update File: a\n", []string{"a"}},
		{"no headers", "package main\n\nfunc main() {}\n", nil},
		{"a header with no path", "*** Add File: \n*** Update File:\n", nil},
		{"a mention, not a header", "+see *** Add File: x in the docs\n+*** Add File: y\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := patchPaths(tc.patch); !slices.Equal(got, tc.want) {
				t.Errorf("patchPaths = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzPatchPaths: patchPaths never panics, and every path it returns is
// non-empty, trimmed, one line, distinct and written in the input.
func FuzzPatchPaths(f *testing.F) {
	f.Add("*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n")
	f.Add("*** Move to: \r\n*** delete file: /etc/hosts\r\n")
	f.Add("***")
	f.Fuzz(func(t *testing.T, raw string) {
		got := patchPaths(raw)
		for i, p := range got {
			if p == "" || p != strings.TrimSpace(p) || strings.ContainsAny(p, "\n") || !strings.Contains(raw, p) || slices.Contains(got[:i], p) {
				t.Fatalf("patchPaths(%q) returned %q", raw, p)
			}
		}
	})
}
