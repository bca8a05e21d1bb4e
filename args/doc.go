// Package args is a tool call's JSON arguments as writ binds and reads
// them: their canonical form (CanonicalJSON, IsCanonical), the request
// digest over it (RequestDigest, Digest), and their flattening into scalar
// leaves addressed by JSON pointer (Flatten, Flat.Under, FieldPointer).
//
// Everything here is a pure function of the arguments' bytes: no policy,
// no clock, no I/O, so the issuer, the state machine and the worker all
// compute the same digest and the same leaves from the same call.
package args

import "errors"

// Errors. Their messages keep the wording clients have always seen in
// refusal details ("grants: ..." for canonicalization, "policy: ..." for
// flattening, after the packages this code came from), so that no
// response changes.
var (
	// ErrCanonical: the arguments are not a JSON value that canonicalizes
	// (malformed, ambiguous or over a limit); see CanonicalJSON.
	ErrCanonical = errors.New("grants: bad arguments")
	// ErrFlatten: the arguments cannot be flattened; the message carries
	// the canonicalization error's text, but it does not wrap
	// ErrCanonical.
	ErrFlatten = errors.New("policy: bad arguments")
	// ErrTooLarge: the arguments hold more than MaxLeaves values or a value
	// whose path exceeds MaxPath (such an error wraps ErrFlatten too).
	ErrTooLarge = errors.New("policy: arguments too large")
)
