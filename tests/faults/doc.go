// Package faults is writ's fault suite: scenarios in the manner of the
// public Jepsen analyses of etcd and NATS JetStream, run against real
// issuer processes (internal/testing/cluster) whose raft and NATS route links pass
// through fault proxies (internal/testing/faultproxy) the tests control.
//
// Every scenario has a fixed seed and bounded time, records every client
// operation with its invocation and completion (an operation whose outcome
// the client never learned is unknown, and may have taken effect at any
// point after it was invoked), checks the history with porcupine, and
// checks the receipt stream end to end: gap-free, hash chain intact,
// nothing applied twice, every answer committed, the auditor's replay equal
// to the issuer's state digest.
//
// `make test-faults` (WRIT_FAULTS=1) runs every scenario; plain `go test`
// runs a short smoke subset. The package has no code outside its tests.
package faults
