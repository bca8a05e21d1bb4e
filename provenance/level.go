// Package provenance labels content with authority levels and traces
// tool-call arguments back to registered sources.
//
// Content entering an agent session (tool results, fetched pages, files read,
// user prompts) is described by a Descriptor carrying its authority Level,
// origins and scope. Derived content takes the lowest authority of its
// inputs; only the descriptor's owner may raise it (Raise). A Registry keeps
// bounded, normalized windows of registered content so that the
// security-relevant arguments of a proposed tool call can be traced back to
// the sources they were copied from (Registry.Trace), including after one
// level of base64, hex or percent decoding. A value that traces to nothing
// is treated as model-made, i.e. evidence.
package provenance

import "github.com/writ-dev/writ/authority"

// Level is an authority level (see package authority).
type Level = authority.Level

// The levels, lowest first.
const (
	Evidence    = authority.Evidence
	Preference  = authority.Preference
	Instruction = authority.Instruction
	Policy      = authority.Policy
)

// ParseLevel parses a level name (case-insensitive).
func ParseLevel(s string) (Level, error) { return authority.ParseLevel(s) }

// Lowest returns the lowest of the given levels (Evidence when none).
func Lowest(levels ...Level) Level { return authority.Lowest(levels...) }
