// Package natsbus runs writ's embedded NATS server, owns the receipt stream
// and publishes events into it in order.
//
// # Server
//
// StartServer starts an embedded nats-server with JetStream on a file store.
// The store always fsyncs every write (SyncAlways): the receipt stream is the
// audit log, and losing its tail on a power cut is not acceptable. A
// ServerConfig with Users enables authorization with static users; one with
// Operator runs the server in NATS operator mode instead (user JWTs, a full
// account resolver that takes pushed account updates and revocations; see
// OperatorAuth and package natsauth). Neither means no authentication at
// all and is meant for development only.
//
// The permission helpers describe writ's roles (natsauth gives user JWTs
// the same permissions):
//
//   - a worker publishes only requests on writ.api.<name>.> and receives
//     replies on its own inbox prefix;
//   - an operator publishes commands on writ.op.>;
//   - an auditor reads writ.evt.> live and through an ordered consumer on the
//     receipt stream, and cannot publish events;
//   - the issuer may do everything.
//
// Non-issuer users receive replies only on their own inbox prefix
// (InboxPrefix), so one worker cannot read another worker's replies. Their
// clients must connect with ClientOptions (or nats.CustomInboxPrefix).
//
// # Receipt stream
//
// Every state change is an event published on writ.evt.> into the stream
// WRIT_EVENTS (see EnsureStream). The stream is append-only: deletes,
// purges and roll-ups are refused, it never expires messages and it refuses
// new messages when full instead of dropping old ones.
//
// # Publisher
//
// Events carry their own sequence numbers, starting at 1 with no gaps. The
// Publisher keeps the stream sequence equal to the event sequence: every
// message is published with the expected last stream sequence Seq-1 and the
// message id Seq, messages already in the stream are checked rather than
// published again, and a batch that would leave a gap is refused. Several
// issuer nodes may therefore publish the same events concurrently (for
// example around a leader change) without duplicating or reordering them.
//
// The Publisher reads where the stream ends only from the stream leader's
// answer: while a replicated stream elects a leader, every replica answers
// stream-info requests from its own copy, which may be behind or (after a
// store was wiped) empty. Such answers fail with ErrStreamNotLed.
package natsbus
