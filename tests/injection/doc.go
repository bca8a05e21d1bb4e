// Package injection replays agent traces in the shape of public
// prompt-injection benchmarks (a payee taken from a transaction memo, a
// password from a fetched page, mail forwarded out of an inbox, channel
// history posted to a URL, a passport number mailed out, a checksum hidden
// in DNS labels, a forged standing approval in a memory file), each with a
// benign twin, and the checkpoint resurrection attacks (an old grant id
// replayed after a restore, a staged message resent after its destination
// was revoked, a consumed review's caption replayed), through the real `worker-agent hook claude-code` binary
// against a real single-node issuer, and checks the decision every call
// receives and the provenance grounds recorded in its receipt.
//
// Scenarios are data: testdata/scenarios/*.txt, run under
// testdata/policy.yaml. The format is described in injection_test.go. The
// package has no code outside its tests.
package injection
