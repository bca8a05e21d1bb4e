package projection

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/events"
)

// Event returns the receipt at seq, decoded.
func (d *DB) Event(seq uint64) (events.Event, error) {
	var e events.Event
	err := d.db.View(func(tx *bbolt.Tx) error {
		var err error
		e, err = eventIn(tx, seq)
		return err
	})
	return e, err
}

func eventIn(tx *bbolt.Tx, seq uint64) (events.Event, error) {
	b := tx.Bucket(bEvents)
	if b == nil {
		return events.Event{}, fmt.Errorf("%w: seq %d", ErrNotFound, seq)
	}
	raw := b.Get(u64(seq))
	if raw == nil {
		return events.Event{}, fmt.Errorf("%w: no receipt at seq %d in the projection", ErrNotFound, seq)
	}
	return events.Decode(raw)
}

// Grant returns the latest grant with this id.
func (d *DB) Grant(id string) (Grant, error) {
	var g *Grant
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bGrants)
		if b == nil {
			return nil
		}
		var err error
		_, g, err = latestGrant(b, id)
		return err
	})
	if err != nil {
		return Grant{}, err
	}
	if g == nil {
		return Grant{}, fmt.Errorf("%w: no grant %q in the projection", ErrNotFound, id)
	}
	return *g, nil
}

// Review returns the review with this id.
func (d *DB) Review(id string) (Review, error) {
	var r Review
	found := false
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bReviews)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &r)
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no review %q in the projection", ErrNotFound, id)
	}
	return r, err
}

// Source returns the source with this id.
func (d *DB) Source(id string) (Source, error) {
	var s Source
	found := false
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bSources)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &s)
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no source %q in the projection", ErrNotFound, id)
	}
	return s, err
}

// Grants returns the grants keep accepts, in grant id order.
func (d *DB) Grants(keep func(*Grant) bool) ([]Grant, error) { return scanBucket(d, bGrants, keep) }

// Grant sets for GrantsIn.
const (
	// SetOpen: grants permitted and not spent, or spent with no effect
	// reported (unverified), expired or not.
	SetOpen = "open"
	// SetContested: grants whose effects disagree.
	SetContested = "contested"
	// SetAnomalous: grants with effect receipts that did not count.
	SetAnomalous = "anomalous"
)

// GrantsIn returns the grants of one set that keep accepts, in grant id
// order, without reading the others.
func (d *DB) GrantsIn(set string, keep func(*Grant) bool) ([]Grant, error) {
	var out []Grant
	err := d.db.View(func(tx *bbolt.Tx) error {
		sb, gb := tx.Bucket([]byte(set)), tx.Bucket(bGrants)
		if sb == nil || gb == nil {
			return fmt.Errorf("projection: no grant set %q", set)
		}
		return sb.ForEach(func(k, _ []byte) error {
			var g Grant
			if err := json.Unmarshal(gb.Get(k), &g); err != nil {
				return err
			}
			if keep == nil || keep(&g) {
				out = append(out, g)
			}
			return nil
		})
	})
	return out, err
}

// Reviews returns the reviews keep accepts, in review id order.
func (d *DB) Reviews(keep func(*Review) bool) ([]Review, error) { return scanBucket(d, bReviews, keep) }

// scanBucket decodes every record of a bucket, in key order, and returns
// those keep accepts (all when keep is nil).
func scanBucket[T any](d *DB, bucket []byte, keep func(*T) bool) ([]T, error) {
	var out []T
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var r T
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if keep == nil || keep(&r) {
				out = append(out, r)
			}
			return nil
		})
	})
	return out, err
}

// Workers returns the fleet, in worker id order.
func (d *DB) Workers() ([]Worker, error) {
	var out []Worker
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bWorkerSum)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var w Worker
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			out = append(out, w)
			return nil
		})
	})
	return out, err
}

// Filter selects receipts. Zero fields match everything.
type Filter struct {
	Worker string
	Lane   string
	Kind   events.Kind
	Reason string
	Grant  string
	// Since: only receipts at or after this control-plane time.
	Since int64
	// Before: only receipts with a sequence number below this one (0: no
	// bound). A page of results ends at its oldest row; the next page
	// asks for receipts before that row's sequence number, so pages never
	// overlap or skip a row however many receipts arrive in between.
	Before uint64
	// Limit: at most this many, the latest (0: 500).
	Limit int
}

// Match reports whether e passes f (Lane compares with lane, the lane
// the receipt or its grant names).
func (f *Filter) Match(e *events.Event, lane string) bool {
	return (f.Worker == "" || e.Worker == f.Worker) &&
		(f.Lane == "" || lane == f.Lane) &&
		(f.Kind == 0 || e.Kind == f.Kind) &&
		(f.Reason == "" || e.Reason == f.Reason) &&
		(f.Grant == "" || e.GrantID == f.Grant) &&
		(f.Since == 0 || e.Time >= f.Since)
}

func (f *Filter) limit() int {
	if f.Limit <= 0 {
		return 500
	}
	return f.Limit
}

// Refusals returns the refusal rows f selects, newest first.
func (d *DB) Refusals(f Filter) ([]Row, error) {
	var out []Row
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bRefusals)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := lastBefore(c, nil, f.Before); k != nil && len(out) < f.limit(); k, v = c.Prev() {
			var r Row
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			e := events.Event{Worker: r.Worker, Kind: r.Kind, Reason: r.Reason, GrantID: r.GrantID, Time: r.Time}
			if f.Since != 0 && r.Time < f.Since {
				break // rows are in sequence, hence time, order
			}
			if f.Match(&e, r.Lane) {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// Timeline returns the receipts f selects, newest first, using the worker
// or lane index when f names one.
func (d *DB) Timeline(f Filter) ([]events.Event, error) {
	var out []events.Event
	err := d.db.View(func(tx *bbolt.Tx) error {
		evb := tx.Bucket(bEvents)
		if evb == nil {
			return nil
		}
		take := func(seq uint64, lane string) (bool, error) {
			e, err := events.Decode(evb.Get(u64(seq)))
			if err != nil {
				return false, err
			}
			if f.Since != 0 && e.Time < f.Since {
				return false, nil
			}
			if lane == "" {
				lane = laneOf(tx, &e)
			}
			if f.Match(&e, lane) {
				out = append(out, e)
			}
			return len(out) < f.limit(), nil
		}
		var idx *bbolt.Bucket
		var id, lane string
		switch {
		case f.Worker != "":
			idx, id = tx.Bucket(bWorkers), f.Worker
		case f.Lane != "":
			idx, id, lane = tx.Bucket(bLanes), f.Lane, f.Lane
		}
		if idx == nil {
			c := evb.Cursor()
			for k, _ := lastBefore(c, nil, f.Before); k != nil; k, _ = c.Prev() {
				if more, err := take(getU64(k), ""); err != nil || !more {
					return err
				}
			}
			return nil
		}
		return scanPrefixBefore(idx, id, f.Before, func(seq uint64, _ []byte) (bool, error) { return take(seq, lane) })
	})
	return out, err
}

// lastBefore positions c on the last key of the keys that start with
// prefix and end in a sequence number below before (0: any), and returns
// it; nil when there is none. It leaves the prefix check to the caller.
func lastBefore(c *bbolt.Cursor, prefix []byte, before uint64) ([]byte, []byte) {
	var k []byte
	if before == 0 {
		k, _ = c.Seek(append(slices.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
	} else {
		k, _ = c.Seek(append(slices.Clone(prefix), u64(before)...))
	}
	if k == nil {
		return c.Last()
	}
	return c.Prev()
}

// scanPrefixBefore walks the index keys id+0+seq with seq below before (0:
// any), newest first, until fn answers false.
func scanPrefixBefore(b *bbolt.Bucket, id string, before uint64, fn func(seq uint64, v []byte) (bool, error)) error {
	prefix := append([]byte(id), 0)
	c := b.Cursor()
	for k, v := lastBefore(c, prefix, before); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if len(k) != len(prefix)+8 {
			continue
		}
		more, err := fn(binary.BigEndian.Uint64(k[len(prefix):]), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// laneOf is the lane a receipt names, or its grant's.
func laneOf(tx *bbolt.Tx, e *events.Event) string {
	if e.Lane != "" || e.GrantID == "" {
		return e.Lane
	}
	_, g, err := latestGrant(tx.Bucket(bGrants), e.GrantID)
	if err != nil || g == nil {
		return ""
	}
	return g.Lane
}

// scanPrefix visits the entries id \0 seq of b, oldest first, until fn
// returns false or an error (scanPrefixBefore walks them newest first).
func scanPrefix(b *bbolt.Bucket, id string, fn func(seq uint64, v []byte) (bool, error)) error {
	prefix := append([]byte(id), 0)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != len(prefix)+8 {
			continue
		}
		more, err := fn(binary.BigEndian.Uint64(k[len(prefix):]), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Revocation is a counter a revoke receipt moved.
type Revocation struct {
	Seq   uint64 `json:"seq"`
	Key   string `json:"key"`
	Value uint64 `json:"value"`
}

// RevocationsAfter returns the revocations after seq that moved one of
// the counters away from the value given, and the revokes after seq that
// cancelled grant id.
func (d *DB) RevocationsAfter(seq uint64, bound []events.Counter, grantID string) (moved []Revocation, cancels []uint64, err error) {
	err = d.db.View(func(tx *bbolt.Tx) error {
		rb, cb := tx.Bucket(bRevokes), tx.Bucket(bCancels)
		if rb == nil || cb == nil {
			return nil
		}
		for _, c := range bound {
			if err := scanPrefix(rb, c.Key, func(s uint64, v []byte) (bool, error) {
				if s > seq && getU64(v) != c.Value {
					moved = append(moved, Revocation{Seq: s, Key: c.Key, Value: getU64(v)})
				}
				return true, nil
			}); err != nil {
				return err
			}
		}
		if grantID != "" {
			return scanPrefix(cb, grantID, func(s uint64, _ []byte) (bool, error) {
				if s > seq {
					cancels = append(cancels, s)
				}
				return true, nil
			})
		}
		return nil
	})
	slices.SortFunc(moved, func(a, b Revocation) int { return cmp.Compare(a.Seq, b.Seq) })
	return moved, cancels, err
}

// EpochsAfter returns the sequences of epoch receipts after seq.
func (d *DB) EpochsAfter(seq uint64) ([]uint64, error) {
	var out []uint64
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bEpochs)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, _ := c.Seek(u64(seq + 1)); k != nil; k, _ = c.Next() {
			out = append(out, getU64(k))
		}
		return nil
	})
	return out, err
}

// ReviewRef returns the review a caption ("<slug>_v<N>_review") or a keep
// token ("<slug>_v<N>_keep") names: the latest review that carried that
// caption.
func (d *DB) ReviewRef(ref string) (Review, error) {
	caption := ref
	if s, ok := strings.CutSuffix(ref, "_keep"); ok {
		caption = s + "_review"
	}
	var id []byte
	err := d.db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bCaptions); b != nil {
			id = bytes.Clone(b.Get([]byte(caption)))
		}
		return nil
	})
	if err != nil {
		return Review{}, err
	}
	if id == nil {
		return Review{}, fmt.Errorf("%w: no review captioned %q in the projection", ErrNotFound, caption)
	}
	return d.Review(string(id))
}

// Orphans returns the replies that bound to no review, in sequence order.
func (d *DB) Orphans() ([]Orphan, error) {
	var out []Orphan
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bOrphans)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var o Orphan
			if err := json.Unmarshal(v, &o); err != nil {
				return err
			}
			out = append(out, o)
			return nil
		})
	})
	return out, err
}
