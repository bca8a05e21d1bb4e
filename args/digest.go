package args

import "github.com/writ-dev/writ/events"

// RequestDigest is H(tool, canonical args): SHA-256 over a domain tag, the
// tool name and the canonical argument bytes, each length-prefixed so no two
// (tool, args) pairs share an input.
func RequestDigest(tool string, canonicalArgs []byte) events.Hash {
	w := events.NewWriter(make([]byte, 0, 32+len(tool)+len(canonicalArgs)))
	w.String(1, "writ.request.v1")
	w.String(2, tool)
	w.Raw(3, canonicalArgs)
	return events.Sum(w.Bytes())
}

// Digest canonicalizes raw JSON arguments and returns the request digest.
func Digest(tool string, rawArgs []byte) (events.Hash, error) {
	c, err := CanonicalJSON(rawArgs)
	if err != nil {
		return events.Hash{}, err
	}
	return RequestDigest(tool, c), nil
}
