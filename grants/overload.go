package grants

// Refusals under overload. A component that sheds load — the issuer at its
// in-flight limit, admission control throttling a worker's refusals, a node
// busy with a snapshot, a hook or sidecar whose issuer did not answer
// before the deadline — refuses: it never permits, never skips a check and
// never decides on the issuer's behalf. Its refusal text says so with the
// phrases below, so that the model and the operator reading it know which
// boundary held.
const (
	// KeptUndecided is said of a request the issuer shed before
	// deciding it.
	KeptUndecided = "nothing was decided or recorded: no grant was issued or spent, and the single-spend, revocation and policy checks were kept"
	// KeptRetrySame is the retry advice for an undecided request: the
	// same idempotency key gets the decision once there is capacity, and
	// never a second grant.
	KeptRetrySame = "retry with the same idempotency key"
	// KeptUnconfirmed is said of a request whose entry was proposed but
	// not confirmed committed in time: it may still commit, and a retry
	// with the same idempotency key then gets its decision.
	KeptUnconfirmed = "this answer permits nothing: the entry may still commit, and a retry with the same idempotency key gets its decision, never a second grant (single-spend, revocation and policy checks kept)"
	// KeptBlocked is said of a call a hook or gateway blocked because the
	// issuer did not answer in time.
	KeptBlocked = "the call was blocked, not run unchecked: no grant was spent and no check was skipped"
)
