// Package natsauth gives writ's NATS connections credentials that NATS
// itself enforces: NATS decentralized authentication, in which an operator
// signs accounts, an account signs users, and every client proves it holds
// its user's nkey seed.
//
// # Keys and files
//
// Init creates, in one directory, every key and JWT a deployment needs
// (file names in the constants below, each written 0600, never
// overwritten):
//
//   - the operator: its identity key (offline: it only signs the operator
//     JWT and new operator signing keys), an operator signing key (signs
//     account JWTs, hence revocations) and the operator JWT, which lists
//     the signing key, the system account and strict signing-key use;
//   - the system account, in which the servers' account resolver runs: its
//     identity key (offline), a signing key (signs the system-account users
//     that push account updates) and its JWT;
//   - the writ account, which holds the receipt stream and every writ
//     client: its identity key (offline), a signing key (signs user JWTs)
//     and its JWT, with JetStream enabled.
//
// Load reads a directory back. A machine needs only the files of what it
// does: an issuer node needs the three JWTs and the three signing keys; a
// machine that only mints worker credentials needs the account signing key
// and the JWTs.
//
// # Users
//
// Mint issues a user JWT for an Identity (a role, a name and, for a worker,
// an incarnation) with the role's permissions (natsbus.WorkerUser and the
// other role builders): a worker may publish only under writ.api.<name>.>
// and subscribe only to its own inbox prefix _INBOX.<name>.>. A worker
// credential always expires. The user's nkey is derived from the account
// signing key and the identity (HMAC-SHA256), so every node holding the
// same key computes the same user key for the same identity and a worker
// can be revoked by name without any record of what was minted. A new
// incarnation has a different key, so revoking one incarnation does not
// touch the next.
//
// # Revocation
//
// A Revoker adds user revocations to the writ account's JWT, re-signs it
// with the operator signing key and pushes it on the system account to
// every server (the full resolver's $SYS.REQ.ACCOUNT.<account>.CLAIMS.UPDATE).
// A server that acknowledges the update has stored it and closed every
// open connection of a revoked user; from then on it refuses the user's
// JWTs issued at or before the revocation time. Revocation times have
// one-second resolution: a credential minted for the same identity in the
// same second as the revocation is refused too. A server that was
// unreachable takes the update when it next syncs with the others (every
// natsbus.DefaultResolverSync).
package natsauth
