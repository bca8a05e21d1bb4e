package natsauth

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Manager is what a running issuer node holds in operator mode: it mints
// the credentials of the workers it spawns and pushes their revocations.
// Build it with NewManager; a nil *Manager means the node runs with static
// users (or none) and cannot mint.
type Manager struct {
	auth    *Authority
	revoker *Revoker
}

// NewManager returns a Manager minting with a and revoking over sys, a
// system-account connection (see Authority.SystemCredential).
func NewManager(a *Authority, sys *nats.Conn) (*Manager, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: nil Authority", ErrInvalid)
	}
	if err := a.need(a.accountSigner, AccountSigningSeedFile, "an issuer in operator mode"); err != nil {
		return nil, err
	}
	r, err := a.NewRevoker(sys)
	if err != nil {
		return nil, err
	}
	return &Manager{auth: a, revoker: r}, nil
}

// Authority is the loaded auth directory.
func (m *Manager) Authority() *Authority { return m.auth }

// MintWorker issues the credential of a worker's incarnation, expiring at
// expires (required): it may publish only under writ.api.<worker>.> and
// receive only on _INBOX.<worker>.>. Credential.Creds is the file to hand
// the worker.
func (m *Manager) MintWorker(worker string, incarnation uint64, expires time.Time) (Credential, error) {
	return m.auth.MintWorker(worker, incarnation, expires)
}

// SignWorkerKey issues the user JWT of a spawned worker whose key pair its
// parent generated (Authority.SignWorkerKey).
func (m *Manager) SignWorkerKey(worker, userKey string, expires time.Time) (Credential, error) {
	return m.auth.SignWorkerKey(worker, userKey, expires)
}

// RevokeKeys revokes users by public key (the keys spawns recorded) in one
// account update; see Revoker.RevokeKeys.
func (m *Manager) RevokeKeys(ctx context.Context, keys ...string) (Revocation, error) {
	return m.revoker.RevokeKeys(ctx, keys...)
}

// SetPrune sets the Revoker's Prune (before any push; nil: prune
// nothing).
func (m *Manager) SetPrune(prune func(userKey string) bool) { m.revoker.Prune = prune }

// RevokeWorker revokes the given incarnations of a worker (0 when none is
// given) on every server; see Revoker.Revoke for what it guarantees when it
// returns.
func (m *Manager) RevokeWorker(ctx context.Context, worker string, incarnations ...uint64) (Revocation, error) {
	return m.revoker.RevokeWorker(ctx, worker, incarnations...)
}

// Revoke revokes several identities in one account update (a worker and
// its children, say): one push, one acknowledgement per server.
func (m *Manager) Revoke(ctx context.Context, ids ...Identity) (Revocation, error) {
	return m.revoker.Revoke(ctx, ids...)
}
