// Package fuzzbytes reads a fuzz input as a stream of small choices, bytes
// and integers, for fuzz targets that build structured values from it.
package fuzzbytes

import "encoding/binary"

// Source hands out a fuzz input's bytes in order; past the end it gives
// zeros and empty slices, so a short input still builds a value.
type Source struct{ b []byte }

// New returns a Source reading b.
func New(b []byte) *Source { return &Source{b: b} }

// Byte returns the next byte, or 0 past the end.
func (s *Source) Byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

// Bytes returns the next n bytes, fewer past the end. The slice aliases the
// input.
func (s *Source) Bytes(n int) []byte {
	n = min(n, len(s.b))
	out := s.b[:n]
	s.b = s.b[n:]
	return out
}

// Uint64 returns 0, a small number or a full 64-bit value, each often
// enough that the edges of both are reached.
func (s *Source) Uint64() uint64 {
	var b [8]byte
	switch c := s.Byte(); c % 4 {
	case 0:
		return 0
	case 1:
		return uint64(c >> 2)
	default:
		copy(b[:], s.Bytes(8))
		return binary.LittleEndian.Uint64(b[:])
	}
}
