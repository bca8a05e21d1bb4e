package fsm

import (
	"container/heap"
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
	var f events.Field
	d := fieldDecoder{f: &f}
	for d.err == nil && r.Next(&f) {
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
	err := d.err
	if err == nil {
		err = r.Err()
	}
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
		s.ledger[u.key] = &ledgerEntry{Count: u.count, Until: u.until}
		heap.Push(&s.expiry, expiryItem{At: u.until, Kind: expireLedger, Key: u.key})
	case stPreauth:
		if u.bytes != 0 || u.start != 0 {
			return fmt.Errorf("preauthorization record %q carries quota fields", u.key)
		}
		s.preauth[u.key] = &preauthUse{Uses: u.count, Amount: u.amount, Until: u.until}
		heap.Push(&s.expiry, expiryItem{At: u.until, Kind: expirePreauth, Key: u.key})
	case stQuota:
		if u.until <= u.start {
			return fmt.Errorf("quota window %q ends before it starts", u.key)
		}
		s.quota[u.key] = &quotaWindow{Start: u.start, Requests: u.count, Amount: u.amount, Bytes: u.bytes, Until: u.until}
		heap.Push(&s.expiry, expiryItem{At: u.until, Kind: expireQuota, Key: u.key})
	}
	return nil
}
