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
//   - the record is written ("answered") before the permit is written to
//     the harness; if writing the answer fails, it is rewritten as
//     "undelivered";
//   - a PreToolUse for a call whose record says "answered" is blocked (exit
//     2): the first permit may have been delivered and the tool may have
//     run, and the attempt is already recorded at the issuer. A call the
//     model means to run again is a new call with a new tool_use_id;
//   - a call with no record, or one that says "undelivered", is answered
//     as usual (the issuer's answer is the original one: no second grant);
//   - a duplicate that arrives while the first hook is still deciding
//     waits for its lock and then sees its record;
//   - only permits are recorded: a refused or held call may be asked again
//     (an approval may have come since).
//
// A hook that dies after writing the record and before writing its answer
// leaves "answered": the repeat is blocked, which can only stop a call,
// never run one twice. Records older than callRecordRetention are removed
// now and then by a hook that writes a new one.

// callRecordRetention is how long a call's record is kept.
const callRecordRetention = 7 * 24 * time.Hour

// Call record states.
const (
	callAnswered    = "answered"
	callUndelivered = "undelivered"
)

// errReplayed: a call asked about again after its permit was answered.
var errReplayed = errors.New("this call was already permitted once")

// callRecord is one call's record, locked while the hook decides.
type callRecord struct {
	lock  *fileLock
	state string // as read: "", callAnswered or callUndelivered
	line  string // the record as read
	wrote bool   // this hook recorded an answer
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
	line := strings.TrimSpace(string(b))
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
	fields := strings.Fields(string(b))
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

// replayed reports whether the call's permit was answered before (and not
// known to have been lost).
func (c *callRecord) replayed() bool { return c.state == callAnswered }

// replayError is the error a replayed call is blocked with.
func (c *callRecord) replayError(call harness.Call) error {
	_, rest, _ := strings.Cut(c.line, " ")
	return fmt.Errorf("%w (%s call %s, %s) and this PreToolUse repeats it: the first permit may have run it, so the same call "+
		"is not permitted twice; if the tool did not run, issue the call again (a new call id gets a grant of its own)",
		errReplayed, call.Tool, call.CallID, rest)
}

// answered records a permit before it is written to the harness.
func (c *callRecord) answered(env grants.Envelope) error {
	line := fmt.Sprintf("%s grant=%s seq=%d", callAnswered, env.GrantID, env.Seq)
	if !env.Digest.IsZero() {
		// What the PostToolUse hook needs to report the outcome without
		// asking for the grant again (readSpentCall).
		line += " digest=" + env.Digest.String()
		if env.Target != "" {
			line += " target=" + url.QueryEscape(env.Target)
		}
	}
	if err := c.write(line); err != nil {
		return err
	}
	c.wrote, c.line = true, line
	return nil
}

func (c *callRecord) write(line string) error {
	f := c.lock.f
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("writing the call record: %v", err)
	}
	if _, err := f.WriteAt([]byte(line+"\n"), 0); err != nil {
		return fmt.Errorf("writing the call record: %v", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing the call record: %v", err)
	}
	return nil
}

// close releases the record once the answer was written (delivered) or
// could not be: a permit that was not delivered is recorded as such, so
// that the harness's retry is answered.
func (c *callRecord) close(delivered bool) {
	if c == nil {
		return
	}
	if c.wrote && !delivered {
		_, rest, _ := strings.Cut(c.line, " ")
		_ = c.write(strings.TrimSpace(callUndelivered + " " + rest))
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
