package policy_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/policy"
)

// TestDiff: field-level changes in a fixed order; list entries with ids
// are matched by id.
func TestDiff(t *testing.T) {
	a, err := policy.Parse([]byte(baseV2))
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.Parse([]byte(strings.NewReplacer(
		`"ttl":"30s"`, `"ttl":"45s"`,
		`"allow":[{"id":"al","tools":["Read"],"targets":["path:/tmp/*"],"max_amount":5}]`,
		`"allow":[{"id":"new","tools":["Bash"]},{"id":"al","tools":["Read"],"targets":["path:/tmp/*"],"max_amount":6}]`,
		`,"ledger":{"window":"5m","scope":"fleet"}`, ``,
	).Replace(baseV2)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range policy.Diff(a, b) {
		got = append(got, c.String())
	}
	want := []string{
		`~ allow[id=al].max_amount: 5 -> 6`,
		`~ allow[id=al].position: 0 -> 1`,
		`+ allow[id=new]: {"id":"new","tools":["Bash"]}`,
		`~ lanes.a.ttl: "30s" -> "45s"`,
		`- ledger: {"scope":"fleet","window":"5m0s"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Diff =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := policy.Diff(a, a); len(d) != 0 {
		t.Errorf("Diff(a, a) = %v", d)
	}
	if d := policy.Diff(policy.LegacyDefault(), a); len(d) == 0 || d[len(d)-1].Field != "workspace" {
		t.Errorf("Diff(v1, v2) = %v", d)
	}
}

// TestDiffReadable: diff lines show '<', '>' and '&' as they are written
// in the document, not as \u003c escapes.
func TestDiffReadable(t *testing.T) {
	doc := func(tool string) *policy.Policy {
		t.Helper()
		p, err := policy.Parse([]byte(`{"version":1,"default_ttl":"1m","lanes":{"x":{"tools":["` + tool + `"]}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	d := policy.Diff(doc("a>b"), doc("a<b&c"))
	if len(d) != 1 || d[0].String() != `~ lanes.x.tools: ["a>b"] -> ["a<b&c"]` {
		t.Fatalf("Diff = %q", d)
	}
}
