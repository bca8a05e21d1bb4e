package events

import "errors"

// Errors returned by this package. Callers match them with errors.Is; the
// wrapped message names the byte offset, tag or sequence involved.
var (
	// ErrMalformed: the bytes are not a canonical version-1 encoding.
	ErrMalformed = errors.New("events: malformed encoding")
	// ErrUnsupportedVersion: the leading version byte is not one we decode.
	ErrUnsupportedVersion = errors.New("events: unsupported encoding version")
	// ErrHashMismatch: the event's stored hash does not match its bytes.
	ErrHashMismatch = errors.New("events: hash mismatch")
	// ErrBadHash: a digest is not 32 bytes / 64 hex digits.
	ErrBadHash = errors.New("events: bad hash")
	// ErrUnknownKind: a kind name is not known to this version.
	ErrUnknownKind = errors.New("events: unknown kind")
	// ErrChain: an event does not follow its predecessor (sequence gap,
	// repeated sequence or wrong previous hash).
	ErrChain = errors.New("events: broken chain")
	// ErrInvalidEvent: a decoded event carries a field its kind must not,
	// or lacks one its kind must carry (Event.StaticValidate).
	ErrInvalidEvent = errors.New("events: invalid event")
)
