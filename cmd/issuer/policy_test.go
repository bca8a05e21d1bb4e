package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
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

// TestPolicyShowOffline: the built-in documents print without an issuer.
func TestPolicyShowOffline(t *testing.T) {
	cleanEnv(t)
	for flag, p := range map[string]*policy.Policy{"--recommended": policy.Recommended(), "--default": policy.Default()} {
		r := runCLI(t, "policy", "show", flag)
		var ps api.PolicyShow
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &ps) != nil || ps.Digest != p.Digest().String() {
			t.Fatalf("show %s: %s", flag, r)
		}
	}
	if r := runCLI(t, "policy", "show", "--recommended", "--default"); r.code != exitUsage {
		t.Fatalf("show with both: %s", r)
	}
}

// TestPolicyAgainstIssuer: diff, apply, show and show --epoch against a
// real issuer; an invalid document is refused with the field named and
// the epoch stays.
func TestPolicyAgainstIssuer(t *testing.T) {
	cleanEnv(t)
	// The issuer starts under the version 1 document older clusters
	// started with, so that the diff to the example crosses versions.
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.InitialPolicy = policy.LegacyDefault().Canonical()
	})
	show := func(args ...string) (api.PolicyShow, result) {
		t.Helper()
		r := runCLI(t, append([]string{"policy", "show", "--nats-url", env.URL}, args...)...)
		var ps api.PolicyShow
		if r.code == exitOK {
			if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil {
				t.Fatalf("show printed %q: %v", r.stdout, err)
			}
		}
		return ps, r
	}
	first, r := show()
	if r.code != exitOK || first.Epoch != 1 || first.Digest != loggedDefault(t).Digest().String() {
		t.Fatalf("show on a fresh issuer: %+v %s", first, r)
	}
	r = runCLI(t, "policy", "diff", examplePolicy, "--nats-url", env.URL)
	if r.code != exitOK || !strings.Contains(r.stdout, "epoch 1") || !strings.Contains(r.stdout, "~ version: 1 -> 2") ||
		!strings.Contains(r.stdout, "+ shape_rules") {
		t.Fatalf("diff: %s", r)
	}
	r = runCLI(t, "policy", "apply", examplePolicy, "--nats-url", env.URL)
	var applied grants.Envelope
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &applied) != nil || applied.Epoch != 2 {
		t.Fatalf("apply: %s", r)
	}
	if r := runCLI(t, "policy", "diff", examplePolicy, "--nats-url", env.URL); r.code != exitOK || !strings.Contains(r.stdout, ": 0 changes") {
		t.Fatalf("diff after apply: %s", r)
	}
	cur, _ := show()
	if cur.Epoch != 2 || cur.Digest != logged(t, policy.Recommended()).Digest().String() || cur.Seq != 0 {
		t.Fatalf("show after apply: %+v", cur)
	}
	old, r := show("--epoch", "1")
	if r.code != exitOK || old.Epoch != 1 || old.Seq != 1 || old.Digest != first.Digest {
		t.Fatalf("show --epoch 1: %+v %s", old, r)
	}
	if p, err := policy.Parse(old.Policy); err != nil || p.Digest().String() != old.Digest {
		t.Fatalf("show --epoch 1 printed a document that does not match its digest: %v", err)
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
