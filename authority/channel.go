package authority

// Channels name how content entered a session. A worker registers each
// piece of content under one (api.SourceRequest.Channel); the policy gives
// each channel but derived a level, and the state machine refuses a
// registration under any other name. Derived content is computed from
// registered sources and takes the lowest level of its origins.
const (
	ChannelUserPrompt      = "user_prompt"
	ChannelInstructionFile = "instruction_file"
	ChannelFileRead        = "file_read"
	ChannelToolResult      = "tool_result"
	ChannelWebFetch        = "web_fetch"
	ChannelPeerMessage     = "peer_message"
	ChannelModelOutput     = "model_output"
	ChannelDerived         = "derived"
)

// Channels returns every channel, in the order above: the direct ones,
// then ChannelDerived.
func Channels() []string {
	return []string{
		ChannelUserPrompt, ChannelInstructionFile, ChannelFileRead, ChannelToolResult,
		ChannelWebFetch, ChannelPeerMessage, ChannelModelOutput, ChannelDerived,
	}
}

// KnownChannel reports whether c is one of Channels.
func KnownChannel(c string) bool {
	switch c {
	case ChannelUserPrompt, ChannelInstructionFile, ChannelFileRead, ChannelToolResult,
		ChannelWebFetch, ChannelPeerMessage, ChannelModelOutput, ChannelDerived:
		return true
	}
	return false
}
