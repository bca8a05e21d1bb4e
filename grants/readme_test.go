package grants_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
)

// TestReadmeEnvelopeTableMatchesReasons keeps the README's reason table and
// grants.Reasons in step: same codes, same order, same recovery and meaning.
func TestReadmeEnvelopeTableMatchesReasons(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "<!-- reasons:begin")
	end := strings.Index(doc, "<!-- reasons:end -->")
	if start < 0 || end < start {
		t.Fatal("README.md has no reasons:begin/end block")
	}
	var rows []string
	for _, line := range strings.Split(doc[start:end], "\n") {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, line)
		}
	}
	if len(rows) != len(grants.Reasons) {
		t.Fatalf("README lists %d reasons, grants.Reasons has %d", len(rows), len(grants.Reasons))
	}
	for i, ri := range grants.Reasons {
		want := fmt.Sprintf("| `%s` | `%s` | %s |", ri.Reason, ri.Recovery, ri.Meaning)
		if rows[i] != want {
			t.Errorf("row %d:\n got %s\nwant %s", i, rows[i], want)
		}
	}
}
