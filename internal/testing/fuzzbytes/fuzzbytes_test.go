package fuzzbytes

import (
	"bytes"
	"math"
	"testing"
)

func TestSourceReadsInOrderThenZeros(t *testing.T) {
	s := New([]byte{7, 1, 2, 3})
	if got := s.Byte(); got != 7 {
		t.Fatalf("Byte = %d, want 7", got)
	}
	if got := s.Bytes(5); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("Bytes(5) past the end = %v, want the 3 left", got)
	}
	if got, b := s.Byte(), s.Bytes(2); got != 0 || len(b) != 0 {
		t.Fatalf("past the end: Byte %d, Bytes %v; want 0 and empty", got, b)
	}
}

func TestUint64Choices(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want uint64
	}{
		{[]byte{0}, 0},
		{[]byte{4*9 + 1}, 9},
		{[]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxUint64},
		{[]byte{3, 1}, 1},
		{nil, 0},
	} {
		if got := New(tc.in).Uint64(); got != tc.want {
			t.Errorf("Uint64 of %v = %d, want %d", tc.in, got, tc.want)
		}
	}
}
