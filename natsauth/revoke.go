package natsauth

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// DefaultGather bounds how long a Revoker waits for more servers to answer
// once one has (counting servers, collecting lookups and acknowledgements)
// when it does not know how many to expect.
const DefaultGather = 300 * time.Millisecond

// DefaultSettle is how long, when Revoker.Settle is zero, a revocation is
// checked again after the servers acknowledged it: longer than a
// concurrent pusher takes between reading the servers' copy and pushing
// its own (it waits for the next second, so that its copy is newer).
const DefaultSettle = 1500 * time.Millisecond

// pushLocks serialise the pushes of every Revoker of one account in this
// process.
var pushLocks sync.Map // account public key -> *sync.Mutex

// Revoker pushes user revocations to the servers. Its connection must be a
// system-account connection (see Authority.SystemCredential); the
// Authority must hold the operator signing key.
//
// An account update replaces the servers' copy whole, so two pushers that
// read the same copy and push one after the other would lose the first
// one's revocation. The Revokers of one process push one at a time.
// Pushers in different processes (several issuer nodes, an operator's CLI)
// have no lock in common: a Revoker reads the servers' copies back after
// they acknowledged, and again Settle later (a concurrent pusher that read
// before our push has pushed by then), and pushes again whenever its
// revocations are missing. A revocation pushed by a process that dies
// between another's stale push and its own check can still be lost:
// revoke again when in doubt (it is idempotent).
type Revoker struct {
	a  *Authority
	nc *nats.Conn

	// Gather is how long to wait for more answers after the last one
	// when the number of servers is not known; 0 means DefaultGather.
	Gather time.Duration
	// Servers, when > 0, is how many servers must acknowledge an update;
	// 0 means every server that answers a ping just before the push.
	Servers int
	// Settle is how long after the acknowledgements the revocation is
	// checked once more; 0 means DefaultSettle, negative skips the check.
	Settle time.Duration
	// Prune, when set, is asked about every revocation already in the
	// account JWT whenever the Revoker pushes one: true drops it. It is
	// for revocations that no longer matter (every credential of the key
	// has expired and none will be signed again), which would otherwise
	// grow the account JWT for ever. The keys being revoked are never
	// dropped.
	Prune func(userKey string) bool
	now   func() time.Time
}

// NewRevoker returns a Revoker pushing over nc.
func (a *Authority) NewRevoker(nc *nats.Conn) (*Revoker, error) {
	if err := a.need(a.operatorSigner, OperatorSigningSeedFile, "revoking"); err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrInvalid)
	}
	return &Revoker{a: a, nc: nc, now: time.Now}, nil
}

// Revocation reports a pushed revocation.
type Revocation struct {
	Identities []Identity `json:"identities"`
	UserKeys   []string   `json:"user_keys"`
	// At is the revocation time: the servers refuse every JWT of these
	// users issued at or before it (one-second resolution).
	At time.Time `json:"revoked_at"`
	// Servers are the servers (by name) that stored the update and closed
	// the users' connections.
	Servers []string `json:"servers"`
	// Expected is how many servers had to acknowledge.
	Expected int `json:"servers_expected"`
	// AccountJWT is the pushed account JWT; Authority.SaveAccountJWT
	// keeps it in the auth directory, so that servers started from the
	// directory later (a new cluster) know the revocation too.
	AccountJWT string `json:"-"`
}

// Revoke revokes every credential minted for ids up to now: it adds the
// user keys to the account JWT's revocations, signs it with the operator
// signing key and pushes it to every server. It returns once the expected
// servers acknowledged (each has then closed the users' connections and
// refuses their JWTs), or fails with ErrPush saying which did not; an
// error after some servers stored the update still leaves it in force
// there, and the others take it at their next sync.
func (r *Revoker) Revoke(ctx context.Context, ids ...Identity) (Revocation, error) {
	if len(ids) == 0 {
		return Revocation{}, fmt.Errorf("%w: no identity to revoke", ErrInvalid)
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		k, err := r.a.UserKey(id)
		if err != nil {
			return Revocation{}, fmt.Errorf("%s: %w", id, err)
		}
		keys[i] = k
	}
	return r.revokeKeys(ctx, ids, keys)
}

// RevokeKeys revokes users by public user key, with what Revoke
// guarantees: every credential signed for these keys up to now is
// refused. It is how the keys of spawned workers, which their parents
// generated, are revoked.
func (r *Revoker) RevokeKeys(ctx context.Context, keys ...string) (Revocation, error) {
	if len(keys) == 0 {
		return Revocation{}, fmt.Errorf("%w: no user key to revoke", ErrInvalid)
	}
	for _, k := range keys {
		if !nkeys.IsValidPublicUserKey(k) {
			return Revocation{}, fmt.Errorf("%w: %q is not a public user nkey", ErrInvalid, k)
		}
	}
	return r.revokeKeys(ctx, nil, slices.Clone(keys))
}

// RevokeWorker revokes the given incarnations of a worker (incarnation 0
// when none is given).
func (r *Revoker) RevokeWorker(ctx context.Context, worker string, incarnations ...uint64) (Revocation, error) {
	if len(incarnations) == 0 {
		incarnations = []uint64{0}
	}
	ids := make([]Identity, len(incarnations))
	for i, n := range incarnations {
		ids[i] = Worker(worker, n)
	}
	return r.Revoke(ctx, ids...)
}

// maxAttempts bounds the read-modify-push retries when another pusher's
// update replaced ours.
const maxAttempts = 5

func (r *Revoker) revokeKeys(ctx context.Context, ids []Identity, keys []string) (Revocation, error) {
	acc := r.a.Account.Subject
	mu, _ := pushLocks.LoadOrStore(acc, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	expect := r.Servers
	if expect <= 0 {
		n, err := r.countServers(ctx)
		if err != nil {
			return Revocation{}, err
		}
		expect = n
	}
	at := time.Unix(r.now().Unix(), 0).UTC()
	for attempt := 1; ; attempt++ {
		ac, err := r.current(ctx, expect)
		if err != nil {
			return Revocation{}, err
		}
		if r.Prune != nil {
			for k := range ac.Revocations {
				if !slices.Contains(keys, k) && r.Prune(k) {
					delete(ac.Revocations, k)
				}
			}
		}
		for _, k := range keys {
			if prev, ok := ac.Revocations[k]; !ok || prev < at.Unix() {
				ac.RevokeAt(k, at)
			}
		}
		// The resolvers keep the newer of two JWTs by issue time (seconds):
		// ours must be strictly newer than what they hold.
		if err := r.waitPast(ctx, ac.IssuedAt); err != nil {
			return Revocation{}, err
		}
		signed, err := ac.Encode(r.a.operatorSigner)
		if err != nil {
			return Revocation{}, fmt.Errorf("natsauth: signing the account JWT: %w", err)
		}
		servers, err := r.push(ctx, acc, signed, expect)
		rev := Revocation{Identities: ids, UserKeys: keys, At: at, Servers: servers, Expected: expect, AccountJWT: signed}
		if err != nil {
			return rev, err
		}
		// Read back from every server, now and once more after Settle:
		// another pusher may have replaced our JWT with one built from
		// the copy before ours.
		held, err := r.inForce(ctx, expect, keys, at)
		if err != nil {
			return rev, err
		}
		if held && r.settle() > 0 {
			t := time.NewTimer(r.settle())
			select {
			case <-ctx.Done():
				t.Stop()
				return rev, fmt.Errorf("%w: %v", ErrPush, ctx.Err())
			case <-t.C:
			}
			if held, err = r.inForce(ctx, expect, keys, at); err != nil {
				return rev, err
			}
		}
		if held {
			return rev, nil
		}
		if attempt == maxAttempts {
			return rev, fmt.Errorf("%w: the account JWT kept being replaced by concurrent updates (%d attempts)", ErrPush, attempt)
		}
	}
}

func (r *Revoker) settle() time.Duration {
	if r.Settle == 0 {
		return DefaultSettle
	}
	return r.Settle
}

// inForce reports whether every server's copy revokes keys as of at.
func (r *Revoker) inForce(ctx context.Context, expect int, keys []string, at time.Time) (bool, error) {
	held, err := r.held(ctx, expect)
	if err != nil {
		return false, err
	}
	for _, hc := range held {
		if !revokedAll(hc, keys, at) {
			return false, nil
		}
	}
	return true, nil
}

func revokedAll(ac *jwt.AccountClaims, keys []string, at time.Time) bool {
	for _, k := range keys {
		if ac.Revocations[k] < at.Unix() {
			return false
		}
	}
	return true
}

// waitPast waits until the wall clock's second is after iat.
func (r *Revoker) waitPast(ctx context.Context, iat int64) error {
	for r.now().Unix() <= iat {
		t := time.NewTimer(time.Until(time.Unix(iat+1, 0)) + 5*time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %v", ErrPush, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// serverAnswer is the part of a system-account answer Revoker reads.
type serverAnswer struct {
	Server struct {
		Name string `json:"name"`
		ID   string `json:"id"`
	} `json:"server"`
	Data *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
	Error *struct {
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// countServers counts the servers answering a ping.
func (r *Revoker) countServers(ctx context.Context) (int, error) {
	msgs, err := r.gather(ctx, "$SYS.REQ.SERVER.PING", nil, 0)
	if err != nil {
		return 0, err
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		var a serverAnswer
		if json.Unmarshal(m.Data, &a) == nil && a.Server.ID != "" {
			ids[a.Server.ID] = true
		}
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("%w: no server answered a ping on the system account", ErrPush)
	}
	return len(ids), nil
}

// held returns the account JWTs the servers hold (one per answer).
func (r *Revoker) held(ctx context.Context, expect int) ([]*jwt.AccountClaims, error) {
	acc := r.a.Account.Subject
	msgs, err := r.gather(ctx, "$SYS.REQ.ACCOUNT."+acc+".CLAIMS.LOOKUP", nil, expect)
	if err != nil {
		return nil, err
	}
	var out []*jwt.AccountClaims
	for _, m := range msgs {
		if len(m.Data) == 0 {
			continue
		}
		ac, err := jwt.DecodeAccountClaims(string(m.Data))
		if err != nil || ac.Subject != acc || !r.a.Operator.DidSign(ac) {
			continue
		}
		out = append(out, ac)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no server holds the account JWT of %s (are the servers running with this auth directory?)", ErrPush, acc)
	}
	return out, nil
}

// current returns the newest account JWT the servers hold, decoded.
func (r *Revoker) current(ctx context.Context, expect int) (*jwt.AccountClaims, error) {
	held, err := r.held(ctx, expect)
	if err != nil {
		return nil, err
	}
	best := held[0]
	for _, ac := range held[1:] {
		if ac.IssuedAt > best.IssuedAt {
			best = ac
		}
	}
	return best, nil
}

// push sends the update and collects acknowledgements.
func (r *Revoker) push(ctx context.Context, acc, signed string, expect int) ([]string, error) {
	msgs, err := r.gather(ctx, "$SYS.REQ.ACCOUNT."+acc+".CLAIMS.UPDATE", []byte(signed), expect)
	if err != nil {
		return nil, err
	}
	var ok []string
	var refused []string
	for _, m := range msgs {
		var a serverAnswer
		if err := json.Unmarshal(m.Data, &a); err != nil {
			refused = append(refused, fmt.Sprintf("unreadable answer %q", m.Data))
			continue
		}
		switch {
		case a.Error != nil:
			refused = append(refused, fmt.Sprintf("%s: %s", a.Server.Name, a.Error.Description))
		case a.Data != nil && a.Data.Code == 200:
			if !slices.Contains(ok, a.Server.Name) {
				ok = append(ok, a.Server.Name)
			}
		}
	}
	sort.Strings(ok)
	if len(refused) > 0 {
		return ok, fmt.Errorf("%w: refused by %v", ErrPush, refused)
	}
	if len(ok) < expect {
		return ok, fmt.Errorf("%w: %d of %d servers acknowledged (%v); the others take it at their next resolver sync", ErrPush, len(ok), expect, ok)
	}
	return ok, nil
}

// Answer bounds of gather.
const (
	// FirstAnswerWait bounds the wait for the first answer to a request.
	FirstAnswerWait = 5 * time.Second
	// RestAnswerWait bounds the wait, after the first answer, for the
	// others when their number is known.
	RestAnswerWait = 2 * time.Second
)

// gather publishes a request and collects answers: the first within
// FirstAnswerWait, then until want arrived (want > 0, for at most
// RestAnswerWait more) or, with want 0, until Gather passes without a new
// one; never past ctx.
func (r *Revoker) gather(ctx context.Context, subj string, data []byte, want int) ([]*nats.Msg, error) {
	inbox := r.nc.NewRespInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPush, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := r.nc.PublishRequest(subj, inbox, data); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrPush, subj, err)
	}
	quiet := r.Gather
	if quiet <= 0 {
		quiet = DefaultGather
	}
	var out []*nats.Msg
	until := time.Now().Add(FirstAnswerWait)
	for want <= 0 || len(out) < want {
		wctx, cancel := context.WithDeadline(ctx, until)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			if len(out) > 0 {
				break
			}
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("%w: no answer on %s: %v", ErrPush, subj, err)
		}
		if len(out) == 0 && want > 0 {
			until = time.Now().Add(RestAnswerWait)
		}
		if want <= 0 {
			until = time.Now().Add(quiet)
		}
		out = append(out, m)
	}
	return out, nil
}
