// Package events defines writ's receipts: the append-only event kinds, their
// versioned canonical binary encoding, the hash chain that links them and the
// JetStream subjects they are published on.
//
// Every state change the issuer's state machine makes is an Event. Events are
// computed from committed raft entries, so every replica produces the same
// bytes for the same sequence number. Auditors decode them, check the chain
// and fold them into a projection.
//
// # Wire format (version 1)
//
// An encoded event is one version byte (currently 1) followed by fields in
// strictly ascending tag order. Each field starts with a uvarint key
// (tag<<3 | wire type); wire type 0 is a uvarint, wire type 2 is a
// uvarint length followed by that many bytes. Zero values are omitted, so an
// event has exactly one encoding. Only list fields (counters, cancelled,
// rules, sources, grounds, quotas, origins) repeat their tag, once per
// element; a counter element is the uvarint value followed by the key
// bytes, a quota window element the zigzag start and end followed by the
// key bytes, and a flag (charged, model_made) is written as 1 when set.
// The last field is the event's
// own hash (tag 127): SHA-256 over every byte before it, version byte
// included. Decoders skip fields with unknown tags (they still count towards
// the hash), reject everything else that is not canonical (non-minimal
// varints, tags out of order, a repeated singular field, a field present with
// its zero value, unknown wire types, lengths past the input), and verify the
// hash.
//
// Tags and kinds are append-only: a value is never reordered, reused or
// given a new meaning. Retired values are listed next to their tables.
//
// # Validation
//
// Decoding checks the encoding only. Event.StaticValidate checks one
// decoded event against its kind (the fields it must and must not carry);
// the state machine and the auditor refuse an event that fails it.
package events
