package grants

import (
	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/events"
)

// RequestDigest is args.RequestDigest, the request digest a grant binds:
// H(tool, canonical args). It stays here because the state machine's
// tests spell it through this package; new code calls args.
func RequestDigest(tool string, canonicalArgs []byte) events.Hash {
	return args.RequestDigest(tool, canonicalArgs)
}

// DigestArgs is args.Digest: canonicalize raw JSON arguments and return
// the request digest.
func DigestArgs(tool string, rawArgs []byte) (events.Hash, error) {
	return args.Digest(tool, rawArgs)
}
