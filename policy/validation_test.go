package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/policy"
)

// TestValidationListsEveryProblem: a document with problems in several
// sections, and several in one entry, is refused with every problem, each
// naming its field, under one "policy: invalid" prefix; references to a
// refused surface or lane are not reported as problems of their own; a
// document with one problem keeps the one-problem message.
func TestValidationListsEveryProblem(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string // fields of the problems, in order
	}{
		{"one problem", `{"version":2,"default_ttl":"1m","lanes":{"a":{"surfaces":["nope"]}},"surfaces":[{"id":"s","tools":["x"],"operation":"o","consequence":"local_read"}]}`,
			[]string{`lanes.a.surfaces[0]`}},
		{"every section", `{"version":2,"default_ttl":"1m","unpinned":"maybe",` +
			`"lanes":{"a":{"ttl":"5h","surfaces":["s","nope"],"consequences":["bogus"]},"b":{"surfaces":["bad"]}},` +
			`"workers":{"w1":"zzz"},` +
			`"surfaces":[{"id":"s","tools":["x"],"operation":"o","consequence":"local_read"},{"id":"bad","tools":[],"operation":"","consequence":"teleport"}],` +
			`"deny":[{"id":"d","lanes":["a"],"tools":["x"],"max_amount":3}],` +
			`"shape_rules":[{"id":"r","surfaces":["s"],"in":["sinks"],"match":"a","action":"explode"}],` +
			`"quotas":[{"id":"q","per":"fleet","window":"1m","requests":1}]}`,
			[]string{"unpinned", "surfaces[1].tools", "surfaces[1].operation", "surfaces[1].consequence",
				"lanes.a.ttl", "lanes.a.surfaces[1]", "lanes.a.consequences[0]", "workers.w1", "deny[0].max_amount",
				"shape_rules[0].action", "quotas[0].per"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Parse([]byte(tc.doc))
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("Parse = %v, want ErrInvalid", err)
			}
			if n := strings.Count(err.Error(), "policy: invalid"); n != 1 {
				t.Errorf("the message says %q %d times: %v", "policy: invalid", n, err)
			}
			var lines []string
			var ve *policy.ValidationError
			if errors.As(err, &ve) {
				lines = ve.Lines()
			} else {
				lines = []string{policy.ProblemText(err)}
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%s", len(lines), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, f := range tc.want {
				if !strings.HasPrefix(lines[i], f+": ") {
					t.Errorf("problem %d = %q, want it to name %s", i, lines[i], f)
				}
				if strings.Contains(lines[i], "policy:") {
					t.Errorf("problem %d carries a prefix: %q", i, lines[i])
				}
			}
			if len(tc.want) == 1 && err.Error() != "policy: invalid: "+lines[0] {
				t.Errorf("one problem reads %q", err)
			}
		})
	}
}
