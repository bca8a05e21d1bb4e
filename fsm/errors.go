package fsm

import "errors"

// Errors. Business refusals are never errors: they are events and
// envelopes. These are for bytes that are not writ's to begin with.
var (
	// ErrBadEntry: a log entry does not decode as a batch.
	ErrBadEntry = errors.New("fsm: malformed log entry")
	// ErrBadSnapshot: a snapshot does not decode or fails its checks.
	ErrBadSnapshot = errors.New("fsm: malformed snapshot")
	// ErrReplay: an event cannot be folded (wrong sequence, broken chain,
	// unknown kind) while rebuilding state from a receipt stream.
	ErrReplay = errors.New("fsm: replay")
)
