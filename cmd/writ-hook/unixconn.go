package main

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// dialUnix connects to the unix stream socket at path, waiting at most
// connect, and returns the connection as a file whose reads and writes
// each give up after wait (isTimeout).
//
// It goes to the socket with syscall rather than package net: net's
// resolver makes a default build link libc dynamically, and the dynamic
// loader alone took about 5 ms of a 13 ms start on a 2-core VM. With
// syscall writ-hook is a static binary however it is built, and a
// blocking socket with SO_RCVTIMEO and SO_SNDTIMEO needs no poller.
func dialUnix(path string, connect, wait time.Duration) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	syscall.CloseOnExec(fd)
	// A connect to a unix socket whose backlog is full waits, up to the
	// send timeout.
	if err := setTimeouts(fd, connect); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	for {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	if err := setTimeouts(fd, wait); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

func setTimeouts(fd int, d time.Duration) error {
	tv := syscall.NsecToTimeval(max(d, time.Millisecond).Nanoseconds())
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &tv); err != nil {
			return os.NewSyscallError("setsockopt", err)
		}
	}
	return nil
}

// isTimeout reports whether err is a read or write that ran out of time.
func isTimeout(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
}
