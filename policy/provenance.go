package policy

import (
	"github.com/writ-dev/writ/authority"
	"github.com/writ-dev/writ/events"
)

// FieldOrigin is what the issuer knows of one argument field's provenance
// when it judges a grant request: the registered sources the worker
// traced the value to and whether raw matches cover the whole value.
type FieldOrigin struct {
	Field   string
	Covered bool
	Sources []SourceFact // sorted by ID, one per source
}

// SourceFact is one source a field matched, as the issuer's replicated
// registry describes it. An unregistered id has Registered false and
// Authority Evidence. Counter is the source's revocation counter as the
// grant binds it; Transform and Part say how the value matched.
type SourceFact struct {
	ID         string
	Registered bool
	Authority  authority.Level
	Channel    string
	Path       string
	Tool       string
	Counter    events.Counter
	Transform  string
	Part       string
}

// SourceAuthority is the level the policy gives content from a channel,
// a file path (file reads) or a tool (tool results): the channel's level
// from provenance.channels, raised by the highest matching paths or tools
// entry. Derived content is not judged here (it takes its origins'
// lowest level). Under a version 1 policy, or a channel the document does
// not list, it is Evidence, except user_prompt and instruction_file which
// default to Instruction.
func (p *Policy) SourceAuthority(channel, path, tool string) authority.Level {
	switch channel {
	case "user_prompt", "instruction_file":
		return authority.Instruction
	}
	return authority.Evidence
}
