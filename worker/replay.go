package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// Replayed PreToolUse events. A grant request and its spend carry the
// call's idempotency key, so the issuer answers a repeated PreToolUse for
// the same tool_use_id with the original permit and attempt receipt. Left
// at that, a harness that delivers the event twice (a retried hook, a
// resumed session replaying its transcript) could run the tool twice on
// one grant. The hook therefore keeps, per call, a record of the permit it
// answered:
//
//	<state dir>/calls/<first 32 hex digits of sha256(idempotency key)>
//
// and holds the file's lock from reading the record until its answer is
// written. The rule:
//
//   - before the issuer is asked, the record is made to say "pending" and
//     made durable (fsync), while the request is in flight: from then on
//     a permit may be delivered, and a crash cannot take that back;
//   - a permit is written into the record ("answered", with the grant,
//     its digest and target) before it is written to the harness; if
//     writing the answer fails, the record is rewritten as "undelivered";
//     a refusal, a hold or an error empties the record again;
//   - a PreToolUse for a call whose record holds anything but nothing or
//     "undelivered" — "answered", "pending", an unreadable line — is
//     blocked (exit 2): the first permit may have been delivered and the
//     tool may have run, and the attempt is already recorded at the
//     issuer. A call the model means to run again is a new call with a
//     new tool_use_id;
//   - a call with no record, or one that says "undelivered", is answered
//     as usual (the issuer's answer is the original one: no second grant);
//   - a duplicate that arrives while the first hook is still deciding
//     waits for its lock and then sees its record;
//   - only permits are kept: a refused or held call may be asked again (an
//     approval may have come since).
//
// Only "pending" is synced, so the one fsync a call costs overlaps the
// issuer's round trip instead of following it. The later writes need no
// fsync of their own: each replaces the line in place and only ever turns
// a record that blocks into one that blocks too ("answered") or into one
// that lets a call be asked again ("undelivered", empty), so a crash that
// loses one of them leaves a record that blocks — which can only stop a
// call, never run one twice. A PostToolUse that finds no grant in the
// record asks the issuer for it. Likewise a hook that dies after
// "pending" leaves the repeat blocked. Records older than
// callRecordRetention are removed now and then by a hook that writes a
// new one.

// callRecordRetention is how long a call's record is kept.
const callRecordRetention = 7 * 24 * time.Hour

// Call record states.
const (
	callAnswered    = "answered"
	callUndelivered = "undelivered"
	callPending     = "pending"
)

// errReplayed: a call asked about again after its permit was answered.
var errReplayed = errors.New("this call was already permitted once")

// callRecord is one call's record, locked while the hook decides.
type callRecord struct {
	lock  *fileLock
	state string // as read: "", callAnswered, callUndelivered, callPending or anything
	line  string // the record's first line as read
	wrote bool   // this hook recorded an answer
	// pending is closed once this hook's "pending" write and its fsync
	// are done (nil when it wrote none); pendingErr is their result.
	pending    chan struct{}
	pendingErr error
}

// openCallRecord locks and reads the record of call under stateDir,
// waiting at most until ctx ends for a hook deciding the same call.
func openCallRecord(ctx context.Context, stateDir string, call harness.Call) (*callRecord, error) {
	dir := filepath.Dir(callRecordPath(stateDir, call))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the hook keeps a record of each permitted call (so that a repeated event is not a second permit) "+
			"and needs a writable state directory (--state-dir or $%s): %v", EnvStateDir, err)
	}
	path := callRecordPath(stateDir, call)
	name := filepath.Base(path)
	l, err := lockFile(ctx, path, true)
	if err != nil {
		return nil, fmt.Errorf("call record: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(l.f, 4096))
	if err != nil {
		l.unlock()
		return nil, fmt.Errorf("reading the call record: %v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	line := strings.TrimSpace(first)
	state, _, _ := strings.Cut(line, " ")
	if len(b) == 0 && strings.HasPrefix(name, "00") {
		pruneCallRecords(dir, time.Now())
	}
	return &callRecord{lock: l, state: state, line: line}, nil
}

// callRecordPath is where call's record is kept under stateDir.
func callRecordPath(stateDir string, call harness.Call) string {
	sum := sha256.Sum256([]byte(call.IdempotencyKey()))
	return filepath.Join(stateDir, "calls", hex.EncodeToString(sum[:])[:32])
}

// spentCall is what a call's record says of the grant its PreToolUse
// spent: the grant, the request digest it bound and its canonical target
// ("" for none). The PostToolUse hook reports the call's outcome against
// it without asking the issuer for the grant again.
type spentCall struct {
	grant  string
	digest events.Hash
	target string
}

// readSpentCall reads the grant call's record names, if there is a record
// of a permit ("answered" or "undelivered") that names one. It takes no
// lock: the record is written before the permit is delivered, so a
// PostToolUse (which follows the call, which follows the permit) reads it
// whole, and a record read while it is being rewritten reads as none,
// which only costs a request to the issuer.
func readSpentCall(stateDir string, call harness.Call) (spentCall, bool) {
	if stateDir == "" {
		return spentCall{}, false
	}
	f, err := os.Open(callRecordPath(stateDir, call))
	if err != nil {
		return spentCall{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return spentCall{}, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(first)
	if len(fields) == 0 || fields[0] != callAnswered && fields[0] != callUndelivered {
		return spentCall{}, false
	}
	var sc spentCall
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "grant":
			sc.grant = v
		case "digest":
			h, err := events.ParseHash(v)
			if err != nil {
				return spentCall{}, false
			}
			sc.digest = h
		case "target":
			t, err := url.QueryUnescape(v)
			if err != nil {
				return spentCall{}, false
			}
			sc.target = t
		}
	}
	if sc.grant == "" || sc.digest.IsZero() {
		// A record written before it kept the digest: ask the issuer.
		return spentCall{}, false
	}
	return sc, true
}

// replayed reports whether the call may have been permitted before (and
// the permit is not known to have been lost): any record but none and
// "undelivered" blocks, including one that cannot be read.
func (c *callRecord) replayed() bool { return c.state != "" && c.state != callUndelivered }

// replayError is the error a replayed call is blocked with.
func (c *callRecord) replayError(call harness.Call) error {
	if c.state != callAnswered {
		return fmt.Errorf("%w, or may have been: an earlier PreToolUse for %s call %s stopped after asking the issuer and before it finished (record %q), "+
			"so this one is not permitted in case the first permit was delivered; if the tool did not run, issue the call again (a new call id gets a grant of its own)",
			errReplayed, call.Tool, call.CallID, c.line)
	}
	_, rest, _ := strings.Cut(c.line, " ")
	return fmt.Errorf("%w (%s call %s, %s) and this PreToolUse repeats it: the first permit may have run it, so the same call "+
		"is not permitted twice; if the tool did not run, issue the call again (a new call id gets a grant of its own)",
		errReplayed, call.Tool, call.CallID, rest)
}

// begin makes the record say "pending", durably, before the issuer is
// asked: the write and its fsync run while the request is in flight, and
// answered and close wait for them.
func (c *callRecord) begin() {
	if c.pending != nil {
		return
	}
	done := make(chan struct{})
	c.pending = done
	go func() {
		c.pendingErr = c.replace(callPending, true)
		close(done)
	}()
}

// settle waits for begin's write, if any, and returns its result.
func (c *callRecord) settle() error {
	if c.pending == nil {
		return nil
	}
	<-c.pending
	return c.pendingErr
}

// answered records a permit before it is written to the harness, once
// the record's "pending" is durable.
func (c *callRecord) answered(env grants.Envelope) error {
	if c.pending == nil {
		return errors.New("writing the call record: the call was not begun first")
	}
	if err := c.settle(); err != nil {
		return err
	}
	line := fmt.Sprintf("%s grant=%s seq=%d", callAnswered, env.GrantID, env.Seq)
	if !env.Digest.IsZero() {
		// What the PostToolUse hook needs to report the outcome without
		// asking for the grant again (readSpentCall).
		line += " digest=" + env.Digest.String()
		if env.Target != "" {
			line += " target=" + url.QueryEscape(env.Target)
		}
	}
	if err := c.replace(line, false); err != nil {
		return err
	}
	c.wrote, c.line = true, line
	return nil
}

// replace writes line as the whole record: in place from the start, then
// cut to its length; synced when sync is set.
func (c *callRecord) replace(line string, sync bool) error {
	f := c.lock.f
	b := []byte(line + "\n")
	if _, err := f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("writing the call record: %v", err)
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return fmt.Errorf("writing the call record: %v", err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("writing the call record: %v", err)
		}
	}
	return nil
}

// close releases the record once the answer was written (delivered) or
// could not be: a permit that was not delivered is recorded as such, so
// that the harness's retry is answered, and a call begun and not
// permitted is left with no record, so that it may be asked again.
func (c *callRecord) close(delivered bool) {
	if c == nil {
		return
	}
	_ = c.settle()
	switch {
	case c.wrote && !delivered:
		_, rest, _ := strings.Cut(c.line, " ")
		_ = c.replace(strings.TrimSpace(callUndelivered+" "+rest), false)
	case c.pending != nil && !c.wrote:
		_ = c.lock.f.Truncate(0)
	}
	c.lock.unlock()
}

// pruneCallRecords removes records older than callRecordRetention.
func pruneCallRecords(dir string, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > callRecordRetention {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
