package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// lockFileName is the file in a data dir that a running node holds an
// exclusive lock on.
const lockFileName = "writ.lock"

// errDataDirInUse: another process holds the data dir's lock.
var errDataDirInUse = errors.New("data dir in use")

// lockDataDir takes the data dir's exclusive lock (creating the dir if it
// is missing) before anything in it is opened: two nodes on one raft log
// and JetStream store would corrupt both. The lock lives as long as the
// process or until the returned function releases it; the operating system
// drops it when the process exits, however it exits, so a crash leaves no
// stale lock behind.
func lockDataDir(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, errDataDirInUse) {
			return nil, fmt.Errorf("%w: %s is locked by another issuer process (stop it, or give this node its own --data-dir)", errDataDirInUse, dir)
		}
		return nil, fmt.Errorf("data dir %s: locking %s: %w", dir, path, err)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return func() { funlock(f); f.Close() }, nil
}
