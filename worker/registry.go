package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/writ-dev/writ/provenance"
)

// The provenance registry of a harness session lives in a file, because
// every hook event is a process of its own:
//
//	<state dir>/provenance/<first 32 hex digits of sha256(session_id)>.reg
//
// beside its lock file (.lock). A hook that registers content holds the
// lock exclusively from loading the file to saving it (provenance.SaveFile
// replaces it atomically); a hook that only traces holds it shared while
// it loads. Subagents share their session's registry. Files are 0600 in a
// 0700 directory and hold normalized content: they are as sensitive as the
// session transcript.

// errRegistryUnreadable marks a registry file that exists but cannot be
// loaded (corrupt, truncated, another version).
var errRegistryUnreadable = errors.New("the session's provenance registry is unreadable")

// sessionStore is one session's registry file.
type sessionStore struct {
	dir, path, lock string
	maxBytes        int64
}

func newSessionStore(stateDir, session string, maxBytes int64) *sessionStore {
	sum := sha256.Sum256([]byte(session))
	name := hex.EncodeToString(sum[:])[:32]
	dir := filepath.Join(stateDir, "provenance")
	return &sessionStore{
		dir:      dir,
		path:     filepath.Join(dir, name+".reg"),
		lock:     filepath.Join(dir, name+".lock"),
		maxBytes: maxBytes,
	}
}

// load reads the registry under a shared lock. A session that has
// registered nothing yet has no registry: (nil, nil). An unreadable file
// is an error wrapping errRegistryUnreadable.
func (s *sessionStore) load(ctx context.Context) (*provenance.Registry, error) {
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	l, err := lockFile(ctx, s.lock, false)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	reg, err := provenance.LoadFile(s.path, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w (%s): %v", errRegistryUnreadable, s.path, err)
	}
	return reg, nil
}

// update loads the registry (an empty one bounded by maxBytes when the
// session has none) under the exclusive lock, lets fn change it and saves
// it. An unreadable file is not an error here: it is moved aside to
// <name>.reg.corrupt and a fresh registry replaces it, and a note says so.
// A note also reports pressure: content windows fn's registrations
// evicted.
func (s *sessionStore) update(ctx context.Context, fn func(*provenance.Registry) error) (notes []string, err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("provenance registry directory: %v", err)
	}
	l, err := lockFile(ctx, s.lock, true)
	if err != nil {
		return nil, err
	}
	defer l.unlock()
	reg, err := provenance.LoadFile(s.path, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		reg = provenance.NewRegistry(provenance.Options{MaxBytes: s.maxBytes})
	case err != nil:
		aside := s.path + ".corrupt"
		if rerr := os.Rename(s.path, aside); rerr != nil {
			aside = "nowhere (" + rerr.Error() + ")"
		}
		notes = append(notes, fmt.Sprintf("%v (%v): started a fresh one and moved the old file to %s; "+
			"content registered before counts as model-made", errRegistryUnreadable, err, aside))
		reg = provenance.NewRegistry(provenance.Options{MaxBytes: s.maxBytes})
	}
	before := evicted(reg)
	if err := fn(reg); err != nil {
		return notes, err
	}
	if n := evicted(reg) - before; n > 0 {
		total, _ := reg.Bytes()
		notes = append(notes, fmt.Sprintf("the session's provenance registry is at its bound (%d of %d bytes): "+
			"%d bytes of older content were evicted, and values copied from them may now count as model-made "+
			"(raise provenance.max_bytes in the worker config)", total, reg.Options().MaxBytes, n))
	}
	if err := provenance.SaveFile(s.path, reg); err != nil {
		return notes, fmt.Errorf("saving the provenance registry: %v", err)
	}
	return notes, nil
}

// evicted is the registry's pressure: window bytes evicted so far.
func evicted(reg *provenance.Registry) int64 {
	var n int64
	for _, b := range reg.Pressure() {
		n += b
	}
	return n
}
