// Package lanes names the lanes a worker can run in — coordinator,
// isolated, specialist — and checks that a spawned worker's scope only ever
// narrows.
package lanes

import (
	"errors"
	"fmt"
	"path"
)

// Built-in lane kinds. A policy may declare further lanes of its own.
const (
	Coordinator = "coordinator" // owns user intent, reviews and promotion
	Isolated    = "isolated"    // research, drafting, cron/heartbeat work
	Specialist  = "specialist"  // coding or browser runtime
)

// Builtin lists the built-in lanes in a stable order.
var Builtin = []string{Coordinator, Isolated, Specialist}

// ErrWiden is returned when a child scope is not a subset of its parent's.
var ErrWiden = errors.New("lanes: child scope is wider than its parent's")

// MatchTool reports whether tool matches a pattern: an exact name, "*", or
// a shell-style glob such as "mcp__github__*".
func MatchTool(pattern, tool string) bool {
	if pattern == "*" || pattern == tool {
		return true
	}
	ok, err := path.Match(pattern, tool)
	return err == nil && ok
}

// Allowed reports whether any pattern in allow matches tool.
func Allowed(allow []string, tool string) bool {
	for _, p := range allow {
		if MatchTool(p, tool) {
			return true
		}
	}
	return false
}

// Attenuate checks that every pattern a child asks for is covered by one of
// its parent's patterns and returns the child's list. A child may name
// concrete tools its parent reaches through a glob, never the reverse.
func Attenuate(parent, child []string) ([]string, error) {
	for _, c := range child {
		covered := false
		for _, p := range parent {
			if p == "*" || p == c || (!hasMeta(c) && MatchTool(p, c)) {
				covered = true
				break
			}
		}
		if !covered {
			return nil, fmt.Errorf("%w: %q", ErrWiden, c)
		}
	}
	return append([]string(nil), child...), nil
}

func hasMeta(s string) bool {
	for _, r := range s {
		switch r {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
