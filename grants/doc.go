// Package grants defines single-spend grant tickets: what a grant binds
// (the request digest of package args), the spend rules, and the decision
// envelope with its stable reason and recovery codes.
package grants
