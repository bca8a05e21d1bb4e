package fsm

import (
	"fmt"
	"sort"

	"github.com/writ-dev/writ/events"
)

// The effect ledger, preauthorization consumption and quota windows in a
// snapshot: one nested record per entry, in key order.

// sortedKeys returns a map's keys in order (never iterate a map into
// output).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// encodeUsage encodes one usage record; fields a kind does not use are
// zero and so omitted.
func encodeUsage(buf []byte, key string, count, amount, bytes uint64, start, until int64) []byte {
	w := events.NewWriter(buf)
	w.String(utKey, key)
	w.Uint(utCount, count)
	w.Uint(utAmount, amount)
	w.Uint(utBytes, bytes)
	w.Int(utStart, start)
	w.Int(utUntil, until)
	return w.Bytes()
}

// usageRecord is a decoded effect-ledger entry, preauthorization
// consumption record or quota window.
type usageRecord struct {
	key                  string
	count, amount, bytes uint64
	start, until         int64
}

func decodeUsage(b []byte) (usageRecord, error) {
	var u usageRecord
	r := events.NewReader(b)
	d := fieldDecoder{}
	f := &d.f
	for d.err == nil && r.Next(f) {
		switch f.Tag {
		case utKey:
			d.str(&u.key)
		case utCount:
			d.uint(&u.count)
		case utAmount:
			d.uint(&u.amount)
		case utBytes:
			d.uint(&u.bytes)
		case utStart:
			d.int(&u.start)
		case utUntil:
			d.int(&u.until)
		default:
			d.err = fmt.Errorf("unknown usage record tag %d", f.Tag)
		}
	}
	err := d.done(r)
	if err == nil && (u.key == "" || u.count == 0) {
		err = fmt.Errorf("usage record without a key or a count")
	}
	return u, err
}

// restoreUsage adds a decoded usage record of the kind tag names. Records
// of one kind must be in strictly ascending key order (as Snapshot writes
// them), and only the fields of that kind may be set.
func (s *State) restoreUsage(tag uint32, u usageRecord, last map[uint32]string) error {
	if prev, ok := last[tag]; ok && u.key <= prev {
		return fmt.Errorf("usage record %q is out of order", u.key)
	}
	switch tag {
	case stLedger:
		if u.amount != 0 || u.bytes != 0 || u.start != 0 {
			return fmt.Errorf("ledger entry %q carries quota fields", u.key)
		}
		e := &ledgerEntry{Key: u.key, Count: u.count, Until: u.until}
		s.ledger[u.key] = e
		s.expiry = append(s.expiry, expiryItem{At: u.until, Ord: expireLedger, Ref: e})
	case stPreauth:
		if u.bytes != 0 || u.start != 0 {
			return fmt.Errorf("preauthorization record %q carries quota fields", u.key)
		}
		p := &preauthUse{ID: u.key, Uses: u.count, Amount: u.amount, Until: u.until}
		s.preauth[u.key] = p
		s.expiry = append(s.expiry, expiryItem{At: u.until, Ord: expirePreauth, Ref: p})
	case stQuota:
		if u.until <= u.start {
			return fmt.Errorf("quota window %q ends before it starts", u.key)
		}
		q := &quotaWindow{Key: u.key, Start: u.start, Requests: u.count, Amount: u.amount, Bytes: u.bytes, Until: u.until}
		s.quota[u.key] = q
		s.expiry = append(s.expiry, expiryItem{At: u.until, Ord: expireQuota, Ref: q})
	}
	return nil
}
