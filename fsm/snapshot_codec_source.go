package fsm

import (
	"fmt"

	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/revocation"
)

// The source registry in a snapshot: one nested record per source, in id
// order (tag stSource). A snapshot written before the registry existed
// simply has no such records and restores with an empty registry; the
// snapshot version is unchanged because the format only gained a tag.

// Source record tags (append only).
const (
	srID = iota + 1
	srOwner
	srSession
	srChannel
	srScope
	srPath
	srTool
	srDigest
	srOrigin
	srModelMade
	srAuthority
	srCounter
	srAt
	srSeq
)

func encodeSource(buf []byte, r *source) []byte {
	w := events.NewWriter(buf)
	w.String(srID, r.ID)
	w.String(srOwner, r.Owner)
	w.String(srSession, r.Session)
	w.String(srChannel, r.Channel)
	w.String(srScope, r.Scope)
	w.String(srPath, r.Path)
	w.String(srTool, r.Tool)
	w.Hash(srDigest, r.Digest)
	w.Strings(srOrigin, r.Origins)
	w.Bool(srModelMade, r.ModelMade)
	// Levels are written +1, so that evidence (0) is not an omitted field.
	w.Uint(srAuthority, uint64(r.Authority)+1)
	for _, c := range r.Counters {
		writeCounter(w, srCounter, c)
	}
	w.Int(srAt, r.At)
	w.Uint(srSeq, r.Seq)
	return w.Bytes()
}

// decodeSource reads one source record, strictly: known tags, an id, an
// owner, a known authority level, a sequence, counters with valid keys in
// ascending order.
func decodeSource(b []byte) (*source, error) {
	r := &source{}
	rd := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	var lvl, modelMade uint64
	for d.err == nil && rd.Next(f) {
		switch f.Tag {
		case srID:
			d.str(&r.ID)
		case srOwner:
			d.str(&r.Owner)
		case srSession:
			d.str(&r.Session)
		case srChannel:
			d.str(&r.Channel)
		case srScope:
			d.str(&r.Scope)
		case srPath:
			d.str(&r.Path)
		case srTool:
			d.str(&r.Tool)
		case srDigest:
			d.hash(&r.Digest)
		case srOrigin:
			d.list(&r.Origins)
		case srModelMade:
			d.uint(&modelMade)
		case srAuthority:
			d.uint(&lvl)
		case srCounter:
			var c events.Counter
			if c, d.err = decodeCounter(f); d.err != nil {
				break
			}
			if _, _, d.err = revocation.ParseKey(c.Key); d.err != nil {
				break
			}
			if n := len(r.Counters); n > 0 && c.Key <= r.Counters[n-1].Key {
				d.err = fmt.Errorf("source counter %q is out of order", c.Key)
				break
			}
			r.Counters = append(r.Counters, c)
		case srAt:
			d.int(&r.At)
		case srSeq:
			d.uint(&r.Seq)
		default:
			d.err = fmt.Errorf("unknown source record tag %d", f.Tag)
		}
	}
	err := d.done(rd)
	switch {
	case err != nil:
	case r.ID == "" || r.Owner == "" || r.Seq == 0:
		err = fmt.Errorf("source record %q without an id, an owner or a sequence", r.ID)
	case lvl == 0 || !authority.Level(lvl-1).Valid():
		err = fmt.Errorf("source %q has authority %d", r.ID, lvl)
	case modelMade > 1:
		err = fmt.Errorf("source %q has model_made %d", r.ID, modelMade)
	}
	r.Authority, r.ModelMade = authority.Level(lvl-1), modelMade == 1
	return r, err
}
