package provenance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
)

// Binary format (version 1), all integers unsigned varints:
//
//	"WPRV" version(1 byte)
//	maxBytes windowSize overlap nSources
//	per source (sorted by id):
//	  id channel owner (len-prefixed strings) scope(1) authority(1) digest(32)
//	  nOrigins {origin} nCounters {source counter} evicted nWindows {len data}
//	crc32-IEEE of everything before it (4 bytes, big endian)
//
// Windows are stored already normalized; the gram index is rebuilt on load.
const (
	persistMagic   = "WPRV"
	persistVersion = 1
	// MaxFileBytes bounds what UnmarshalBinary and LoadFile accept.
	MaxFileBytes = hardMaxBytes + 64<<20
)

var errCorrupt = errors.New("provenance: corrupt registry encoding")

// MarshalBinary encodes the registry.
func (r *Registry) MarshalBinary() ([]byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var b []byte
	b = append(b, persistMagic...)
	b = append(b, persistVersion)
	b = binary.AppendUvarint(b, uint64(r.opt.MaxBytes))
	b = binary.AppendUvarint(b, uint64(r.opt.WindowSize))
	b = binary.AppendUvarint(b, uint64(r.opt.Overlap))
	ids := sortedIDs(r.sources)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, id := range ids {
		s := r.sources[id]
		d := s.desc
		str(d.ID)
		str(string(d.Channel))
		str(d.Owner)
		b = append(b, byte(d.Scope), byte(d.Authority))
		b = append(b, d.ContentDigest[:]...)
		b = binary.AppendUvarint(b, uint64(len(d.Origins)))
		for _, o := range d.Origins {
			str(o)
		}
		b = binary.AppendUvarint(b, uint64(len(d.OriginCounters)))
		for _, oc := range d.OriginCounters {
			str(oc.Source)
			b = binary.AppendUvarint(b, oc.Counter)
		}
		b = binary.AppendUvarint(b, uint64(s.evicted))
		b = binary.AppendUvarint(b, uint64(len(s.windows)))
		for _, w := range s.windows {
			b = binary.AppendUvarint(b, uint64(len(w.data)))
			b = append(b, w.data...)
		}
	}
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	return b, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string {
	n := d.uvarint(maxIDLen)
	return string(d.bytes(n))
}

// UnmarshalBinary replaces the registry's contents with the encoding in
// data. It rejects unknown versions, bad checksums, out-of-range fields and
// contents exceeding the encoded bound; on error the registry is unchanged.
func (r *Registry) UnmarshalBinary(data []byte) error {
	if len(data) > MaxFileBytes {
		return fmt.Errorf("provenance: registry encoding too large (%d bytes)", len(data))
	}
	if len(data) < len(persistMagic)+1+4 || string(data[:4]) != persistMagic {
		return errCorrupt
	}
	if data[4] != persistVersion {
		return fmt.Errorf("provenance: unsupported registry version %d", data[4])
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return errCorrupt
	}
	d := &decoder{b: body[5:]}
	var opt Options
	opt.MaxBytes = int64(d.uvarint(hardMaxBytes))
	opt.WindowSize = int(d.uvarint(hardMaxBytes))
	opt.Overlap = int(d.uvarint(hardMaxBytes))
	if d.err != nil {
		return d.err
	}
	if opt.withDefaults() != opt {
		return fmt.Errorf("provenance: registry options out of range: %+v", opt)
	}
	nr := NewRegistry(opt)
	nSources := d.uvarint(uint64(len(d.b)))
	var prev string
	for i := uint64(0); i < nSources && d.err == nil; i++ {
		var desc Descriptor
		desc.ID = d.str()
		desc.Channel = Channel(d.str())
		desc.Owner = d.str()
		hdr := d.bytes(2 + 32)
		if d.err != nil {
			break
		}
		desc.Scope, desc.Authority = Scope(hdr[0]), Level(hdr[1])
		copy(desc.ContentDigest[:], hdr[2:])
		if desc.ID == "" || (i > 0 && desc.ID <= prev) || !desc.Authority.Valid() || desc.Scope > ScopeSession {
			return errCorrupt
		}
		prev = desc.ID
		nOrig := d.uvarint(uint64(len(d.b)))
		for j := uint64(0); j < nOrig && d.err == nil; j++ {
			desc.Origins = append(desc.Origins, d.str())
		}
		nCnt := d.uvarint(uint64(len(d.b)))
		for j := uint64(0); j < nCnt && d.err == nil; j++ {
			src := d.str()
			desc.OriginCounters = append(desc.OriginCounters, OriginCounter{Source: src, Counter: d.uvarint(^uint64(0))})
		}
		s := &source{desc: desc}
		s.evicted = int64(d.uvarint(1 << 62))
		nWin := d.uvarint(uint64(len(d.b)))
		nr.sources[desc.ID] = s
		for j := uint64(0); j < nWin && d.err == nil; j++ {
			n := d.uvarint(uint64(opt.WindowSize))
			w := d.bytes(n)
			if d.err != nil {
				break
			}
			if n == 0 || nr.total+int64(n) > opt.MaxBytes {
				return errCorrupt
			}
			nr.addWindow(s, append([]byte(nil), w...))
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return errCorrupt
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opt, r.sources, r.index, r.total, r.nextID = nr.opt, nr.sources, nr.index, nr.total, nr.nextID
	r.live, r.dead, r.freq = nr.live, nr.dead, nr.freq
	return nil
}

// SaveFile writes the registry to path atomically: it writes a temporary
// file in the same directory, syncs it and renames it over path. Callers
// sharing the file between processes must serialize read-modify-write
// cycles themselves (e.g. with a lock file).
func SaveFile(path string, r *Registry) error {
	data, err := r.MarshalBinary()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// LoadFile reads a registry written by SaveFile, refusing files larger than
// maxSize bytes (MaxFileBytes if maxSize <= 0).
func LoadFile(path string, maxSize int64) (*Registry, error) {
	if maxSize <= 0 || maxSize > MaxFileBytes {
		maxSize = MaxFileBytes
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(f, maxSize+1))
	if err != nil {
		return nil, err
	}
	if n > maxSize {
		return nil, fmt.Errorf("provenance: %s exceeds %d bytes", path, maxSize)
	}
	r := NewRegistry(Options{})
	if err := r.UnmarshalBinary(buf.Bytes()); err != nil {
		return nil, err
	}
	return r, nil
}
