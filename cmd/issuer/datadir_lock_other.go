//go:build !unix

package main

import "os"

// flock is a no-op where flock(2) is missing; raft-boltdb's own file lock
// still refuses a second node, later and with a less precise message.
func flock(*os.File) error { return nil }

func funlock(*os.File) {}
