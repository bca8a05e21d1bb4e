package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/policy/policyfile"
)

const examplePolicy = "../../docs/policy.example.yaml"

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// logged is the document the issuer writes to its log for p: p with the
// built-in rules.
func logged(t *testing.T, p *policy.Policy) *policy.Policy {
	t.Helper()
	q, err := policy.WithBuiltins(p)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// loggedDefault is the document a fresh issuer applies: the built-in
// default with the built-in rules (as it is while it is version 1).
func loggedDefault(t *testing.T) *policy.Policy {
	if d := policy.Default(); d.Version == policy.LegacyVersion {
		return d
	}
	return logged(t, policy.Default())
}

// TestPolicyValidate: validate reads YAML and JSON, names the field of an
// invalid document (exit 1), and a missing file is a usage error.
func TestPolicyValidate(t *testing.T) {
	cleanEnv(t)
	r := runCLI(t, "policy", "validate", examplePolicy)
	if r.code != exitOK || !strings.Contains(r.stdout, "valid version 2 policy") || !strings.Contains(r.stdout, logged(t, policy.Recommended()).Digest().String()) {
		t.Fatalf("validate example: %s", r)
	}
	js := writeFile(t, "p.json", string(policy.Recommended().Canonical()))
	if r := runCLI(t, "policy", "validate", js); r.code != exitOK || !strings.Contains(r.stdout, "version 2") {
		t.Fatalf("validate JSON: %s", r)
	}
	// A version 1 document cannot carry the built-in rules: refused,
	// pointing at version 2.
	v1 := writeFile(t, "v1.json", `{"version":1,"default_ttl":"1m","lanes":{"coordinator":{"tools":["*"]}}}`)
	if r := runCLI(t, "policy", "validate", v1); r.code != exitRefused || !strings.Contains(r.stderr, "write a version 2 document") {
		t.Fatalf("validate version 1: %s", r)
	}
	bad := writeFile(t, "bad.yaml", "version: 2\ndefault_ttl: 1m\nlanes:\n  a: {surfaces: [nope]}\nsurfaces:\n  - {id: s, tools: [x], operation: o, consequence: local_read}\n")
	r = runCLI(t, "policy", "validate", bad)
	if r.code != exitRefused || !strings.Contains(r.stderr, `lanes.a.surfaces[0]: "nope" names no declared surface`) {
		t.Fatalf("validate invalid: %s", r)
	}
	if r := runCLI(t, "policy", "validate", filepath.Join(t.TempDir(), "missing.yaml")); r.code != exitUsage {
		t.Fatalf("validate missing file: %s", r)
	}
}

// TestPolicyShowOffline: the built-in documents print without an issuer,
// as YAML (the default) and as canonical JSON, and both forms parse to the
// document the log would hold (the document with the built-in rules).
func TestPolicyShowOffline(t *testing.T) {
	cleanEnv(t)
	for flag, p := range map[string]*policy.Policy{"--recommended": logged(t, policy.Recommended()), "--default": logged(t, policy.Default())} {
		r := runCLI(t, "policy", "show", flag)
		y, err := policyfile.Parse([]byte(r.stdout))
		if r.code != exitOK || err != nil || y.Digest() != p.Digest() || !strings.Contains(r.stdout, "# writ policy: ") ||
			!strings.Contains(r.stdout, p.Digest().String()) {
			t.Fatalf("show %s: %v\n%s", flag, err, r)
		}
		r = runCLI(t, "policy", "show", flag, "--json")
		if r.code != exitOK || r.stdout != string(p.Canonical())+"\n" || !strings.Contains(r.stderr, p.Digest().String()) {
			t.Fatalf("show %s --json: %s", flag, r)
		}
	}
	if r := runCLI(t, "policy", "show", "--recommended", "--default"); r.code != exitUsage {
		t.Fatalf("show with both: %s", r)
	}
}

// shown is what `policy show` printed about an issuer's policy.
type shown struct {
	Epoch  uint64
	Digest string
	Doc    *policy.Policy
}

// TestPolicyAgainstIssuer: diff, apply, show and show --epoch against a
// real issuer; an invalid document is refused with the field named and
// the epoch stays.
func TestPolicyAgainstIssuer(t *testing.T) {
	cleanEnv(t)
	env := testenv.StartSingle(t, t.TempDir(), nil)
	show := func(args ...string) (shown, result) {
		t.Helper()
		r := runCLI(t, append([]string{"policy", "show", "--json", "--nats-url", env.URL}, args...)...)
		var ps shown
		if r.code == exitOK {
			if _, err := fmt.Sscanf(r.stderr, "# epoch %d, digest %64s", &ps.Epoch, &ps.Digest); err != nil {
				t.Fatalf("show printed %q on stderr: %v", r.stderr, err)
			}
			p, err := policy.Parse([]byte(strings.TrimSuffix(r.stdout, "\n")))
			if err != nil {
				t.Fatalf("show printed %q: %v", r.stdout, err)
			}
			ps.Doc = p
		}
		return ps, r
	}
	first, r := show()
	if r.code != exitOK || first.Epoch != 1 || first.Digest != loggedDefault(t).Digest().String() {
		t.Fatalf("show on a fresh issuer: %+v %s", first, r)
	}
	// The fresh issuer runs the example; the applied document differs from
	// it in its default TTL.
	raw, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	edited := writeFile(t, "edited.yaml", strings.Replace(string(raw), "default_ttl: 1m", "default_ttl: 2m", 1))
	want, err := policyfile.Parse([]byte(strings.Replace(string(raw), "default_ttl: 1m", "default_ttl: 2m", 1)))
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "policy", "diff", edited, "--nats-url", env.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, "epoch 1") || !strings.Contains(r.stdout, "default_ttl") {
		t.Fatalf("diff: %s", r)
	}
	r = runCLI(t, "policy", "apply", edited, "--nats-url", env.URL)
	var applied grants.Envelope
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &applied) != nil || applied.Epoch != 2 {
		t.Fatalf("apply: %s", r)
	}
	if r := runCLI(t, "policy", "diff", edited, "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, ": 0 changes") {
		t.Fatalf("diff after apply: %s", r)
	}
	cur, _ := show()
	if cur.Epoch != 2 || cur.Digest != logged(t, want).Digest().String() || cur.Doc.Digest().String() != cur.Digest {
		t.Fatalf("show after apply: %+v", cur)
	}
	old, r := show("--epoch", "1")
	if r.code != exitOK || old.Epoch != 1 || !strings.Contains(r.stderr, "applied by receipt 1") || old.Digest != first.Digest {
		t.Fatalf("show --epoch 1: %+v %s", old, r)
	}
	if old.Doc.Digest().String() != old.Digest {
		t.Fatalf("show --epoch 1 printed a document that does not match its digest")
	}
	if _, r := show("--epoch", "9"); r.code != exitRefused || !strings.Contains(r.stderr, "not applied yet") {
		t.Fatalf("show --epoch 9: %s", r)
	}
	bad := writeFile(t, "bad.yaml", "version: 2\ndefault_ttl: 1m\nlanes: {a: {}}\nsurfaces:\n  - {id: s, tools: [x], operation: o, consequence: teleport}\n")
	r = runCLI(t, "policy", "apply", bad, "--nats-url", env.URL)
	if r.code != exitRefused || !strings.Contains(r.stderr, "surfaces[0].consequence") {
		t.Fatalf("apply invalid: %s", r)
	}
	if st, _ := statusJSON(t, env.URL); st.Epoch != 2 {
		t.Fatalf("epoch after a refused apply: %d", st.Epoch)
	}
}

// TestPolicyShowApplyRoundTrip: what `policy show` prints, YAML or JSON,
// `policy apply` accepts as it is, and applying it yields the same digest:
// for the policy in force on a real issuer and for --recommended.
func TestPolicyShowApplyRoundTrip(t *testing.T) {
	cleanEnv(t)
	env := testenv.StartSingle(t, t.TempDir(), nil)
	digest := func() string {
		st, _ := statusJSON(t, env.URL)
		return st.PolicyDigest
	}
	cases := []struct {
		name string
		show []string
	}{
		{"in force, YAML", []string{"--nats-url", env.URL}},
		{"in force, JSON", []string{"--nats-url", env.URL, "--json"}},
		{"recommended, YAML", []string{"--recommended"}},
		{"recommended, JSON", []string{"--recommended", "--json"}},
		{"epoch 1, YAML", []string{"--nats-url", env.URL, "--epoch", "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"policy", "show"}, tc.show...)...)
			if r.code != exitOK {
				t.Fatalf("show: %s", r)
			}
			f := writeFile(t, "shown", r.stdout)
			p, err := policyfile.Parse([]byte(r.stdout))
			if err != nil {
				t.Fatalf("show printed a document that does not parse: %v\n%s", err, r.stdout)
			}
			if r := runCLI(t, "policy", "apply", f, "--nats-url", env.URL); r.code != exitOK {
				t.Fatalf("apply of what show printed: %s", r)
			}
			if got := digest(); got != p.Digest().String() {
				t.Fatalf("digest after apply %s, want %s", got, p.Digest())
			}
			if !strings.Contains(r.stdout+r.stderr, p.Digest().String()) {
				t.Fatalf("show did not name the digest %s: %s", p.Digest(), r)
			}
		})
	}
}

// TestPolicyValidateProblems: validate lists every problem on a line of
// its own with its field, says "invalid policy" once and stacks no
// package prefixes, for validation and YAML problems alike; apply refuses
// the same document before dialling.
func TestPolicyValidateProblems(t *testing.T) {
	cleanEnv(t)
	bad := writeFile(t, "bad.yaml", "version: 2\ndefault_ttl: 1m\nunpinned: maybe\nlanes:\n  x: {ttl: 5h, surfaces: [nope], consequences: [bogus]}\nsurfaces:\n  - {id: s, tools: [x], operation: o, consequence: weird}\n")
	r := runCLI(t, "policy", "validate", bad)
	want := []string{
		bad + ": invalid policy, 5 problems:",
		"\n  unpinned: want allow or deny",
		"\n  surfaces[0].consequence: want one of",
		"\n  lanes.x.ttl: 5h0m0s is outside",
		"\n  lanes.x.surfaces[0]: \"nope\" names no declared surface",
		"\n  lanes.x.consequences[0]: want one of",
	}
	for _, w := range want {
		if r.code != exitRefused || !strings.Contains(r.stderr, w) {
			t.Fatalf("validate: stderr lacks %q: %s", w, r)
		}
	}
	yml := writeFile(t, "broken.yaml", "version: 2\nlanes: [\n")
	r = runCLI(t, "policy", "validate", yml)
	if r.code != exitRefused || !strings.Contains(r.stderr, yml+": invalid policy: yaml: line") {
		t.Fatalf("validate broken YAML: %s", r)
	}
	for _, res := range []result{r, runCLI(t, "policy", "validate", bad)} {
		for _, stacked := range []string{"policy: invalid", "policy: policy", "policyfile:", "bad YAML"} {
			if strings.Contains(res.stderr, stacked) {
				t.Errorf("stderr carries %q: %s", stacked, res.stderr)
			}
		}
	}
	url, accepted := tripwire(t)
	if r := runCLI(t, "policy", "apply", bad, "--nats-url", url); r.code != exitRefused || !strings.Contains(r.stderr, "5 problems") || accepted.Load() != 0 {
		t.Fatalf("apply of an invalid document: %s (connections %d)", r, accepted.Load())
	}
}
