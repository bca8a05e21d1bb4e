// Package policy parses, validates and evaluates writ's policy document, the
// operator's trust root.
//
// Two schema versions exist. Version 1 (the original built-in allowlist:
// lanes with tool patterns, denials and grant lifetimes) is kept so that
// every log and receipt stream written under it replays to the same
// decisions; Evaluate judges it. Version 2 declares tool surfaces with
// their operation and consequence classes, target canonicalization and
// sink fields, lanes with the surfaces and consequence classes they may
// use, explicit allowances and denials, preauthorizations, protected
// assets and egress/trust domains, review classes, shape rules, quotas,
// the effect ledger, and provenance (the authority levels of content by
// its source, the authority the fields of consequential calls must trace
// to, protected sources and memory paths); Judge evaluates it.
// docs/policy.md describes the schema.
//
// Everything here is pure and deterministic: no clock (time comes from
// the caller, on the control-plane clock), no randomness, no I/O, and no
// map iteration order reaching a result. The state machine calls Judge
// inside Apply, so every replica reaches the same decision.
package policy
