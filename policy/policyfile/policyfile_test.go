package policyfile

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/writ-dev/writ/policy"
)

// TestToJSON: YAML converts to the JSON it means; JSON passes through;
// what YAML could read two ways is refused.
func TestToJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a: 1\nb: [x, 'y']\n", `{"a":1,"b":["x","y"]}`},
		{"expires: 2027-01-01T00:00:00Z\n", `{"expires":"2027-01-01T00:00:00Z"}`},
		{"num: 18446744073709551615\n", `{"num":18446744073709551615}`},
		{"a: &x [1]\nb: *x\n", `{"a":[1],"b":[1]}`},
		{"a: ~\n", `{"a":null}`},
		{"  {\"a\": 1}", `  {"a": 1}`},
	}
	for _, tc := range cases {
		got, err := ToJSON([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("ToJSON(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"a: 1\na: 2\n", "already set"},
		{"1: x\n", "key 1 is a int"},
		{"n: 1\n", "key false is a bool"}, // YAML 1.1 reads n as false
		{"a:\n  true: x\n", "a: key true is a bool"},
		{"a: .nan\n", "a: NaN is not a JSON number"},
		{"a: [b: c\n", "yaml:"},
		{"- " + strings.Repeat("[", 40) + strings.Repeat("]", 40), "nested deeper"},
		{strings.Repeat("#", policy.MaxDocumentBytes+1), "limit"},
	}
	for _, tc := range bad {
		_, err := ToJSON([]byte(tc.in))
		if !errors.Is(err, policy.ErrInvalid) || !errors.Is(err, ErrYAML) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ToJSON(%q) = %v; want an ErrYAML containing %q", tc.in, err, tc.want)
		}
	}
}

// TestYAMLErrorsNameTheField: a YAML document's schema errors name the
// field like a JSON document's.
func TestYAMLErrorsNameTheField(t *testing.T) {
	_, err := Parse([]byte("version: 2\ndefault_ttl: 1m\nlanes:\n  a: {ttl: soon}\n"))
	if !errors.Is(err, policy.ErrInvalid) || !strings.Contains(err.Error(), "lanes.a.ttl") {
		t.Fatalf("Parse = %v", err)
	}
	_, err = Parse([]byte("version: 2\ndefault_ttl: 1m\nunpinned: no\n"))
	if err == nil || !strings.Contains(err.Error(), "unpinned: want a string, got false") {
		t.Fatalf("YAML 1.1 boolean: %v", err)
	}
}

// TestExampleIsRecommended: docs/policy.example.yaml is the recommended
// policy the package embeds.
func TestExampleIsRecommended(t *testing.T) {
	raw, err := os.ReadFile("../../docs/policy.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Canonical(), policy.Recommended().Canonical()) {
		t.Fatalf("docs/policy.example.yaml and policy/recommended.json differ; regenerate recommended.json from the YAML:\n%s",
			p.Canonical())
	}
}

// FuzzToJSON: conversion never panics, and what it accepts is JSON that
// policy.Parse either accepts or refuses with ErrInvalid.
func FuzzToJSON(f *testing.F) {
	raw, _ := os.ReadFile("../../docs/policy.example.yaml")
	f.Add(raw)
	f.Add([]byte("version: 2\nlanes: {a: {}}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("? [a]\n: b\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		j, err := ToJSON(in)
		if err != nil {
			if !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if _, err := policy.Parse(j); err != nil && !errors.Is(err, policy.ErrInvalid) {
			t.Fatalf("Parse error %v does not wrap ErrInvalid", err)
		}
	})
}

// TestToYAMLRoundTrip: a document written by ToYAML parses back to the
// same canonical form, so `issuer policy show` output can be applied as
// it is, including keys and values YAML 1.1 would read as booleans,
// numbers or null.
func TestToYAMLRoundTrip(t *testing.T) {
	docs := map[string][]byte{
		"default":     policy.Default().Canonical(),
		"recommended": policy.Recommended().Canonical(),
		"tricky v1":   []byte(`{"version":1,"default_ttl":"1m","workers":{"n":"on","y":"yes"},"lanes":{"n":{"tools":["null","1.5","0x10","~","#x","a: b","- c","true"],"ttl":"30s"},"on":{"tools":["*"],"deny":["no"]},"yes":{"tools":["Bash"]}}}`),
	}
	for _, f := range []string{"../testdata/engine.yaml", "../testdata/provenance.yaml", "../../docs/policy.example.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		docs[f] = p.Canonical()
	}
	for name, canon := range docs {
		p, err := policy.Parse(canon)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := p.Canonical()
		y, err := ToYAML(want)
		if err != nil {
			t.Fatalf("%s: ToYAML: %v", name, err)
		}
		back, err := Parse(y)
		if err != nil {
			t.Fatalf("%s: the YAML does not parse: %v\n%s", name, err, y)
		}
		if got := back.Canonical(); !bytes.Equal(got, want) {
			t.Fatalf("%s: round trip changed the document:\n got %s\nwant %s\nyaml:\n%s", name, got, want, y)
		}
	}
}
