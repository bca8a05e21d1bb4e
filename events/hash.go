package events

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Hash is a SHA-256 digest: an event hash, a request digest, a policy digest.
type Hash [32]byte

// IsZero reports whether h is all zeros (the "no previous event" hash).
func (h Hash) IsZero() bool {
	// Word-wise: comparing with Hash{} calls memequal, which shows up in
	// Seal and Decode profiles.
	le := binary.LittleEndian
	return le.Uint64(h[0:])|le.Uint64(h[8:])|le.Uint64(h[16:])|le.Uint64(h[24:]) == 0
}

// String returns the lower-case hex form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Short returns the first 12 hex digits, for logs.
func (h Hash) Short() string { return hex.EncodeToString(h[:6]) }

// MarshalText encodes h as hex; the zero hash encodes as "".
func (h Hash) MarshalText() ([]byte, error) {
	if h.IsZero() {
		return []byte{}, nil
	}
	return []byte(h.String()), nil
}

// UnmarshalText accepts 64 hex digits or "".
func (h *Hash) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*h = Hash{}
		return nil
	}
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHash parses 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 64 {
		return h, fmt.Errorf("%w: want 64 hex digits, got %d characters", ErrBadHash, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%w: %v", ErrBadHash, err)
	}
	return h, nil
}

// HashFromBytes copies a 32-byte slice into a Hash.
func HashFromBytes(b []byte) (Hash, error) {
	var h Hash
	if len(b) != len(h) {
		return h, fmt.Errorf("%w: want 32 bytes, got %d", ErrBadHash, len(b))
	}
	copy(h[:], b)
	return h, nil
}

// Sum returns SHA-256 of b.
func Sum(b []byte) Hash { return sha256.Sum256(b) }
