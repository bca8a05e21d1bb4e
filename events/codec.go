package events

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Wire types of a field key (the low three bits).
const (
	wireVarint = 0
	wireBytes  = 2
)

// MaxFieldLen bounds a single length-delimited field so a hostile length
// prefix cannot make a decoder allocate without limit.
const MaxFieldLen = 16 << 20

// Writer appends tag-ordered fields to a buffer. It is the canonical encoder
// for events and is reused by the state machine for commands and snapshots.
// Zero values are skipped so each value has exactly one encoding; callers
// must write tags in ascending order.
type Writer struct {
	buf []byte
}

// NewWriter returns a Writer that appends to buf[:0].
func NewWriter(buf []byte) *Writer { return &Writer{buf: buf[:0]} }

// Bytes returns the encoded buffer.
func (w *Writer) Bytes() []byte { return w.buf }

// Len is the number of bytes written so far.
func (w *Writer) Len() int { return len(w.buf) }

// Byte appends one raw byte (used for the leading version byte).
func (w *Writer) Byte(b byte) { w.buf = append(w.buf, b) }

func (w *Writer) key(tag uint32, wt uint8) {
	w.buf = binary.AppendUvarint(w.buf, uint64(tag)<<3|uint64(wt))
}

// Uint writes a varint field, omitted when v is zero.
func (w *Writer) Uint(tag uint32, v uint64) {
	if v == 0 {
		return
	}
	w.key(tag, wireVarint)
	w.buf = binary.AppendUvarint(w.buf, v)
}

// Int writes a signed varint field (zig-zag), omitted when v is zero.
func (w *Writer) Int(tag uint32, v int64) {
	if v == 0 {
		return
	}
	w.key(tag, wireVarint)
	w.buf = binary.AppendUvarint(w.buf, uint64(v<<1)^uint64(v>>63))
}

// Bool writes 1 for true and nothing for false.
func (w *Writer) Bool(tag uint32, v bool) {
	if v {
		w.Uint(tag, 1)
	}
}

// Raw writes a length-delimited field, omitted when empty.
func (w *Writer) Raw(tag uint32, b []byte) {
	if len(b) == 0 {
		return
	}
	w.key(tag, wireBytes)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(b)))
	w.buf = append(w.buf, b...)
}

// String writes a length-delimited string field, omitted when empty.
func (w *Writer) String(tag uint32, s string) {
	if s == "" {
		return
	}
	w.key(tag, wireBytes)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

// Strings writes one field per element; empty elements are written too so
// that positions are kept, which keeps list encodings unambiguous.
func (w *Writer) Strings(tag uint32, ss []string) {
	for _, s := range ss {
		w.key(tag, wireBytes)
		w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
		w.buf = append(w.buf, s...)
	}
}

// Hash writes a 32-byte digest field, omitted when zero.
func (w *Writer) Hash(tag uint32, h Hash) {
	if h.IsZero() {
		return
	}
	w.Raw(tag, h[:])
}

// Field is one decoded field.
type Field struct {
	Tag  uint32
	Wire uint8
	Uint uint64 // for wire type 0
	Data []byte // for wire type 2; aliases the input
}

// Int decodes a zig-zag varint field value.
func (f Field) Int() int64 { return int64(f.Uint>>1) ^ -int64(f.Uint&1) }

// Reader iterates the fields of an encoding in order, enforcing canonical
// form: ascending tags (repeats allowed only for length-delimited fields),
// minimal varints, no zero-valued fields and bounded lengths.
type Reader struct {
	data    []byte
	off     int
	lastTag uint32
	lastWT  uint8
	err     error
}

// NewReader reads fields from data.
func NewReader(data []byte) *Reader { return &Reader{data: data} }

// Offset is the position of the next unread byte.
func (r *Reader) Offset() int { return r.off }

// Err returns the first decoding error.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(format string, args ...any) bool {
	r.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.off, fmt.Sprintf(format, args...))
	return false
}

// uvarint reads one minimal uvarint. Next reads one-byte varints (most
// keys and lengths) itself and calls this for the rest.
func (r *Reader) uvarint() (uint64, bool) {
	p := r.data[r.off:]
	switch {
	case len(p) > 0 && p[0] < 0x80:
		r.off++
		return uint64(p[0]), true
	case len(p) > 1 && p[1] < 0x80:
		// Two bytes (keys of tags 16 and up, lengths below 16 KiB):
		// minimal unless the last byte is zero.
		if p[1] == 0 {
			return 0, r.fail("non-minimal varint")
		}
		r.off += 2
		return uint64(p[0]&0x7f) | uint64(p[1])<<7, true
	}
	v, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, r.fail("bad varint")
	}
	// Reject non-minimal encodings: they would give one value two encodings.
	if n > 1 && p[n-1] == 0 {
		return 0, r.fail("non-minimal varint")
	}
	r.off += n
	return v, true
}

// Next decodes the next field into f. It returns false at the end of input
// or on error (check Err).
//
// Most fields of an event are a one- or two-byte key with a tag above the
// previous one (or repeating a length-delimited one), then either a length
// below 128 or a varint value. Next
// reads those in one pass with local copies of the offset, and hands
// everything else (repeats, longer keys and lengths, and all input it
// would reject) to next, which starts again at the same offset: the fast
// path changes nothing until it has accepted the whole field, so both
// paths accept exactly the same fields.
func (r *Reader) Next(f *Field) bool {
	data, off := r.data, r.off
	if r.err != nil || off+1 >= len(data) {
		return r.next(f)
	}
	k := uint32(data[off])
	if k < 0x80 {
		off++
	} else if c := data[off+1]; c < 0x80 && c != 0 {
		k = k&0x7f | uint32(c)<<7
		off += 2
	} else {
		return r.next(f)
	}
	tag, wt := k>>3, uint8(k&7)
	if tag < r.lastTag || tag == r.lastTag && (wt != wireBytes || r.lastWT != wireBytes) || off >= len(data) {
		// tag 0, a repeated scalar, an out-of-order tag, or a key at the
		// very end.
		return r.next(f)
	}
	switch wt {
	case wireBytes:
		n := int(data[off])
		off++
		if n >= 0x80 || n > len(data)-off {
			return r.next(f)
		}
		f.Tag, f.Wire, f.Uint, f.Data = tag, wt, 0, data[off:off+n]
		off += n
	case wireVarint:
		v, m := uint64(data[off]), 1
		if v >= 0x80 || v == 0 {
			if v, m = fastUvarint(data[off:]); m == 0 {
				return r.next(f)
			}
		}
		f.Tag, f.Wire, f.Uint, f.Data = tag, wt, v, nil
		off += m
	default:
		return r.next(f)
	}
	r.off, r.lastTag, r.lastWT = off, tag, wt
	return true
}

// fastUvarint reads a minimal, non-zero uvarint of up to nine bytes from
// the start of p and returns it with its length, or a length of 0 for
// anything else (a zero value, a non-minimal or truncated encoding, or one
// of ten bytes), which the caller leaves to the checking path. With eight
// bytes to read it finds the end and gathers the 7-bit groups in a few
// word operations instead of a loop (event timestamps take nine bytes).
func fastUvarint(p []byte) (uint64, int) {
	if len(p) < 8 {
		var v uint64
		for i, b := range p {
			if b < 0x80 {
				if b == 0 {
					// A zero value, or a non-minimal encoding.
					return 0, 0
				}
				return v | uint64(b)<<(7*i), i + 1
			}
			v |= uint64(b&0x7f) << (7 * i)
		}
		return 0, 0
	}
	x := binary.LittleEndian.Uint64(p)
	ends := ^x & 0x8080808080808080 // the high bit of each byte that ends a varint
	if ends == 0 {
		// Eight continuation bytes: a ninth, non-zero, ends it.
		if len(p) < 9 || p[8] >= 0x80 || p[8] == 0 {
			return 0, 0
		}
		return gather7(x) | uint64(p[8])<<56, 9
	}
	n := bits.TrailingZeros64(ends)/8 + 1
	if p[n-1] == 0 {
		return 0, 0
	}
	return gather7(x & (1<<(8*n) - 1)), n
}

// gather7 packs the low seven bits of each byte of x, least significant
// byte first, into 56 bits.
func gather7(x uint64) uint64 {
	x &= 0x7f7f7f7f7f7f7f7f
	x = x&0x007f007f007f007f | x&0x7f007f007f007f00>>1
	x = x&0x00003fff00003fff | x&0x3fff00003fff0000>>2
	return x&0x000000000fffffff | x&0x0fffffff00000000>>4
}

// next is Next's checking path: every field the fast path does not take.
func (r *Reader) next(f *Field) bool {
	if r.err != nil || r.off >= len(r.data) {
		return false
	}
	k := uint64(r.data[r.off])
	if k < 0x80 {
		r.off++
	} else if v, ok := r.uvarint(); ok {
		k = v
	} else {
		return false
	}
	if k>>3 > 1<<24 {
		return r.fail("tag %d out of range", k>>3)
	}
	tag, wt := uint32(k>>3), uint8(k&7)
	if tag == 0 {
		return r.fail("tag 0")
	}
	switch {
	case tag < r.lastTag:
		return r.fail("tag %d after tag %d", tag, r.lastTag)
	case tag == r.lastTag && (wt != wireBytes || r.lastWT != wireBytes):
		return r.fail("repeated scalar tag %d", tag)
	}
	r.lastTag, r.lastWT = tag, wt
	f.Tag, f.Wire, f.Uint, f.Data = tag, wt, 0, nil
	switch wt {
	case wireVarint:
		v, ok := r.uvarint()
		if !ok {
			return false
		}
		if v == 0 {
			return r.fail("zero value written for tag %d", tag)
		}
		f.Uint = v
	case wireBytes:
		var n uint64
		if r.off < len(r.data) && r.data[r.off] < 0x80 {
			n = uint64(r.data[r.off])
			r.off++
		} else if v, ok := r.uvarint(); ok {
			n = v
		} else {
			return false
		}
		if n > MaxFieldLen || n > uint64(len(r.data)-r.off) {
			return r.fail("field %d length %d exceeds input", tag, n)
		}
		f.Data = r.data[r.off : r.off+int(n)]
		r.off += int(n)
	default:
		return r.fail("unknown wire type %d for tag %d", wt, tag)
	}
	return true
}

// Expect checks that field f has wire type wt; it records an error otherwise.
func (r *Reader) Expect(f *Field, wt uint8) bool {
	if f.Wire != wt {
		return r.fail("tag %d has wire type %d, want %d", f.Tag, f.Wire, wt)
	}
	return true
}

// Failf records a semantic decoding error (for example an empty element
// where one is not allowed) and stops iteration.
func (r *Reader) Failf(format string, args ...any) { r.fail(format, args...) }

// WireVarint and WireBytes are exported for decoders outside this package.
const (
	WireVarint = wireVarint
	WireBytes  = wireBytes
)
