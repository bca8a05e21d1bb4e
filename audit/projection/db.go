package projection

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/writ-dev/writ/audit"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
)

// Errors. Callers match them with errors.Is.
var (
	// ErrUnknownKind: a receipt of a kind this build does not know. The
	// projection stops before it; upgrade the auditor.
	ErrUnknownKind = errors.New("projection: unknown event kind")
	// ErrChain: a receipt that does not extend the projection (wrong
	// sequence or prev hash), or the stream's sequence disagrees with the
	// receipt's. The projection belongs to another stream, or the stream
	// was altered: rebuild it from sequence 1 and run 'auditor verify'.
	ErrChain = errors.New("projection: receipt does not extend the projection's chain")
	// ErrDecode: a receipt whose bytes are not a canonical event.
	ErrDecode = errors.New("projection: receipt does not decode")
	// ErrFold: the state machine refused to fold a receipt.
	ErrFold = errors.New("projection: receipt cannot be folded")
	// ErrLocked: another process holds the file for writing.
	ErrLocked = errors.New("projection: database is in use by another process")
	// ErrSchema: the file is not a projection this build can read.
	ErrSchema = errors.New("projection: unsupported database schema")
	// ErrReadOnly: a write on a DB opened read-only.
	ErrReadOnly = errors.New("projection: opened read-only")
	// ErrNotFound: no grant, review, route or receipt by that name.
	ErrNotFound = errors.New("projection: not found")
	// ErrBroken: an earlier commit failed; the in-memory state is ahead of
	// the file. Close and Open again.
	ErrBroken = errors.New("projection: an earlier commit failed; reopen the database")
)

// schemaVersion is written in the meta bucket; Open refuses any other.
const schemaVersion = 5

// Bucket names.
var (
	bMeta      = []byte("meta")
	bEvents    = []byte("events")    // seq -> raw receipt
	bGrants    = []byte("grants")    // grant id \0 permit seq -> Grant JSON
	bReviews   = []byte("reviews")   // review id -> Review JSON
	bSources   = []byte("sources")   // source id -> Source JSON
	bRefusals  = []byte("refusals")  // seq -> Row JSON
	bWorkers   = []byte("workers")   // worker \0 seq -> kind
	bLanes     = []byte("lanes")     // lane \0 seq -> kind
	bWorkerSum = []byte("fleet")     // worker -> Worker JSON
	bRevokes   = []byte("revokes")   // counter key \0 seq -> value
	bCancels   = []byte("cancels")   // grant id \0 seq -> nothing
	bEpochs    = []byte("epochs")    // seq -> epoch
	bOpen      = []byte("open")      // grant key -> nothing: permitted or unverified
	bContested = []byte("contested") // grant key -> nothing
	bAnomalous = []byte("anomalous") // grant key -> nothing: effects that did not count
	bGlass     = []byte("glass")     // case id \0 seq -> Case JSON
	bCaptions  = []byte("captions")  // review caption -> review id (the latest)
	bOrphans   = []byte("orphans")   // seq -> Orphan JSON: replies bound to nothing
	bRoutes    = []byte("routes")    // route name -> Route JSON
	indexes    = [][]byte{bEvents, bGrants, bReviews, bSources, bRefusals, bWorkers, bLanes, bWorkerSum, bRevokes, bCancels, bEpochs, bOpen, bContested, bAnomalous, bGlass, bCaptions, bOrphans, bRoutes}
	// bViews is the local record of pages shown under break-glass cases:
	// not folded from the stream, so not an index (IndexDigest skips it).
	bViews = []byte("views") // sequence -> View JSON
)

// Meta keys.
var (
	kSchema       = []byte("schema")
	kSeq          = []byte("seq")
	kHead         = []byte("head")
	kTime         = []byte("time")
	kState        = []byte("fsm")
	kDigest       = []byte("digest")
	kVerifiedFrom = []byte("verified_from")
	kViolation    = []byte("violation")
)

// Config configures a DB. DefaultConfig gives the defaults.
type Config struct {
	// Path of the bbolt file; created if absent (unless ReadOnly).
	Path string
	// ReadOnly opens the file for reading only, sharing it with other
	// readers; Apply fails with ErrReadOnly.
	ReadOnly bool
	// CommitEvery is how many receipts Apply gathers before it commits
	// them in one transaction (Flush commits the rest).
	CommitEvery int
	// LockTimeout bounds the wait for the file lock.
	LockTimeout time.Duration
}

// DefaultConfig returns a Config for path.
func DefaultConfig(path string) Config {
	return Config{Path: path, CommitEvery: 4096, LockTimeout: time.Second}
}

// Validate reports a Config that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("projection: a database path is required (--db PATH)")
	case c.CommitEvery <= 0:
		return errors.New("projection: CommitEvery must be positive")
	case c.LockTimeout <= 0:
		return errors.New("projection: LockTimeout must be positive")
	}
	return nil
}

// DB is an open projection. Apply and Flush are used from one goroutine;
// the read methods may be called from any goroutine at any time and see
// the last commit.
type DB struct {
	cfg Config
	db  *bbolt.DB

	// Writer state, owned by the goroutine that calls Apply.
	state    *fsm.State
	head     events.Chain
	lastTime int64
	ver      *audit.Verifier
	verFrom  uint64
	viol     *audit.Violation
	tx       *bbolt.Tx
	pending  int
	broken   bool
	observe  func(e *events.Event, newViolation *audit.Violation)
	// ev is the event each Apply decodes into (events.DecodeInto): no
	// event and no list is allocated per receipt. The fold, the checks,
	// the index and the observer keep none of its slices.
	ev events.Event
}

// SetObserver has fn called after every receipt Apply accepts, with the
// violation the checks found at that receipt (nil almost always). fn runs
// on the goroutine that calls Apply and must not keep e.
func (d *DB) SetObserver(fn func(e *events.Event, newViolation *audit.Violation)) { d.observe = fn }

// Open opens (or creates) the projection at cfg.Path and loads its head.
func Open(cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	bdb, err := bbolt.Open(cfg.Path, 0o600, &bbolt.Options{Timeout: cfg.LockTimeout, ReadOnly: cfg.ReadOnly})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (an 'auditor serve' or 'auditor project' holds it; stop it, or read through its web view)", ErrLocked, cfg.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("projection: opening %s: %w", cfg.Path, err)
	}
	d := &DB{cfg: cfg, db: bdb}
	if !cfg.ReadOnly {
		err = bdb.Update(func(tx *bbolt.Tx) error {
			m, err := tx.CreateBucketIfNotExists(bMeta)
			if err != nil {
				return err
			}
			for _, b := range append(indexes, bViews) {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			if m.Get(kSchema) == nil {
				return m.Put(kSchema, u64(schemaVersion))
			}
			return nil
		})
		if err != nil {
			bdb.Close()
			return nil, fmt.Errorf("projection: initialising %s: %w", cfg.Path, err)
		}
	}
	if err := d.load(); err != nil {
		bdb.Close()
		return nil, err
	}
	return d, nil
}

// load reads the committed head and, for a writer, the fsm state.
func (d *DB) load() error {
	return d.db.View(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			if d.cfg.ReadOnly {
				return fmt.Errorf("%w: %s holds no projection (run 'auditor project --db %s' first)", ErrSchema, d.cfg.Path, d.cfg.Path)
			}
			return ErrSchema
		}
		if v := getU64(m.Get(kSchema)); v != schemaVersion {
			return fmt.Errorf("%w: %s has schema %d, this auditor reads %d (rebuild it: remove the file and run 'auditor project')", ErrSchema, d.cfg.Path, v, schemaVersion)
		}
		d.head.Seq = getU64(m.Get(kSeq))
		copy(d.head.Head[:], m.Get(kHead))
		d.lastTime = int64(getU64(m.Get(kTime)))
		if b := m.Get(kViolation); b != nil {
			d.viol = new(audit.Violation)
			if err := json.Unmarshal(b, d.viol); err != nil {
				return fmt.Errorf("%w: violation record: %v", ErrSchema, err)
			}
		}
		if d.cfg.ReadOnly {
			return nil
		}
		if snap := m.Get(kState); snap != nil {
			s, err := fsm.Restore(snap)
			if err != nil {
				return fmt.Errorf("%w: the fsm snapshot does not restore (%v); remove the file and rebuild", ErrSchema, err)
			}
			d.state = s
		} else {
			d.state = fsm.New()
		}
		d.verFrom = d.head.Seq + 1
		d.ver = audit.NewVerifier(audit.Options{From: d.verFrom, NoProjection: true})
		return nil
	})
}

// Close commits what is pending and closes the file.
func (d *DB) Close() error {
	err := d.Flush()
	if d.tx != nil {
		_ = d.tx.Rollback()
		d.tx = nil
	}
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// Head is the sequence and hash of the last receipt applied (committed or
// pending). Catching up reads the stream from Head().Seq+1.
func (d *DB) Head() events.Chain { return d.head }

// Digest is the fsm state digest after the last receipt applied: the
// issuer's state_digest at the same sequence. Writers only; readers use
// Status.
func (d *DB) Digest() events.Hash {
	if d.state == nil {
		return events.Hash{}
	}
	return d.state.Digest()
}

// Apply decodes raw (the receipt at stream sequence streamSeq, 0 when
// there is none) and extends the projection with it. Errors wrap
// ErrDecode, ErrChain, ErrUnknownKind or ErrFold, and leave the file as
// it was before this receipt (earlier pending receipts are committed
// first).
func (d *DB) Apply(raw []byte, streamSeq uint64) error {
	if d.cfg.ReadOnly {
		return ErrReadOnly
	}
	if d.broken {
		return ErrBroken
	}
	e := &d.ev
	if err := events.DecodeInto(raw, e); err != nil {
		return d.stop(fmt.Errorf("%w: stream seq %d: %v", ErrDecode, streamSeq, err))
	}
	if streamSeq != 0 && e.Seq != streamSeq {
		return d.stop(fmt.Errorf("%w: stream seq %d holds event seq %d", ErrChain, streamSeq, e.Seq))
	}
	if e.Seq != d.head.Seq+1 || e.Prev != d.head.Head {
		return d.stop(fmt.Errorf("%w: seq %d (prev %s) does not follow the projection's head seq %d (%s): this file projects another stream, or the stream was altered; rebuild with a new --db and run 'auditor verify'",
			ErrChain, e.Seq, e.Prev.Short(), d.head.Seq, d.head.Head.Short()))
	}
	if !e.Kind.Known() {
		return d.stop(fmt.Errorf("%w: seq %d has kind %d, which this auditor does not know: upgrade the auditor; the projection stays at seq %d",
			ErrUnknownKind, e.Seq, uint16(e.Kind), d.head.Seq))
	}
	var found *audit.Violation
	if d.viol == nil && d.ver != nil {
		if err := d.ver.AddEventRef(e); err != nil {
			errors.As(err, &found)
			d.viol = found
		}
	}
	if err := d.begin(); err != nil {
		return err
	}
	// Fold first: a refused fold must leave nothing of this receipt.
	if err := fsm.EvolveRef(d.state, e); err != nil {
		d.broken = true // the state may be half-folded
		_ = d.tx.Rollback()
		d.tx = nil
		return fmt.Errorf("%w: seq %d: %v (nothing after seq %d was committed; reopen to resume)", ErrFold, e.Seq, err, d.head.Seq-uint64(d.pending))
	}
	if err := index(d.tx, e, raw); err != nil {
		d.broken = true
		_ = d.tx.Rollback()
		d.tx = nil
		return fmt.Errorf("projection: indexing seq %d: %w", e.Seq, err)
	}
	d.head = events.Chain{Seq: e.Seq, Head: e.Hash}
	d.lastTime = e.Time
	d.pending++
	if d.observe != nil {
		d.observe(e, found)
	}
	if d.pending >= d.cfg.CommitEvery {
		return d.Flush()
	}
	return nil
}

// stop commits what is pending and returns err.
func (d *DB) stop(err error) error {
	if ferr := d.Flush(); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

func (d *DB) begin() error {
	if d.tx != nil {
		return nil
	}
	tx, err := d.db.Begin(true)
	if err != nil {
		d.broken = true
		return fmt.Errorf("projection: %w", err)
	}
	d.tx = tx
	return nil
}

// Pending is the number of receipts applied but not yet committed.
func (d *DB) Pending() int { return d.pending }

// Flush commits the receipts applied since the last commit, with the fsm
// snapshot and the head.
func (d *DB) Flush() error {
	if d.tx == nil {
		return nil
	}
	tx := d.tx
	d.tx = nil
	m := tx.Bucket(bMeta)
	digest := d.state.Digest()
	err := errors.Join(
		m.Put(kSeq, u64(d.head.Seq)),
		m.Put(kHead, d.head.Head[:]),
		m.Put(kTime, u64(uint64(d.lastTime))),
		m.Put(kState, d.state.Snapshot()),
		m.Put(kDigest, digest[:]),
		m.Put(kVerifiedFrom, u64(d.verFrom)),
	)
	if err == nil && d.viol != nil {
		b, _ := json.Marshal(d.viol)
		err = m.Put(kViolation, b)
	}
	if err != nil {
		_ = tx.Rollback()
		d.broken = true
		return fmt.Errorf("projection: commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		d.broken = true
		return fmt.Errorf("projection: commit: %w", err)
	}
	d.pending = 0
	return nil
}

// Status is the committed head and verification status.
type Status struct {
	Path string `json:"path"`
	// Seq and Head: the last committed receipt.
	Seq  uint64      `json:"seq"`
	Head events.Hash `json:"head"`
	// Time: its control-plane time.
	Time int64 `json:"time"`
	// Digest: the fsm state digest at Seq (the issuer's state_digest at
	// the same sequence).
	Digest events.Hash `json:"state_digest"`
	// VerifiedFrom: the sequence the current writer's invariant checks
	// started at (1: the whole stream was checked in one run).
	VerifiedFrom uint64 `json:"verified_from"`
	// Violation: the first violation found, or nil.
	Violation *audit.Violation `json:"violation"`
}

// Status reads the committed head.
func (d *DB) Status() (Status, error) {
	st := Status{Path: d.cfg.Path}
	err := d.db.View(func(tx *bbolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			return nil
		}
		st.Seq = getU64(m.Get(kSeq))
		copy(st.Head[:], m.Get(kHead))
		copy(st.Digest[:], m.Get(kDigest))
		st.Time = int64(getU64(m.Get(kTime)))
		st.VerifiedFrom = getU64(m.Get(kVerifiedFrom))
		if b := m.Get(kViolation); b != nil {
			st.Violation = new(audit.Violation)
			return json.Unmarshal(b, st.Violation)
		}
		return nil
	})
	return st, err
}

// IndexDigest hashes every index bucket, raw receipts included, in key
// order: equal for two projections of the same receipts however they were
// committed.
func (d *DB) IndexDigest() (events.Hash, error) {
	var out events.Hash
	err := d.db.View(func(tx *bbolt.Tx) error {
		h := sha256.New()
		for _, name := range indexes {
			b := tx.Bucket(name)
			if b == nil {
				continue
			}
			writeLen(h, name)
			if err := b.ForEach(func(k, v []byte) error {
				writeLen(h, k)
				writeLen(h, v)
				return nil
			}); err != nil {
				return err
			}
		}
		copy(out[:], h.Sum(nil))
		return nil
	})
	return out, err
}

func writeLen(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// key joins an id and a sequence: id \0 seq (big-endian), so a prefix scan
// on id \0 lists the id's entries in sequence order.
func key(id string, seq uint64) []byte {
	k := make([]byte, 0, len(id)+9)
	k = append(k, id...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}
