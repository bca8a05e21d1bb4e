package policy_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

// baseV2 is a small valid version 2 document the invalid cases edit.
const baseV2 = `{"version":2,"default_ttl":"1m","workspace":"/work/{worker}",` +
	`"lanes":{"a":{"surfaces":["sh"],"consequences":["arbitrary_execution"],"ttl":"30s"},"b":{"surfaces":["*"],"consequences":["*"]}},` +
	`"workers":{"w1":"a"},` +
	`"surfaces":[{"id":"sh","tools":["Bash"],"operation":"execute","consequence":"arbitrary_execution","target":{"field":"command","canon":"shell"},"sinks":["command"]},` +
	`{"id":"rd","tools":["Read"],"operation":"read","consequence":"local_read","target":{"field":"file_path","canon":"path"}}],` +
	`"allow":[{"id":"al","tools":["Read"],"targets":["path:/tmp/*"],"max_amount":5}],` +
	`"deny":[{"id":"dn","lanes":["a"],"tools":["*"],"targets":["path:/srv/*"]}],` +
	`"preauthorizations":[{"id":"pa","tools":["Bash"],"expires":"2030-01-01T00:00:00Z","uses":3,"per_call":1,"cumulative":2}],` +
	`"boundaries":{"protected_paths":["*/.ssh/*"],"egress_allow":["*.example.org"],"trust_domains":["example.com"],"crossing_classes":["outbound_send"]},` +
	`"review":{"classes":["credential_use"],"targets":["path:/rel/*"]},` +
	`"shape_rules":[{"id":"sr","surfaces":["sh"],"in":["sinks"],"match":"\\bsudo\\b","action":"escalate","examples":{"hit":["sudo ls"],"miss":["pseudo"]}}],` +
	`"quotas":[{"id":"q","lanes":["a"],"per":"worker","window":"1m","requests":5}],` +
	`"ledger":{"window":"5m","scope":"fleet"}}`

func editV2(t *testing.T, old, new string) string {
	t.Helper()
	if !strings.Contains(baseV2, old) {
		t.Fatalf("baseV2 has no %q", old)
	}
	return strings.Replace(baseV2, old, new, 1)
}

// TestParseV2Valid: the base document parses, its canonical form is a
// fixed point, and the recommended policy and the engine test policy are
// valid.
func TestParseV2Valid(t *testing.T) {
	p, err := policy.Parse([]byte(baseV2))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Canonical()
	p2, err := policy.Parse(c)
	if err != nil {
		t.Fatalf("canonical form %s: %v", c, err)
	}
	if !bytes.Equal(p2.Canonical(), c) {
		t.Fatalf("canonical form not stable")
	}
	if p.Digest() != p2.Digest() {
		t.Fatalf("digest differs")
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	r := policy.Recommended()
	if r.Version != policy.SchemaVersion || len(r.ShapeRules) == 0 || r.Validate() != nil {
		t.Fatalf("Recommended is not a valid version 2 policy: %+v", r.Validate())
	}
	loadPolicy(t, "testdata/engine.yaml")
}

// TestParseV2Invalid: each invalid document is refused with ErrInvalid and
// an error naming the offending field.
func TestParseV2Invalid(t *testing.T) {
	cases := []struct {
		name, doc, field string
	}{
		{"version 1 lane field", editV2(t, `"ttl":"30s"`, `"ttl":"30s","tools":["Bash"]`), "lanes.a.tools: unknown field"},
		{"unknown top-level field", editV2(t, `"version":2`, `"version":2,"rules":[]`), "rules: unknown field"},
		{"no surfaces", `{"version":2,"default_ttl":"1m","lanes":{"a":{}},"surfaces":[]}`, "surfaces: at least one tool surface"},
		{"no lanes", `{"version":2,"default_ttl":"1m","lanes":{},"surfaces":[{"id":"s","tools":["*"],"operation":"o","consequence":"local_read"}]}`, "lanes: at least one lane"},
		{"no default ttl", `{"version":2,"lanes":{"a":{}},"surfaces":[{"id":"s","tools":["*"],"operation":"o","consequence":"local_read"}]}`, "default_ttl: 0s is outside"},
		{"duplicate surface", editV2(t, `{"id":"rd"`, `{"id":"sh"`), "surfaces[1].id: duplicate surface id"},
		{"bad surface id", editV2(t, `{"id":"rd"`, `{"id":"r d"`), "surfaces[1].id: character ' '"},
		{"surface without tools", editV2(t, `"tools":["Read"],"operation"`, `"tools":[],"operation"`), "surfaces[1].tools: at least one"},
		{"bad tool pattern", editV2(t, `"tools":["Read"],"operation"`, `"tools":["Re[ad"],"operation"`), "surfaces[1].tools[0]: lanes: bad tool pattern"},
		{"bad consequence", editV2(t, `"consequence":"local_read"`, `"consequence":"reading"`), "surfaces[1].consequence: want one of"},
		{"bad canon", editV2(t, `"canon":"path"`, `"canon":"file"`), "surfaces[1].target.canon: want one of"},
		{"empty target field", editV2(t, `"field":"file_path"`, `"field":""`), "surfaces[1].target.field"},
		{"bad pointer", editV2(t, `"field":"file_path"`, `"field":"/a~2"`), "surfaces[1].target.field: bad JSON pointer"},
		{"bad operation", editV2(t, `"operation":"read"`, `"operation":""`), "surfaces[1].operation"},
		{"lane names no surface", editV2(t, `"surfaces":["sh"]`, `"surfaces":["shell"]`), `lanes.a.surfaces[0]: "shell" names no declared surface`},
		{"lane bad consequence", editV2(t, `"consequences":["arbitrary_execution"]`, `"consequences":["all"]`), "lanes.a.consequences[0]: want one of"},
		{"lane ttl", editV2(t, `"ttl":"30s"`, `"ttl":"2h"`), "lanes.a.ttl: 2h0m0s is outside"},
		{"bad workspace", editV2(t, `"workspace":"/work/{worker}"`, `"workspace":"work/{worker}"`), "workspace: \"work/{worker}\" is not an absolute clean path"},
		{"workspace placeholder", editV2(t, `"workspace":"/work/{worker}"`, `"workspace":"/work/{session}"`), "workspace: only {worker}"},
		{"worker in undeclared lane", editV2(t, `"w1":"a"`, `"w1":"z"`), `workers.w1: lane "z" is not declared`},
		{"unpinned", editV2(t, `"version":2`, `"version":2,"unpinned":"maybe"`), "unpinned: want allow or deny"},
		{"rule without tools", editV2(t, `{"id":"al","tools":["Read"]`, `{"id":"al","tools":[]`), "allow[0].tools: at least one"},
		{"rule target pattern", editV2(t, `"targets":["path:/tmp/*"]`, `"targets":["/tmp/*"]`), "allow[0].targets[0]: \"/tmp/*\" must start with path:"},
		{"rule lane", editV2(t, `"lanes":["a"],"tools":["*"]`, `"lanes":["z"],"tools":["*"]`), `deny[0].lanes[0]: lane "z" is not declared`},
		{"deny with amount", editV2(t, `{"id":"dn",`, `{"id":"dn","max_amount":1,`), "deny[0].max_amount: only an allowance"},
		{"zero max amount", editV2(t, `"max_amount":5`, `"max_amount":0`), "allow[0].max_amount: must be at least 1"},
		{"negative amount", editV2(t, `"max_amount":5`, `"max_amount":-5`), "allow[0].max_amount: want a non-negative integer"},
		{"fractional amount", editV2(t, `"max_amount":5`, `"max_amount":5.5`), "allow[0].max_amount: want a non-negative integer"},
		{"duplicate allow id", editV2(t, `"allow":[{"id":"al","tools":["Read"],"targets":["path:/tmp/*"],"max_amount":5}]`, `"allow":[{"id":"al","tools":["Read"]},{"id":"al","tools":["Read"]}]`), "allow[1].id: duplicate id"},
		{"preauth without expiry", editV2(t, `"expires":"2030-01-01T00:00:00Z",`, ``), "preauthorizations[0].expires: required"},
		{"preauth bad expiry", editV2(t, `"expires":"2030-01-01T00:00:00Z"`, `"expires":"next year"`), "preauthorizations[0].expires: want an RFC 3339 time"},
		{"preauth zero uses", editV2(t, `"uses":3`, `"uses":0`), "preauthorizations[0].uses: must be at least 1"},
		{"protected path pattern", editV2(t, `"protected_paths":["*/.ssh/*"]`, `"protected_paths":[".ssh/*"]`), "boundaries.protected_paths[0]: \".ssh/*\" must start with /"},
		{"egress upper case", editV2(t, `"egress_allow":["*.example.org"]`, `"egress_allow":["*.Example.org"]`), "boundaries.egress_allow[0]: \"*.Example.org\" must be lower-case"},
		{"crossing class", editV2(t, `"crossing_classes":["outbound_send"]`, `"crossing_classes":["sending"]`), "boundaries.crossing_classes[0]: want one of"},
		{"review class", editV2(t, `"classes":["credential_use"]`, `"classes":["x"]`), "review.classes[0]: want one of"},
		{"review target", editV2(t, `"targets":["path:/rel/*"]`, `"targets":["rel"]`), "review.targets[0]"},
		{"shape regexp", editV2(t, `"match":"\\bsudo\\b"`, `"match":"(sudo"`), "shape_rules[0].match: error parsing regexp"},
		{"shape matches everything", editV2(t, `"match":"\\bsudo\\b"`, `"match":"x*"`), "shape_rules[0].match: matches the empty string"},
		{"shape action", editV2(t, `"action":"escalate"`, `"action":"warn"`), "shape_rules[0].action: want deny or escalate"},
		{"shape in", editV2(t, `"in":["sinks"]`, `"in":["argv"]`), "shape_rules[0].in[0]: want sinks, target or args"},
		{"shape surface", editV2(t, `"surfaces":["sh"],"in"`, `"surfaces":["nope"],"in"`), `shape_rules[0].surfaces[0]: "nope" names no declared surface`},
		{"shape hit example fails", editV2(t, `"hit":["sudo ls"]`, `"hit":["su ls"]`), `shape_rules[0].examples.hit[0]: the rule does not match "su ls"`},
		{"shape miss example matches", editV2(t, `"miss":["pseudo"]`, `"miss":["sudo -i"]`), `shape_rules[0].examples.miss[0]: the rule matches "sudo -i"`},
		{"quota scope", editV2(t, `"per":"worker"`, `"per":"session"`), "quotas[0].per: want worker or lane"},
		{"quota window", editV2(t, `"window":"1m","requests"`, `"window":"0s","requests"`), "quotas[0].window: 0s is outside"},
		{"quota without limits", editV2(t, `,"requests":5`, ``), "quotas[0]: set at least one"},
		{"ledger scope", editV2(t, `"scope":"fleet"`, `"scope":"galaxy"`), "ledger.scope: want worker, lane or fleet"},
		{"ledger window", editV2(t, `"window":"5m","scope"`, `"window":"48h","scope"`), "ledger.window: 48h0m0s is outside"},
		{"struct as null", editV2(t, `"review":{"classes":["credential_use"],"targets":["path:/rel/*"]}`, `"review":null`), "review: want an object, got null"},
		{"duplicate key in a rule", editV2(t, `{"id":"dn",`, `{"id":"dn","id":"x",`), "deny[0].id: duplicate key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := policy.Parse([]byte(tc.doc))
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("Parse = %v, %v; want ErrInvalid", p != nil, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not contain %q", err, tc.field)
			}
		})
	}
	if _, err := policy.Parse([]byte(baseV2)); err != nil {
		t.Fatalf("control: %v", err)
	}
}

// TestValidateHandBuilt: Validate checks a policy built in code the same
// way Parse checks a document.
func TestValidateHandBuilt(t *testing.T) {
	p := &policy.Policy{Version: policy.SchemaVersion, DefaultTTL: policy.Duration(60e9),
		Lanes: map[string]policy.Lane{"a": {}}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "surfaces: at least one") {
		t.Fatalf("Validate = %v", err)
	}
	p.Version = 7
	if err := p.Validate(); !errors.Is(err, policy.ErrVersion) {
		t.Fatalf("Validate = %v", err)
	}
}

// FuzzParseV2: Parse never panics on version 2 input; what it accepts has
// a stable canonical form and judges without panicking.
func FuzzParseV2(f *testing.F) {
	f.Add([]byte(baseV2))
	f.Add([]byte(provV2)) // every provenance field
	rec, _ := os.ReadFile("recommended.json")
	f.Add(rec)
	f.Add([]byte(`{"version":2,"default_ttl":"1m","lanes":{"a":{}},"surfaces":[{"id":"s","tools":["*"],"operation":"o","consequence":"local_read"}]}`))
	f.Add([]byte(`{"version":2,"lanes":null}`))
	f.Add([]byte(`{"version":2,"default_ttl":"1m","lanes":{"a":{}},"surfaces":[{"id":"s","tools":["*"],"operation":"o","consequence":"local_read"}],` +
		`"results":[{"surface":"s","tools":["r*"],"fields":[{"pointer":"/m/*/from","class":"attested","authority":"instruction"},{"pointer":"/m/*/b~1x","class":"content"}]}]}`))
	if ext, err := os.ReadFile("testdata/surfaces.yaml"); err == nil {
		if p, err := policyfile.Parse(ext); err == nil {
			f.Add(p.Canonical()) // every field of surfaces_ext.go
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := policy.Parse(doc)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		c := p.Canonical()
		p2, err := policy.Parse(c)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", c, err)
		}
		if !bytes.Equal(p2.Canonical(), c) {
			t.Fatalf("canonical form not stable")
		}
		if p.Version != policy.SchemaVersion {
			return
		}
		for _, r := range fuzzRequests(t) {
			for lane := range p.Lanes {
				r.Lane = lane
				p.Judge(r, usage{}, now)
			}
		}
	})
}

func fuzzRequests(t *testing.T) []*policy.Request {
	return []*policy.Request{
		req(t, "w1", "", "Bash", `{"command":"curl x | sh"}`),
		req(t, "w1", "", "Read", `{"file_path":"../a"}`),
		req(t, "w1", "", "mcp__a__b", `{"amount":5,"payee":"x"}`),
		req(t, "w1", "", "send_email", `{"to":["a@example.com","B@x.example",{"n":1}],"cc":[]}`),
		{Worker: "w1", Tool: "Read"},
	}
}
