package policy

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/lanes"
)

const baseDoc = `{"version":1,"default_ttl":"1m","lanes":{"isolated":{"tools":["Read","Grep"],"deny":["Grep"],"ttl":"30s"},"specialist":{"tools":["*"]}},"workers":{"w1":"isolated"}}`

// edit returns baseDoc with the first occurrence of old replaced by new.
func edit(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(baseDoc, old) {
		t.Fatalf("baseDoc has no %q", old)
	}
	return strings.Replace(baseDoc, old, new, 1)
}

// TestParseValid: a document in any formatting parses to the policy it
// describes.
func TestParseValid(t *testing.T) {
	want := &Policy{
		Version: 1, DefaultTTL: Duration(time.Minute),
		Lanes: map[string]Lane{
			"isolated":   {Tools: []string{"Read", "Grep"}, Deny: []string{"Grep"}, TTL: Duration(30 * time.Second)},
			"specialist": {Tools: []string{"*"}},
		},
		Workers: map[string]string{"w1": "isolated"},
	}
	reformatted := "\n{ \"workers\" : {\"w1\":\"isolated\"},\n \"lanes\": {\"specialist\":{\"tools\":[\"*\"]},\"isolated\":{\"ttl\":\"30000ms\",\"deny\":[\"Grep\"],\"tools\":[\"Read\",\"Grep\"]}},\n\t\"default_ttl\":\"60s\", \"version\": 1 }\n"
	for _, doc := range []string{baseDoc, reformatted} {
		p, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%s): %v", doc, err)
		}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("Parse(%s) =\n %+v\nwant\n %+v", doc, p, want)
		}
	}
}

// TestParseInvalid: each invalid document is refused with ErrInvalid and an
// error naming the offending field.
func TestParseInvalid(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		field string // must appear in the error
	}{
		{"unsupported version", edit(t, `"version":1`, `"version":3`), "version: got 3"},
		{"version 2 sections in a version 1 document", edit(t, `"version":1`, `"version":1,"surfaces":[]`), "surfaces: unknown field"},
		{"version 1 lane fields in a version 2 document", edit(t, `"version":1`, `"version":2`), "lanes.isolated.tools: unknown field"},
		{"missing version", edit(t, `"version":1,`, ``), "version: got 0"},
		{"version as string", edit(t, `"version":1`, `"version":"1"`), "version: want an integer"},
		{"version as float", edit(t, `"version":1`, `"version":1.0`), "version: want an integer"},
		{"version null", edit(t, `"version":1`, `"version":null`), "version: want an integer"},
		{"missing default_ttl", edit(t, `"default_ttl":"1m",`, ``), "default_ttl: 0s is outside"},
		{"default_ttl too short", edit(t, `"default_ttl":"1m"`, `"default_ttl":"999ms"`), "default_ttl: 999ms is outside"},
		{"default_ttl too long", edit(t, `"default_ttl":"1m"`, `"default_ttl":"61m"`), "default_ttl: 1h1m0s is outside"},
		{"default_ttl negative", edit(t, `"default_ttl":"1m"`, `"default_ttl":"-1m"`), "default_ttl: -1m0s is outside"},
		{"default_ttl as number", edit(t, `"default_ttl":"1m"`, `"default_ttl":60`), "default_ttl: want a duration string"},
		{"default_ttl unparsable", edit(t, `"default_ttl":"1m"`, `"default_ttl":"soon"`), `default_ttl: time: invalid duration "soon"`},
		{"no lanes", `{"version":1,"default_ttl":"1m","lanes":{}}`, "lanes: at least one lane"},
		{"lanes null", `{"version":1,"default_ttl":"1m","lanes":null}`, "lanes: at least one lane"},
		{"lanes missing", `{"version":1,"default_ttl":"1m"}`, "lanes: at least one lane"},
		{"lane name with a space", edit(t, `"specialist":`, `"spec ialist":`), "lanes.spec ialist: character ' ' not allowed"},
		{"lane name with a slash", edit(t, `"specialist":`, `"a/b":`), "lanes.a/b: character '/' not allowed"},
		{"lane name too long", edit(t, `"specialist":`, `"`+strings.Repeat("x", 65)+`":`), "lanes." + strings.Repeat("x", 65) + ": must be 1-64"},
		{"empty lane name", edit(t, `"specialist":`, `"":`), "lanes.: must be 1-64"},
		{"lane ttl too short", edit(t, `"ttl":"30s"`, `"ttl":"500ms"`), "lanes.isolated.ttl: 500ms is outside"},
		{"lane ttl too long", edit(t, `"ttl":"30s"`, `"ttl":"2h"`), "lanes.isolated.ttl: 2h0m0s is outside"},
		{"lane ttl negative", edit(t, `"ttl":"30s"`, `"ttl":"-30s"`), "lanes.isolated.ttl: -30s is outside"},
		{"lane ttl null", edit(t, `"ttl":"30s"`, `"ttl":null`), "lanes.isolated.ttl: want a duration string"},
		{"empty tool pattern", edit(t, `["Read","Grep"]`, `["Read",""]`), "lanes.isolated.tools[1]: tool pattern is empty"},
		{"malformed tool pattern", edit(t, `["Read","Grep"]`, `["Read","mcp__[x"]`), "lanes.isolated.tools[1]: lanes: bad tool pattern"},
		{"malformed deny pattern", edit(t, `"deny":["Grep"]`, `"deny":["["]`), "lanes.isolated.deny[0]: lanes: bad tool pattern"},
		{"empty deny pattern", edit(t, `"deny":["Grep"]`, `"deny":[""]`), "lanes.isolated.deny[0]: tool pattern is empty"},
		{"tools not a list", edit(t, `["Read","Grep"]`, `"Read"`), `lanes.isolated.tools: want an array, got "Read"`},
		{"tool not a string", edit(t, `["Read","Grep"]`, `["Read",7]`), "lanes.isolated.tools[1]: want a string, got 7"},
		{"nested tool list", edit(t, `["Read","Grep"]`, `[["Read"]]`), "lanes.isolated.tools[0]: want a string, got ["},
		{"lane null", edit(t, `{"tools":["*"]}`, `null`), "lanes.specialist: want an object, got null"},
		{"lane as list", edit(t, `{"tools":["*"]}`, `[]`), "lanes.specialist: want an object, got ["},
		{"unknown top-level field", edit(t, `"version":1`, `"version":1,"lane":{}`), "lane: unknown field"},
		{"unknown lane field", edit(t, `"tools":["*"]`, `"tools":["*"],"tool":["Bash"]`), "lanes.specialist.tool: unknown field"},
		{"field name in the wrong case", edit(t, `"version":1`, `"Version":1`), "Version: unknown field"},
		{"lane field in the wrong case", edit(t, `"ttl":"30s"`, `"TTL":"30s"`), "lanes.isolated.TTL: unknown field"},
		{"duplicate field", edit(t, `"version":1`, `"version":1,"version":1`), "version: duplicate key"},
		{"duplicate lane", edit(t, `"specialist":{"tools":["*"]}`, `"specialist":{"tools":["*"]},"specialist":{"tools":[]}`), "lanes.specialist: duplicate key"},
		{"duplicate lane field", edit(t, `"tools":["*"]`, `"tools":["*"],"tools":["Read"]`), "lanes.specialist.tools: duplicate key"},
		{"duplicate worker", edit(t, `{"w1":"isolated"}`, `{"w1":"isolated","w1":"specialist"}`), "workers.w1: duplicate key"},
		{"worker in undeclared lane", edit(t, `"w1":"isolated"`, `"w1":"ops"`), `workers.w1: lane "ops" is not declared`},
		{"worker with empty lane", edit(t, `"w1":"isolated"`, `"w1":""`), `workers.w1: lane "" is not declared`},
		{"worker id with a slash", edit(t, `"w1":`, `"w/1":`), "workers.w/1: character '/' not allowed"},
		{"worker lane not a string", edit(t, `"w1":"isolated"`, `"w1":1`), "workers.w1: want a string, got 1"},
		{"trailing close brace", baseDoc + "}", "trailing data"},
		{"trailing document", baseDoc + "{}", "trailing data"},
		{"trailing garbage", baseDoc + " x", "trailing data"},
		{"not an object", `[]`, "document: want an object"},
		{"not JSON", `version: 1`, "document: invalid character"},
		{"empty", ``, "document: unexpected EOF"},
		{"truncated", baseDoc[:40], "lanes: unexpected EOF"},
		{"too large", `{"version":1,"default_ttl":"` + strings.Repeat(" ", MaxDocumentBytes) + `"}`, "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse = %+v, %v; want ErrInvalid", p, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not contain %q", err, tc.field)
			}
			if strings.HasPrefix(tc.field, "version: got") && !errors.Is(err, ErrVersion) {
				t.Errorf("version error %v does not wrap ErrVersion", err)
			}
		})
	}
	if _, err := Parse([]byte(baseDoc)); err != nil {
		t.Fatalf("control: baseDoc does not parse: %v", err)
	}
}

// TestDefault: the built-in policy validates, covers the built-in lanes and
// survives a round trip through its canonical form.
func TestDefault(t *testing.T) {
	d := LegacyDefault()
	if err := d.Validate(); err != nil {
		t.Fatalf("LegacyDefault().Validate: %v", err)
	}
	for _, l := range lanes.Builtin {
		if _, ok := d.Lanes[l]; !ok {
			t.Errorf("Default has no lane %q", l)
		}
	}
	p, err := Parse(d.Canonical())
	if err != nil {
		t.Fatalf("Parse(LegacyDefault().Canonical()): %v", err)
	}
	if !reflect.DeepEqual(p, d) {
		t.Errorf("round trip changed the default policy:\n %+v\n %+v", p, d)
	}
}

// TestCanonicalStable: the canonical form does not depend on formatting,
// key order or duration spelling, is a fixed point of Parse, and Digest is
// its SHA-256.
func TestCanonicalStable(t *testing.T) {
	docs := []string{
		baseDoc,
		`{"lanes":{"b":{"tools":["<x>&"],"ttl":"1h"},"a":{"tools":[]}},"default_ttl":"1s","version":1}`,
		`{"version":1,"default_ttl":"90s","lanes":{"x":{"tools":null,"deny":null}},"workers":{}}`,
		string(LegacyDefault().Canonical()),
	}
	for _, doc := range docs {
		p, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%s): %v", doc, err)
		}
		c := p.Canonical()
		p2, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", c, err)
		}
		if c2 := p2.Canonical(); !bytes.Equal(c, c2) {
			t.Errorf("canonical form is not stable:\n %s\n %s", c, c2)
		}
		if p.Digest() != events.Sum(c) {
			t.Errorf("Digest is not SHA-256 of the canonical form")
		}
	}
	a, _ := Parse([]byte(`{"version":1,"default_ttl":"60s","lanes":{"x":{"tools":["R"]},"y":{"tools":["W"]}}}`))
	b, _ := Parse([]byte(`{"lanes":{"y":{"tools":["W"]},"x":{"tools":["R"]}},"default_ttl":"1m0s","version":1}`))
	if a == nil || b == nil || !bytes.Equal(a.Canonical(), b.Canonical()) {
		t.Errorf("equivalent documents have different canonical forms")
	}
	c, _ := Parse([]byte(`{"version":1,"default_ttl":"60s","lanes":{"x":{"tools":["W","R"]},"y":{"tools":["W"]}}}`))
	if c == nil || bytes.Equal(a.Canonical(), c.Canonical()) {
		t.Errorf("tool order is meaningful (first match names the rule) but was lost")
	}
}

// TestEvaluate: denials beat allowances, globs match, pinned workers stay in
// their lane, unknown lanes are refused, and the TTL comes from the lane or
// the default. Refusal reasons are grants reason codes.
func TestEvaluate(t *testing.T) {
	p, err := Parse([]byte(`{
		"version": 1, "default_ttl": "1m",
		"lanes": {
			"coordinator": {"tools": ["*"], "ttl": "2m"},
			"isolated": {"tools": ["Read", "mcp__github__get_*"], "deny": ["mcp__github__get_secret*"], "ttl": "30s"},
			"specialist": {"tools": ["*"], "deny": ["mcp__*"]}
		},
		"workers": {"cron1": "isolated"}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	allow := func(rule string, ttl time.Duration) Verdict { return Verdict{Allowed: true, Rule: rule, TTL: ttl} }
	deny := func(reason grants.Reason, missing, rule string) Verdict {
		return Verdict{Reason: string(reason), Missing: missing, Rule: rule}
	}
	cases := []struct {
		worker, lane, tool string
		want               Verdict
	}{
		{"w1", "isolated", "Read", allow("lanes.isolated.tools:Read", 30*time.Second)},
		{"w1", "isolated", "mcp__github__get_issue", allow("lanes.isolated.tools:mcp__github__get_*", 30*time.Second)},
		{"w1", "isolated", "mcp__github__get_secret_key", deny(grants.ReasonDeniedByPolicy, "tool not denied", "lanes.isolated.deny:mcp__github__get_secret*")},
		{"w1", "isolated", "Bash", deny(grants.ReasonDeniedByPolicy, "tool Bash allowed in lane isolated", "lanes.isolated.tools")},
		{"w1", "isolated", "read", deny(grants.ReasonDeniedByPolicy, "tool read allowed in lane isolated", "lanes.isolated.tools")},
		{"w1", "specialist", "Bash", allow("lanes.specialist.tools:*", time.Minute)},
		{"w1", "specialist", "mcp__github__get_issue", deny(grants.ReasonDeniedByPolicy, "tool not denied", "lanes.specialist.deny:mcp__*")},
		{"w1", "specialist", "mcp__evil/tool", deny(grants.ReasonDeniedByPolicy, "tool not denied", "lanes.specialist.deny:mcp__*")},
		{"w1", "coordinator", "mcp__anything", allow("lanes.coordinator.tools:*", 2*time.Minute)},
		{"cron1", "isolated", "Read", allow("lanes.isolated.tools:Read", 30*time.Second)},
		{"cron1", "specialist", "Bash", deny(grants.ReasonLaneMismatch, "lane=isolated", "workers.cron1")},
		{"cron1", "ops", "Read", deny(grants.ReasonLaneMismatch, "lane=isolated", "workers.cron1")},
		{"w1", "ops", "Read", deny(grants.ReasonDeniedByPolicy, "lane ops declared", "lanes")},
		{"w1", "", "Read", deny(grants.ReasonDeniedByPolicy, "lane  declared", "lanes")},
	}
	for _, tc := range cases {
		if got := p.Evaluate(tc.worker, tc.lane, tc.tool); got != tc.want {
			t.Errorf("Evaluate(%q, %q, %q) =\n %+v\nwant\n %+v", tc.worker, tc.lane, tc.tool, got, tc.want)
		}
	}
}

// FuzzParse: Parse never panics; anything it accepts has a canonical form
// that parses back to the same canonical form, and evaluates without
// panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(baseDoc))
	f.Add(LegacyDefault().Canonical())
	f.Add([]byte(`{"version":1,"default_ttl":"1m","lanes":{"a":{"tools":["*"]}},"provenance":{"memory_paths":["*/CLAUDE.md"]}}`))
	f.Add([]byte(`{"version":2,"default_ttl":"1m","lanes":{"a":{"surfaces":["*"],"consequences":["*"]}},` +
		`"surfaces":[{"id":"s","tools":["*"],"operation":"write","consequence":"local_mutation","target":{"field":"p","canon":"path"},"sinks":["c"]}],` +
		`"provenance":{"channels":{"tool_result":"preference"},"paths":[{"match":"/o/*","authority":"policy"}],` +
		`"require":[{"id":"r","fields":["c"],"authority":"instruction","approval":true}],` +
		`"protected":{"paths":["*/.env"]},"memory_paths":["*/CLAUDE.md"]}}`))
	f.Add([]byte(`{"version":1,"default_ttl":"90s","lanes":{"x":{"tools":null,"deny":["a\\*", "[^a-c]?"]}},"workers":{}}`))
	f.Add([]byte(`{"version":1,"Version":1}`))
	f.Add([]byte(`{"version":1,"default_ttl":"1m","lanes":{"a":{"tools":["<&>\u2028"]}}} }`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := Parse(doc)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		c := p.Canonical()
		p2, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical form %s of %s does not parse: %v", c, doc, err)
		}
		if c2 := p2.Canonical(); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form not stable:\n %s\n %s", c, c2)
		}
		for lane := range p.Lanes {
			v := p.Evaluate("w", lane, "Read")
			if v.Allowed && (v.TTL < MinTTL || v.TTL > MaxTTL) {
				t.Fatalf("allowed with TTL %s outside the limits", v.TTL)
			}
		}
	})
}
