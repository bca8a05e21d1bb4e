package issuer

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
)

// Worker NATS credentials (operator mode). A spawning parent generates
// its child's user key pair and names the public key in the spawn
// (api.SpawnRequest.UserKey); the spawn event records it (receipt format
// level 12). Once the spawn commits, the leader signs a user JWT for that
// key with the account signing key: the worker role's permissions
// (publish only under writ.api.<child>.>, receive only on
// _INBOX.<child>.>), expiring when the child's lifetime ends. The answer
// carries the JWT alone; the seed never leaves the parent.
//
// While it leads, a node keeps the NATS servers' revocations in step with
// the state: every recorded key whose worker is revoked (itself or an
// ancestor, the whole subtree in one entry), restored or respawned, and
// whose lifetime has not ended, is pushed as a user revocation to every
// server (natsauth.Revoker). A node that takes over pushes them all once,
// so a push lost with a failed leader is made by the next; a server that
// was down takes the account update at its next resolver sync.

// credentialCheck is how often a leading node compares the state's
// revoked user keys with what it has pushed.
const credentialCheck = 250 * time.Millisecond

// credentials is a leader's push bookkeeping.
type credentials struct {
	// mu orders signing against reading the revoked keys: a JWT signed
	// after a revocation committed was checked against the state after
	// it, and a JWT signed before is older than the push (natsauth
	// revokes every JWT of a key issued up to the push).
	mu     sync.Mutex
	pushed map[string]bool // keys this leadership term pushed
}

// spawnCredential completes a spawn's permit with the child's user JWT,
// or a note saying why there is none.
func (s *Service) spawnCredential(cmd fsm.Command, env *grants.Envelope) {
	if env.Decision != grants.Permit || env.Worker == "" || env.Worker != cmd.Key {
		return
	}
	mgr := s.cfg.Credentials
	switch {
	case mgr == nil:
		env.CredentialNote = "no NATS credential signed: this issuer's NATS servers do not run in operator mode (static users or none); the child connects with what the deployment gives it"
		return
	case cmd.UserKey == "":
		env.CredentialNote = "no NATS credential signed: the spawn named no user key (user_key); in operator mode the child cannot connect until it has one"
		return
	}
	s.creds.mu.Lock()
	defer s.creds.mu.Unlock()
	var (
		level uint64
		key   string
	)
	s.node.View(func(st *fsm.State, _ uint64) {
		level = st.ReceiptFormat()
		key = st.LiveUserKey(env.Worker)
	})
	switch {
	case level < fsm.ReceiptFormatWorkerKeys:
		env.CredentialNote = "no NATS credential signed: the cluster does not record user keys yet (receipt format below 12)"
		return
	case key == "":
		env.CredentialNote = "no NATS credential signed: worker " + env.Worker + " has no live user key (revoked, restored, respawned or spawned without one)"
		return
	case key != cmd.UserKey:
		env.CredentialNote = "no NATS credential signed: worker " + env.Worker + " was spawned with another user key"
		return
	}
	c, err := mgr.SignWorkerKey(env.Worker, key, time.Unix(0, env.ExpiresAt))
	if err != nil {
		env.CredentialNote = "no NATS credential signed: " + err.Error()
		return
	}
	env.UserJWT = c.JWT
	env.CredentialNote = "NATS credential signed for user " + key + " until " + c.Expires.Format(time.RFC3339)
}

// proposeSpawn commits a spawn and answers it, with the child's
// credential when it is permitted.
func (s *Service) proposeSpawn(m *nats.Msg, cmd fsm.Command) grants.Envelope {
	env, _ := s.proposeCommand(cmd)
	s.spawnCredential(cmd, &env)
	s.respond(m, env)
	return env
}

// pruneMargin is how long after a spawned worker's end its revocation is
// kept in the account JWT: longer than the servers' clocks may be off.
const pruneMargin = time.Minute

// pruneEnded reports, for the Revoker's Prune, whether a revocation is of
// a recorded key whose worker ended more than pruneMargin ago: its JWTs
// have all expired and no other is signed (a spawned worker's lifetime
// never grows), so the account JWT need not carry it any more.
func (s *Service) pruneEnded(key string) bool {
	var ended bool
	s.node.View(func(st *fsm.State, _ uint64) { ended = st.UserKeyEnded(key, time.Now().Add(-pruneMargin).UnixNano()) })
	return ended
}

// revocationLoop runs while this node leads in operator mode: it pushes
// the revocation of every recorded user key the state says is dead and
// this term has not pushed yet, retrying what failed.
func (s *Service) revocationLoop(ctx context.Context) {
	mgr := s.cfg.Credentials
	if mgr == nil {
		return
	}
	s.creds.mu.Lock()
	s.creds.pushed = map[string]bool{}
	s.creds.mu.Unlock()
	tick := time.NewTicker(credentialCheck)
	defer tick.Stop()
	var retryAt time.Time
	checked := ^uint64(0) // the state version last compared, when nothing was left to push
	backoff := time.Second
	for {
		if now := time.Now(); !now.Before(retryAt) {
			var (
				todo []string
				at   uint64
			)
			s.creds.mu.Lock()
			s.node.ViewVersion(func(st *fsm.State, version uint64) {
				if at = version; version == checked {
					return // nothing changed since: no key to add
				}
				for _, k := range st.RevokedUserKeys(now.UnixNano()) {
					if !s.creds.pushed[k] {
						todo = append(todo, k)
					}
				}
			})
			s.creds.mu.Unlock()
			if len(todo) == 0 {
				checked = at
			}
			if len(todo) > 0 {
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				rev, err := mgr.RevokeKeys(pctx, todo...)
				cancel()
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					s.log.Warn("pushing worker credential revocations", "keys", len(todo), "acknowledged_by", rev.Servers, "err", err)
					retryAt = now.Add(backoff)
					backoff = min(2*backoff, 30*time.Second)
				default:
					s.log.Info("pushed worker credential revocations", "keys", len(todo), "servers", rev.Servers, "revoked_at", rev.At)
					s.creds.mu.Lock()
					for _, k := range todo {
						s.creds.pushed[k] = true
					}
					s.creds.mu.Unlock()
					backoff = time.Second
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// validUserKey reports whether k is a public user nkey, checksum
// included.
func validUserKey(k string) bool { return nkeys.IsValidPublicUserKey(k) }
