package policy

import _ "embed"

// recommended is the canonical JSON form of docs/policy.example.yaml (a
// test in package policyfile keeps the two equal).
//
//go:embed recommended.json
var recommended []byte

// Recommended returns the recommended version 2 policy: the built-in lanes
// with their surfaces and consequence classes, common tool surfaces,
// protected credential, memory and writ paths, an egress allow-list, a
// preauthorization example, quotas and the default shape rulebook. It is
// the starting point for an operator's own document
// (docs/policy.example.yaml); `issuer policy show --recommended` prints it.
func Recommended() *Policy {
	p, err := Parse(recommended)
	if err != nil {
		// Unreachable: the embedded document is checked by tests. Fail
		// closed with a policy that admits nothing rather than panic.
		return &Policy{Version: SchemaVersion}
	}
	return p
}

// Default returns the policy a fresh issuer applies when it is started
// without one: the recommended version 2 document (one source of truth,
// docs/policy.example.yaml), with its shape rules, protected paths, egress
// allow-list and provenance checks on. The initial policy is written into
// the log, so a cluster that started under an older default (the version
// 1 LegacyDefault) keeps judging by it until an operator applies another.
func Default() *Policy { return Recommended() }
