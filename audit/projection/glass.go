package projection

import (
	"cmp"
	"encoding/json"
	"slices"

	"go.etcd.io/bbolt"
)

// Case is one break-glass case, as its break_glass receipt recorded it:
// while it runs, an auditor may show the payloads of Worker's receipts.
type Case struct {
	ID        string `json:"case_id"`
	Scope     string `json:"scope"`
	Worker    string `json:"worker"`
	Actor     string `json:"actor"`
	Reason    string `json:"reason"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	Seq       uint64 `json:"seq"`
}

// Active reports whether the case runs at time now (unix ns).
func (c *Case) Active(now int64) bool { return now >= c.IssuedAt && now < c.ExpiresAt }

// Cases returns every break-glass case, newest first.
func (d *DB) Cases() ([]Case, error) {
	var out []Case
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bGlass)
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var c Case
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Case) int { return cmp.Compare(b.Seq, a.Seq) })
	return out, err
}

// ActiveCase returns a case that opens worker's payloads at time now,
// the one that runs longest, or false.
func (d *DB) ActiveCase(worker string, now int64) (Case, bool, error) {
	cs, err := d.Cases()
	var best Case
	found := false
	for _, c := range cs {
		if c.Worker == worker && c.Active(now) && (!found || c.ExpiresAt > best.ExpiresAt) {
			best, found = c, true
		}
	}
	return best, found, err
}

// View is one page an auditor showed with payloads under a case.
type View struct {
	Time   int64  `json:"time"`
	CaseID string `json:"case_id"`
	Worker string `json:"worker"`
	Path   string `json:"path"`
	Remote string `json:"remote,omitempty"`
}

// RecordView appends a page view to the file's local record (not part of
// the projection of the stream: IndexDigest skips it). It is durable
// before it returns, so a page is shown only once its view is recorded.
func (d *DB) RecordView(v View) error {
	if d.cfg.ReadOnly {
		return ErrReadOnly
	}
	return d.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bViews)
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		return putJSON(b, u64(n), &v)
	})
}

// Views returns the latest page views recorded, newest first.
func (d *DB) Views(limit int) ([]View, error) {
	var out []View
	err := d.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bViews)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil && len(out) < limit; k, v = c.Prev() {
			var w View
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			out = append(out, w)
		}
		return nil
	})
	return out, err
}
