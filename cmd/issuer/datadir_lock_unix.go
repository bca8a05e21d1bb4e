//go:build unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive, non-blocking lock on f.
func flock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errDataDirInUse
	}
	return err
}

func funlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
