package policy

import "errors"

// Errors. Validation errors wrap ErrInvalid and name the field; target
// errors wrap ErrTargetMissing or ErrTargetAmbiguous.
var (
	// ErrInvalid: the document does not validate; the message names the
	// field (for example surfaces[3].target.canon).
	ErrInvalid = errors.New("policy: invalid")
	// ErrVersion: the document's version is not one this build reads (such
	// an error wraps ErrInvalid too).
	ErrVersion = errors.New("policy: unsupported version")
	// ErrArgs: tool arguments are not JSON this package can flatten.
	ErrArgs = errors.New("policy: bad arguments")
	// ErrArgsTooLarge: tool arguments exceed MaxArgLeaves values or a
	// value's path exceeds MaxArgPath (such an error wraps ErrArgs too).
	ErrArgsTooLarge = errors.New("policy: arguments too large")
	// ErrTargetMissing: the call carries no value for the target field.
	ErrTargetMissing = errors.New("policy: target missing")
	// ErrTargetAmbiguous: the target value does not canonicalize to
	// exactly one canonical target.
	ErrTargetAmbiguous = errors.New("policy: target ambiguous")
)
