// Package authority defines the ordered authority levels content carries:
// evidence < preference < instruction < policy, and the channels content
// enters a session by. It is pure (names and order only), so the state
// machine and the policy engine share it with the worker-side tracer in
// package provenance and the hook harness.
package authority

import (
	"fmt"
	"strings"
)

// Level is an authority level. Levels are totally ordered:
// Evidence < Preference < Instruction < Policy.
type Level uint8

const (
	// Evidence is tool output, web content, and anything the model wrote.
	Evidence Level = iota
	// Preference is a stated user preference.
	Preference
	// Instruction is a direct user instruction.
	Instruction
	// Policy is owner-approved policy.
	Policy
)

var levelNames = [...]string{"evidence", "preference", "instruction", "policy"}

// Valid reports whether l is one of the defined levels.
func (l Level) Valid() bool { return int(l) < len(levelNames) }

// String returns the lower-case name of the level.
func (l Level) String() string {
	if !l.Valid() {
		return fmt.Sprintf("level(%d)", uint8(l))
	}
	return levelNames[l]
}

// ParseLevel parses a level name (case-insensitive).
func ParseLevel(s string) (Level, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	for i, n := range levelNames {
		if n == s {
			return Level(i), nil
		}
	}
	return Evidence, fmt.Errorf("authority: unknown authority level %q", s)
}

// MarshalText implements encoding.TextMarshaler.
func (l Level) MarshalText() ([]byte, error) {
	if !l.Valid() {
		return nil, fmt.Errorf("authority: invalid authority level %d", uint8(l))
	}
	return []byte(l.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Lowest returns the lowest of the given levels. With no levels it returns
// Evidence: absence of provenance never confers authority. Invalid levels
// count as Evidence.
func Lowest(levels ...Level) Level {
	if len(levels) == 0 {
		return Evidence
	}
	low := Policy
	for _, l := range levels {
		if !l.Valid() {
			return Evidence
		}
		if l < low {
			low = l
		}
	}
	return low
}
