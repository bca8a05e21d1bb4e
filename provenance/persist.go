package provenance

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Binary format, version 2 (written), all integers unsigned varints unless
// sized:
//
//	"WPRV" version(1 byte)
//	maxBytes windowSize overlap seed(8, LE) nextID nSources
//	per source (sorted by id):
//	  id channel owner (len-prefixed strings) scope(1) authority(1) digest(32)
//	  nOrigins {origin} nCounters {source counter} evicted
//	  nWindows {id flags(1: 1 first, 2 last) len data}   (oldest first)
//	nSegments, per segment (oldest first):
//	  nWindows {id-delta len}   (ids ascending across segments, evicted included)
//	  bits(1) nStop stop(12*nStop: hash LE, count LE; by hash)
//	  nPostings dir(4*((1<<bits)+1)) tags(nPostings) positions(4*nPostings)
//	nBlocks, per block:
//	  used nRanges {window-id lo hi} filter(2048)
//	version 3 only: nFieldSources, per source (oldest first):
//	  id nLeaves {pointer normalized-value}   (fields.go)
//	crc32-IEEE of everything before it (4 bytes, big endian)
//
// Windows are stored normalized, and both indexes are stored as they are
// kept in memory (see Registry, index.go and filter.go), so loading only
// checks them: no gram is hashed. Loading checks the structure fully
// (every offset and length in range, every live window indexed by one
// segment and covered by filter ranges); what it cannot check cheaply is
// that each posting and filter bit agrees with the window bytes. Matching
// checks every posting against the bytes, so a disagreeing index can lose
// matches but not invent them; the checksum guards against accidents, and
// the file is as trusted as the windows it holds.
//
// Version 3 is version 2 with the fields of structured results; it is
// written only when some source has fields, so a registry without them
// stays readable by builds that know version 2 alone.
//
// Version 1 (read only) has no seed, ids, flags or indexes (after evicted:
// nWindows {len data}); the indexes are rebuilt on load, and a window
// edge is taken as a content edge unless the neighbouring window of the
// same source continues it (a full window whose last Overlap bytes the
// next window starts with).
const (
	persistMagic   = "WPRV"
	persistVersion = 2
	// persistFields is the version written when sources have fields.
	persistFields = 3
	// MaxFileBytes bounds what UnmarshalBinary and LoadFile accept.
	MaxFileBytes = 4 << 30
)

var errCorrupt = errors.New("provenance: corrupt registry encoding")

// MarshalBinary encodes the registry.
func (r *Registry) MarshalBinary() ([]byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var buf bytes.Buffer
	buf.Grow(r.sizeHint())
	if err := r.encode(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (r *Registry) sizeHint() int {
	n := 64 + int(r.total)
	for _, s := range r.sources {
		n += 64 + len(s.desc.ID) + len(s.desc.Channel) + len(s.desc.Owner) + 12*len(s.windows)
		for _, o := range s.desc.Origins {
			n += 4 + len(o)
		}
		for _, oc := range s.desc.OriginCounters {
			n += 14 + len(oc.Source)
		}
	}
	for _, s := range r.segs {
		n += 16 + 10*len(s.ids) + len(s.stop) + len(s.dir) + len(s.tags) + len(s.pos)
	}
	for _, b := range r.blocks {
		n += 8 + filterBytes + 12*len(b.ranges)
	}
	return n
}

type encoder struct {
	w   *bufio.Writer
	crc hash.Hash32
	tmp [binary.MaxVarintLen64]byte
}

func (e *encoder) uvarint(v uint64) {
	_, _ = e.w.Write(e.tmp[:binary.PutUvarint(e.tmp[:], v)])
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	_, _ = e.w.WriteString(s)
}

// encode writes the registry to out; r.mu must be held.
func (r *Registry) encode(out io.Writer) error {
	e := &encoder{crc: crc32.NewIEEE()}
	e.w = bufio.NewWriterSize(io.MultiWriter(out, e.crc), 256<<10)
	w := e.w
	_, _ = w.WriteString(persistMagic)
	version := byte(persistVersion)
	if len(r.fieldOrder) > 0 {
		version = persistFields
	}
	_ = w.WriteByte(version)
	e.uvarint(uint64(r.opt.MaxBytes))
	e.uvarint(uint64(r.opt.WindowSize))
	e.uvarint(uint64(r.opt.Overlap))
	binary.LittleEndian.PutUint64(e.tmp[:], r.seed)
	_, _ = w.Write(e.tmp[:8])
	e.uvarint(r.nextID)
	ids := sortedIDs(r.sources)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		s := r.sources[id]
		d := s.desc
		e.str(d.ID)
		e.str(string(d.Channel))
		e.str(d.Owner)
		_ = w.WriteByte(byte(d.Scope))
		_ = w.WriteByte(byte(d.Authority))
		_, _ = w.Write(d.ContentDigest[:])
		e.uvarint(uint64(len(d.Origins)))
		for _, o := range d.Origins {
			e.str(o)
		}
		e.uvarint(uint64(len(d.OriginCounters)))
		for _, oc := range d.OriginCounters {
			e.str(oc.Source)
			e.uvarint(oc.Counter)
		}
		e.uvarint(uint64(s.evicted))
		e.uvarint(uint64(len(s.windows)))
		for _, win := range s.windows {
			e.uvarint(win.id)
			var flags byte
			if win.first {
				flags |= 1
			}
			if win.last {
				flags |= 2
			}
			_ = w.WriteByte(flags)
			e.uvarint(uint64(len(win.data)))
			_, _ = w.Write(win.data)
		}
	}
	e.uvarint(uint64(len(r.segs)))
	prev := uint64(0) // ids ascend across segments
	for _, s := range r.segs {
		e.uvarint(uint64(len(s.ids)))
		for i, id := range s.ids {
			e.uvarint(id - prev)
			e.uvarint(uint64(s.starts[i+1] - s.starts[i]))
			prev = id
		}
		_ = w.WriteByte(s.bits)
		e.uvarint(uint64(len(s.stop) / stopEntrySize))
		_, _ = w.Write(s.stop)
		e.uvarint(uint64(s.npost()))
		_, _ = w.Write(s.dir)
		_, _ = w.Write(s.tags)
		_, _ = w.Write(s.pos)
	}
	nb := 0
	for _, b := range r.blocks {
		if !b.gone && b.live > 0 {
			nb++
		}
	}
	e.uvarint(uint64(nb))
	for _, b := range r.blocks {
		if b.gone || b.live == 0 {
			continue
		}
		e.uvarint(uint64(b.used))
		n := 0
		for _, rg := range b.ranges {
			if !rg.w.dead {
				n++
			}
		}
		e.uvarint(uint64(n))
		for _, rg := range b.ranges {
			if !rg.w.dead {
				e.uvarint(rg.w.id)
				e.uvarint(uint64(rg.lo))
				e.uvarint(uint64(rg.hi))
			}
		}
		_, _ = w.Write(b.filt)
	}
	if version == persistFields {
		e.uvarint(uint64(len(r.fieldOrder)))
		for _, s := range r.fieldOrder {
			e.str(s.desc.ID)
			e.uvarint(uint64(len(s.leaves)))
			for _, l := range s.leaves {
				e.str(l.ptr)
				e.uvarint(uint64(len(l.norm)))
				_, _ = w.Write(l.norm)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := out.Write(binary.BigEndian.AppendUint32(nil, e.crc.Sum32()))
	return err
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

// bytes returns the next n bytes, aliasing the input.
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

func (d *decoder) byte() byte {
	b := d.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *decoder) str() string {
	n := d.uvarint(maxIDLen)
	return string(d.bytes(n))
}

// count reads a count of items of at least minSize encoded bytes each.
func (d *decoder) count(minSize int) uint64 {
	return d.uvarint(uint64(len(d.b) / minSize))
}

// UnmarshalBinary replaces the registry's contents with the encoding in
// data (version 2, or version 1 whose indexes it rebuilds). It rejects
// unknown versions, bad checksums, out-of-range fields and contents
// exceeding the encoded bound; on error the registry is unchanged.
func (r *Registry) UnmarshalBinary(data []byte) error {
	if int64(len(data)) > MaxFileBytes {
		return fmt.Errorf("provenance: registry encoding too large (%d bytes)", len(data))
	}
	nr, err := decodeRegistry(bytes.Clone(data))
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opt, r.seed, r.sources, r.total, r.nextID = nr.opt, nr.seed, nr.sources, nr.total, nr.nextID
	r.segs, r.blocks, r.pressured, r.repack = nr.segs, nr.blocks, nr.pressured, nil
	r.byValue, r.fieldBytes, r.fieldOrder = nr.byValue, nr.fieldBytes, nr.fieldOrder
	return nil
}

// decodeRegistry decodes data, which the result may alias and modify.
func decodeRegistry(data []byte) (*Registry, error) {
	if len(data) < len(persistMagic)+1+4 || string(data[:4]) != persistMagic {
		return nil, errCorrupt
	}
	version := data[4]
	if version != 1 && version != persistVersion && version != persistFields {
		return nil, fmt.Errorf("provenance: unsupported registry version %d", version)
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, errCorrupt
	}
	d := &decoder{b: body[5:]}
	var opt Options
	opt.MaxBytes = int64(d.uvarint(hardMaxBytes))
	opt.WindowSize = int(d.uvarint(hardMaxBytes))
	opt.Overlap = int(d.uvarint(hardMaxBytes))
	if d.err != nil {
		return nil, d.err
	}
	if opt.withDefaults() != opt {
		return nil, fmt.Errorf("provenance: registry options out of range: %+v", opt)
	}
	var nr *Registry
	var err error
	if version == 1 {
		nr, err = decodeV1(d, opt)
	} else {
		nr, err = decodeV2(d, opt)
		if err == nil && version == persistFields {
			err = d.fields(nr)
		}
	}
	if err != nil {
		return nil, err
	}
	if len(d.b) != 0 {
		return nil, errCorrupt
	}
	for _, id := range sortedIDs(nr.sources) {
		if nr.sources[id].evicted > 0 {
			nr.pressured = append(nr.pressured, id)
		}
	}
	return nr, nil
}

// fields decodes the fields section of version 3 into nr: each source
// named once, existing, with 1..MaxResultLeaves leaves within the bounds
// RegisterResult keeps.
func (d *decoder) fields(nr *Registry) error {
	n := d.count(3)
	seen := map[string]bool{}
	for i := uint64(0); i < n && d.err == nil; i++ {
		s := nr.sources[d.str()]
		nl := d.uvarint(MaxResultLeaves)
		if d.err != nil {
			break
		}
		if s == nil || seen[s.desc.ID] || nl == 0 {
			return errCorrupt
		}
		seen[s.desc.ID] = true
		leaves := make([]fieldLeaf, 0, nl)
		total := 0
		for j := uint64(0); j < nl && d.err == nil; j++ {
			ptr := d.str()
			norm := d.bytes(d.uvarint(MaxLeafBytes * 4))
			if d.err != nil {
				break
			}
			if ptr == "" || len(ptr) > maxIDLen || len(norm) == 0 {
				return errCorrupt
			}
			if total += len(norm); total > maxResultFieldBytes {
				return errCorrupt
			}
			leaves = append(leaves, fieldLeaf{ptr: ptr, norm: norm})
		}
		if d.err != nil {
			break
		}
		nr.addLeavesLocked(s, leaves)
	}
	return d.err
}

// source decodes a source header up to and including evicted. prev is
// the previous source's id: ids are strictly ascending.
func (d *decoder) source(first bool, prev string) (*source, error) {
	var desc Descriptor
	desc.ID = d.str()
	desc.Channel = Channel(d.str())
	desc.Owner = d.str()
	hdr := d.bytes(2 + 32)
	if d.err != nil {
		return nil, d.err
	}
	desc.Scope, desc.Authority = Scope(hdr[0]), Level(hdr[1])
	copy(desc.ContentDigest[:], hdr[2:])
	if desc.ID == "" || (!first && desc.ID <= prev) || !desc.Authority.Valid() || desc.Scope > ScopeSession {
		return nil, errCorrupt
	}
	nOrig := d.count(1)
	for j := uint64(0); j < nOrig && d.err == nil; j++ {
		desc.Origins = append(desc.Origins, d.str())
	}
	nCnt := d.count(2)
	for j := uint64(0); j < nCnt && d.err == nil; j++ {
		src := d.str()
		desc.OriginCounters = append(desc.OriginCounters, OriginCounter{Source: src, Counter: d.uvarint(math.MaxUint64)})
	}
	s := &source{desc: desc}
	s.evicted = int64(d.uvarint(1 << 62))
	return s, d.err
}

func decodeV1(d *decoder, opt Options) (*Registry, error) {
	nr := NewRegistry(opt)
	nSources := d.count(36)
	var all []*window
	var prev string
	for i := uint64(0); i < nSources && d.err == nil; i++ {
		s, err := d.source(i == 0, prev)
		if err != nil {
			return nil, err
		}
		prev = s.desc.ID
		nr.sources[s.desc.ID] = s
		nWin := d.count(2)
		for j := uint64(0); j < nWin && d.err == nil; j++ {
			n := d.uvarint(uint64(opt.WindowSize))
			data := d.bytes(n)
			if d.err != nil {
				break
			}
			if n == 0 || nr.total+int64(n) > opt.MaxBytes {
				return nil, errCorrupt
			}
			w := &window{src: s, data: data}
			s.windows = append(s.windows, w)
			s.bytes += int64(n)
			nr.total += int64(n)
			all = append(all, w)
		}
		// Infer the content edges (see the format comment).
		cont := func(a, b *window) bool {
			return len(a.data) == opt.WindowSize && len(b.data) >= opt.Overlap &&
				bytes.Equal(a.data[len(a.data)-opt.Overlap:], b.data[:opt.Overlap])
		}
		for j, w := range s.windows {
			w.first = j == 0 || !cont(s.windows[j-1], w)
			w.last = j == len(s.windows)-1 || !cont(w, s.windows[j+1])
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	for i, w := range all {
		w.id = uint64(i + 1)
	}
	nr.nextID = uint64(len(all))
	if len(all) > 0 {
		nr.segs = []*segment{buildSegment(all, nr.seed)}
		for _, w := range all {
			nr.filterWindow(w, 0, len(w.data))
		}
	}
	return nr, nil
}

func decodeV2(d *decoder, opt Options) (*Registry, error) {
	seedb := d.bytes(8)
	if d.err != nil {
		return nil, d.err
	}
	nr := newRegistry(opt, binary.LittleEndian.Uint64(seedb))
	nr.nextID = d.uvarint(math.MaxUint64 >> 1)
	nSources := d.count(36)
	wins := map[uint64]*window{}
	var prev string
	for i := uint64(0); i < nSources && d.err == nil; i++ {
		s, err := d.source(i == 0, prev)
		if err != nil {
			return nil, err
		}
		prev = s.desc.ID
		nr.sources[s.desc.ID] = s
		// Each window holds a byte of the bound and four of the input.
		nWin := d.uvarint(min(uint64(len(d.b)/4), uint64(opt.MaxBytes-nr.total)))
		wslab := make([]window, nWin)
		for j := uint64(0); j < nWin && d.err == nil; j++ {
			id := d.uvarint(nr.nextID)
			flags := d.byte()
			n := d.uvarint(uint64(opt.WindowSize))
			data := d.bytes(n)
			if d.err != nil {
				break
			}
			if id == 0 || wins[id] != nil || (j > 0 && id <= s.windows[j-1].id) || flags > 3 ||
				n == 0 || nr.total+int64(n) > opt.MaxBytes {
				return nil, errCorrupt
			}
			w := &wslab[j]
			*w = window{id: id, src: s, data: data, first: flags&1 != 0, last: flags&2 != 0}
			wins[id] = w
			s.windows = append(s.windows, w)
			s.bytes += int64(n)
			nr.total += int64(n)
		}
	}
	if d.err != nil {
		return nil, d.err
	}

	nSegs := d.count(8)
	var lastID uint64
	for i := uint64(0); i < nSegs && d.err == nil; i++ {
		s, err := d.segment(wins, opt, nr.nextID, &lastID)
		if err != nil {
			return nil, err
		}
		nr.segs = append(nr.segs, s)
	}
	if d.err != nil {
		return nil, d.err
	}

	nBlocks := d.count(filterBytes)
	slab := make([]fblock, nBlocks)
	type ref struct {
		w      *window
		b      *fblock
		lo, hi uint32
	}
	refs := make([]ref, 0, nBlocks+uint64(len(wins)))
	rslab := make([]frange, 0, cap(refs))
	for i := uint64(0); i < nBlocks && d.err == nil; i++ {
		b := &slab[i]
		b.used = int(d.uvarint(blockCap))
		nRanges := d.count(3)
		if nRanges == 0 {
			return nil, errCorrupt
		}
		first := len(rslab)
		for j := uint64(0); j < nRanges && d.err == nil; j++ {
			w := wins[d.uvarint(math.MaxUint64)]
			lo, hi := d.uvarint(math.MaxUint32), d.uvarint(math.MaxUint32)
			if d.err != nil {
				break
			}
			if w == nil || lo >= hi || hi > uint64(len(w.data)) || hi-lo > blockCap {
				return nil, errCorrupt
			}
			rslab = append(rslab, frange{w, uint32(lo), uint32(hi)})
			refs = append(refs, ref{w, b, uint32(lo), uint32(hi)})
			b.live += int(hi - lo)
		}
		b.ranges = rslab[first:len(rslab):len(rslab)]
		b.filt = d.bytes(filterBytes)
		if d.err != nil {
			break
		}
		if b.live > b.used {
			return nil, errCorrupt
		}
		nr.blocks = append(nr.blocks, b)
	}
	if d.err != nil {
		return nil, d.err
	}
	// Every live window is indexed by one segment and covered by a chain
	// of ranges overlapping by blockOverlap bytes.
	slices.SortFunc(refs, func(a, b ref) int {
		if a.w.id != b.w.id {
			return cmp.Compare(a.w.id, b.w.id)
		}
		return cmp.Compare(a.lo, b.lo)
	})
	bslab := make([]*fblock, len(refs))
	sslab := make([]int32, len(refs))
	covered := 0
	for i := 0; i < len(refs); {
		w := refs[i].w
		j := i
		for ; j < len(refs) && refs[j].w == w; j++ {
			rf := refs[j]
			if j == i && rf.lo != 0 || j > i && (refs[j-1].hi-refs[j-1].lo <= blockOverlap || rf.lo != refs[j-1].hi-blockOverlap) {
				return nil, errCorrupt
			}
			bslab[j], sslab[j] = rf.b, int32(rf.hi-rf.lo)
		}
		if int(refs[j-1].hi) != len(w.data) || w.seg == nil {
			return nil, errCorrupt
		}
		w.blocks, w.spans = bslab[i:j:j], sslab[i:j:j]
		covered++
		i = j
	}
	if covered != len(wins) {
		return nil, errCorrupt
	}
	return nr, nil
}

// segment decodes one gram-index segment; its window ids must be above
// *lastID, which it advances, and at most nextID.
func (d *decoder) segment(wins map[uint64]*window, opt Options, nextID uint64, lastID *uint64) (*segment, error) {
	n := d.count(2)
	if n == 0 {
		return nil, errCorrupt
	}
	c := min(n, 1<<12) // grown by append: n may exceed what the input holds
	s := &segment{ids: make([]uint64, 0, c), wins: make([]*window, 0, c), starts: make([]uint32, 1, c+1)}
	off := uint64(0)
	for i := uint64(0); i < n && d.err == nil; i++ {
		delta := d.uvarint(math.MaxUint64)
		size := d.uvarint(uint64(opt.WindowSize))
		if d.err != nil {
			break
		}
		id := *lastID + delta
		if delta == 0 || id < *lastID || id > nextID || size == 0 {
			return nil, errCorrupt
		}
		*lastID = id
		off += size
		if off >= stopFlag {
			return nil, errCorrupt
		}
		w := wins[id]
		if w != nil {
			if w.seg != nil || uint64(len(w.data)) != size {
				return nil, errCorrupt
			}
			w.seg = s
			s.live += int64(size)
		}
		s.ids = append(s.ids, id)
		s.wins = append(s.wins, w)
		s.starts = append(s.starts, uint32(off))
	}
	s.bits = d.byte()
	nStop := d.count(stopEntrySize)
	s.stop = d.bytes(nStop * stopEntrySize)
	nPost := d.count(5)
	if d.err != nil {
		return nil, d.err
	}
	if s.bits > maxTableBits {
		return nil, errCorrupt
	}
	nb := uint64(1) << s.bits
	s.dir = d.bytes(4 * (nb + 1))
	s.tags = d.bytes(nPost)
	s.pos = d.bytes(4 * nPost)
	if d.err != nil {
		return nil, d.err
	}
	for i := 1; i < int(nStop); i++ {
		if binary.LittleEndian.Uint64(s.stop[(i-1)*stopEntrySize:]) >= binary.LittleEndian.Uint64(s.stop[i*stopEntrySize:]) {
			return nil, errCorrupt
		}
	}
	prev := uint32(0)
	for b := uint64(0); b <= nb; b++ {
		v := le32(s.dir, b)
		if v < prev {
			return nil, errCorrupt
		}
		prev = v
	}
	if le32(s.dir, 0) != 0 || uint64(prev) != nPost {
		return nil, errCorrupt
	}
	s.index()
	return s, nil
}

// SaveFile writes the registry to path atomically: it writes a temporary
// file in the same directory, syncs it and renames it over path. Callers
// sharing the file between processes must serialize read-modify-write
// cycles themselves (e.g. with a lock file).
func SaveFile(path string, r *Registry) error {
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
	r.mu.RLock()
	err = r.encode(f)
	r.mu.RUnlock()
	if err != nil {
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
// maxSize bytes (MaxFileBytes if maxSize <= 0). The registry keeps the
// file's contents in one buffer, which its windows and indexes alias.
func LoadFile(path string, maxSize int64) (*Registry, error) {
	if maxSize <= 0 || maxSize > MaxFileBytes {
		maxSize = MaxFileBytes
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf []byte
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > maxSize {
			return nil, fmt.Errorf("provenance: %s exceeds %d bytes", path, maxSize)
		}
		// One read into a buffer of the right size; a file that grew
		// meanwhile is read on below.
		buf = make([]byte, fi.Size(), fi.Size()+1)
		if _, err := io.ReadFull(f, buf); err != nil {
			return nil, err
		}
	}
	rest, err := io.ReadAll(io.LimitReader(f, maxSize+1-int64(len(buf))))
	if err != nil {
		return nil, err
	}
	buf = append(buf, rest...)
	if int64(len(buf)) > maxSize {
		return nil, fmt.Errorf("provenance: %s exceeds %d bytes", path, maxSize)
	}
	return decodeRegistry(slices.Clip(buf))
}
