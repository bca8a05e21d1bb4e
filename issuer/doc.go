// Package issuer serves writ's NATS API on the raft leader: it turns
// worker and operator requests into state-machine commands, answers once
// they are committed, and publishes the receipts from the outbox to the
// JetStream stream in sequence order.
package issuer
