// Package clustertests holds writ's cluster fault tests: real issuer
// processes (see internal/testing/cluster) raced, killed, stopped and restarted,
// with linearizability checked by porcupine and the receipt stream checked
// for gaps, duplicates, chain breaks and auditor violations. The clock and
// revocation tests run in-process (internal/testing/testenv) to save time.
//
// The package has no code outside its tests.
package clustertests
