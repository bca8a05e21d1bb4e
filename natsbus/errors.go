package natsbus

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these (test
// with errors.Is) and add the detail: the field, subject or sequence at
// fault.
var (
	// ErrInvalidConfig reports a ServerConfig field, or an argument such as a
	// replica count, that cannot be used. The message names the field.
	ErrInvalidConfig = errors.New("natsbus: invalid config")

	// ErrInvalidToken reports a name that is not a single NATS subject token
	// of 1 to 64 characters from [A-Za-z0-9_-].
	ErrInvalidToken = errors.New("natsbus: invalid token")

	// ErrServerStart reports that the embedded server did not start or did
	// not become ready in time. The message names the address involved.
	ErrServerStart = errors.New("natsbus: server start failed")

	// ErrNilJetStream reports a nil jetstream.JetStream (or a nil Publisher).
	ErrNilJetStream = errors.New("natsbus: nil JetStream context")

	// ErrStreamConfig reports a receipt stream whose configuration does not
	// hold the append-only guarantees even after EnsureStream updated it.
	ErrStreamConfig = errors.New("natsbus: receipt stream misconfigured")

	// ErrInvalidMessage reports a batch that Publisher cannot publish: a zero
	// sequence, a subject outside writ.evt., or sequences that are not
	// strictly consecutive.
	ErrInvalidMessage = errors.New("natsbus: invalid message")

	// ErrStreamGap reports that the stream ends before the first message of
	// the batch that is not yet in it: the caller must publish the missing
	// earlier messages first.
	ErrStreamGap = errors.New("natsbus: gap between stream and batch")

	// ErrStreamDiverged reports that the stream already holds a different
	// message at a sequence the batch covers. It is never resolved by
	// retrying.
	ErrStreamDiverged = errors.New("natsbus: stream diverged from events")

	// ErrStreamNotLed reports a stream-info answer that cannot be taken as
	// the stream's state: it came from a replica while the stream had no
	// leader, from a replica that is not the leader, or from a leader
	// without a quorum of current replicas. Such a replica answers from its
	// own copy, which may be shorter or empty (a replica whose store was
	// wiped, one still catching up). Retry: the answer of a leader with a
	// quorum follows once an election settles.
	ErrStreamNotLed = errors.New("natsbus: stream-info answer not from a stream leader with a quorum")
)
