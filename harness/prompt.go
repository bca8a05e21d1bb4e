package harness

// PromptUnregistered is the answer to a UserPromptSubmit hook that could
// not register the prompt because the issuer could not be reached: the
// prompt goes through (exit 0) with a warning for the user, as
// {"systemMessage": "..."} on stdout — the one field both harnesses show
// the user for this event without handing it to the model as context —
// and the same line on stderr.
//
// Letting it through loosens nothing. A prompt the issuer never
// registered is matched by no trace, so a value copied from it counts as
// model-made (evidence), the lowest authority there is: a call built from
// it can only be judged more strictly, never less. Tool calls themselves
// still ask the issuer first, so while it is unreachable they stay
// blocked; the user can talk to the model, and nothing runs ungoverned.
// An issuer that answered and refused the prompt (a revoked source) is
// not this case: FailPrompt drops the prompt.
func PromptUnregistered(err error) Answer {
	line := "writ: " + OneLine(err.Error()) + " — the prompt was sent anyway; tool calls stay blocked until the issuer answers. Submit the prompt again once it does if calls should rely on what it says."
	out, merr := marshal(struct {
		SystemMessage string `json:"systemMessage"`
	}{line})
	if merr != nil {
		return FailPrompt(err)
	}
	return Answer{Exit: ExitOK, Stdout: out, Stderr: line}
}
