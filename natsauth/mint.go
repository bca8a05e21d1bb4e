package natsauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/writ-dev/writ/natsbus"
)

// Role is what a credential may do; each maps to a natsbus role builder.
type Role string

// Roles.
const (
	RoleWorker   Role = "worker"   // publish writ.api.<name>.>
	RoleOperator Role = "operator" // publish writ.op.>
	RoleReviewer Role = "reviewer" // publish writ.review.<name>.>
	RoleAuditor  Role = "auditor"  // read the receipts
	RoleIssuer   Role = "issuer"   // everything (an issuer node's own connection)
)

// Roles lists every role in the order help texts show them.
var Roles = []Role{RoleWorker, RoleOperator, RoleReviewer, RoleAuditor, RoleIssuer}

// Identity is who a credential speaks for. Incarnation is meaningful for
// workers only (0 for every other role): each incarnation of a worker has
// its own user key.
type Identity struct {
	Role        Role   `json:"role"`
	Name        string `json:"name"`
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// Worker is the identity of a worker's incarnation.
func Worker(name string, incarnation uint64) Identity {
	return Identity{Role: RoleWorker, Name: name, Incarnation: incarnation}
}

// Validate checks the name (one subject token) and the role.
func (id Identity) Validate() error {
	if err := natsbus.ValidToken(id.Name); err != nil {
		return fmt.Errorf("%w: name: %v", ErrInvalid, err)
	}
	switch id.Role {
	case RoleWorker:
	case RoleOperator, RoleReviewer, RoleAuditor, RoleIssuer:
		if id.Incarnation != 0 {
			return fmt.Errorf("%w: incarnation: only a worker has incarnations (role %s)", ErrInvalid, id.Role)
		}
	default:
		return fmt.Errorf("%w: role: %q is not one of %v", ErrInvalid, id.Role, Roles)
	}
	return nil
}

// String is role:name, with #incarnation for a worker's later incarnations.
func (id Identity) String() string {
	s := string(id.Role) + ":" + id.Name
	if id.Incarnation != 0 {
		s += "#" + strconv.FormatUint(id.Incarnation, 10)
	}
	return s
}

// user is the natsbus role user whose permissions the JWT carries.
func (id Identity) user() natsbus.User {
	switch id.Role {
	case RoleWorker:
		return natsbus.WorkerUser(id.Name, "")
	case RoleOperator:
		return natsbus.OperatorUser(id.Name, "")
	case RoleReviewer:
		return natsbus.ReviewerUser(id.Name, "")
	case RoleAuditor:
		return natsbus.AuditorUser(id.Name, "")
	default:
		return natsbus.IssuerUser(id.Name, "")
	}
}

// Credential is a minted user: the JWT and the seed that proves it.
type Credential struct {
	Identity
	UserKey  string    `json:"user_key"`
	Account  string    `json:"account"`
	JWT      string    `json:"-"`
	Seed     []byte    `json:"-"`
	IssuedAt time.Time `json:"issued_at"`
	Expires  time.Time `json:"expires,omitzero"` // zero: never
	Publish  []string  `json:"publish,omitempty"`
	Receive  []string  `json:"subscribe,omitempty"`
}

// Creds is the credential in NATS's .creds file format, which
// nats.UserCredentials, the nats CLI and writ's --nats-creds read.
func (c Credential) Creds() ([]byte, error) {
	return jwt.FormatUserConfig(c.JWT, c.Seed)
}

// deriveKey computes the user key of id in the account whose signing key
// is signer: the seed is HMAC-SHA256 of the identity under the signing
// seed, so it is stable across nodes and restarts and differs for every
// role, name and incarnation.
func deriveKey(signer nkeys.KeyPair, domain string, id Identity) (nkeys.KeyPair, error) {
	secret, err := signer.Seed()
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("writ/natsauth/user/v1\x00" + domain + "\x00" + string(id.Role) + "\x00" + id.Name + "\x00" + strconv.FormatUint(id.Incarnation, 10)))
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	return kp, nil
}

// UserKey is the public user key Mint uses for id (what a revocation
// names).
func (a *Authority) UserKey(id Identity) (string, error) {
	if err := id.Validate(); err != nil {
		return "", err
	}
	if err := a.need(a.accountSigner, AccountSigningSeedFile, "deriving user keys"); err != nil {
		return "", err
	}
	kp, err := deriveKey(a.accountSigner, a.Account.Subject, id)
	if err != nil {
		return "", err
	}
	return kp.PublicKey()
}

// MinLifetime is the shortest lifetime Mint accepts: JWT expiry has
// one-second resolution.
const MinLifetime = time.Second

// Mint issues a user JWT in the writ account for id, signed with the
// account signing key, with the role's permissions, valid until expires.
// A zero expires means no expiry, which a worker credential may not have.
func (a *Authority) Mint(id Identity, expires time.Time) (Credential, error) {
	return a.mintAt(id, time.Now(), expires)
}

// MintWorker is Mint for a worker's incarnation; it is what the issuer
// calls for a spawned worker, with the worker's end of life as expires.
func (a *Authority) MintWorker(worker string, incarnation uint64, expires time.Time) (Credential, error) {
	return a.Mint(Worker(worker, incarnation), expires)
}

func (a *Authority) mintAt(id Identity, now, expires time.Time) (Credential, error) {
	if err := id.Validate(); err != nil {
		return Credential{}, err
	}
	if err := a.need(a.accountSigner, AccountSigningSeedFile, "minting credentials"); err != nil {
		return Credential{}, err
	}
	switch {
	case expires.IsZero() && id.Role == RoleWorker:
		return Credential{}, fmt.Errorf("%w: expires: a worker credential must expire", ErrInvalid)
	case !expires.IsZero() && expires.Sub(now) < MinLifetime:
		return Credential{}, fmt.Errorf("%w: expires: %s is less than %s from now", ErrInvalid, expires.UTC().Format(time.RFC3339), MinLifetime)
	}
	kp, err := deriveKey(a.accountSigner, a.Account.Subject, id)
	if err != nil {
		return Credential{}, err
	}
	return a.sign(a.accountSigner, a.Account.Subject, kp, id.Name, id.user(), expires, id)
}

// SignWorkerKey issues a user JWT in the writ account for a worker whose
// user key pair was generated elsewhere (a spawned child's, by its
// parent): userKey is the public key, the JWT carries the worker role's
// permissions (publish writ.api.<worker>.>, receive _INBOX.<worker>.>)
// and expires at expires (required). The Credential has no Seed: whoever
// generated the key pair pairs the JWT with it (WorkerCreds).
func (a *Authority) SignWorkerKey(worker, userKey string, expires time.Time) (Credential, error) {
	id := Worker(worker, 0)
	if err := id.Validate(); err != nil {
		return Credential{}, err
	}
	if !nkeys.IsValidPublicUserKey(userKey) {
		return Credential{}, fmt.Errorf("%w: user key: %q is not a public user nkey", ErrInvalid, userKey)
	}
	if err := a.need(a.accountSigner, AccountSigningSeedFile, "signing worker credentials"); err != nil {
		return Credential{}, err
	}
	now := time.Now()
	switch {
	case expires.IsZero():
		return Credential{}, fmt.Errorf("%w: expires: a worker credential must expire", ErrInvalid)
	case expires.Sub(now) < MinLifetime:
		return Credential{}, fmt.Errorf("%w: expires: %s is less than %s from now", ErrInvalid, expires.UTC().Format(time.RFC3339), MinLifetime)
	}
	return a.signKey(a.accountSigner, a.Account.Subject, userKey, nil, worker, id.user(), expires, id)
}

// WorkerCreds pairs a user JWT signed for a key pair generated locally
// with that key pair's seed, in the .creds file format. It refuses a JWT
// that is not a user JWT for exactly that key.
func WorkerCreds(userJWT string, seed []byte) ([]byte, error) {
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("%w: seed: %v", ErrInvalid, err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: seed: %v", ErrInvalid, err)
	}
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		return nil, fmt.Errorf("%w: user JWT: %v", ErrInvalid, err)
	}
	if uc.Subject != pub {
		return nil, fmt.Errorf("%w: user JWT: signed for %s, not for this key (%s)", ErrInvalid, uc.Subject, pub)
	}
	return jwt.FormatUserConfig(userJWT, seed)
}

// sign builds, signs and packages a user JWT.
func (a *Authority) sign(signer nkeys.KeyPair, account string, kp nkeys.KeyPair, name string, u natsbus.User, expires time.Time, id Identity) (Credential, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return Credential{}, fmt.Errorf("natsauth: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return Credential{}, fmt.Errorf("natsauth: %w", err)
	}
	return a.signKey(signer, account, pub, seed, name, u, expires, id)
}

// signKey builds and signs a user JWT for the public key pub; seed (nil
// when the key pair is someone else's) goes into the Credential.
func (a *Authority) signKey(signer nkeys.KeyPair, account, pub string, seed []byte, name string, u natsbus.User, expires time.Time, id Identity) (Credential, error) {
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	uc.IssuerAccount = account
	applyPermissions(&uc.Permissions, u)
	if !expires.IsZero() {
		uc.Expires = expires.Unix()
	}
	tok, err := uc.Encode(signer)
	if err != nil {
		return Credential{}, fmt.Errorf("natsauth: signing the user JWT: %w", err)
	}
	c := Credential{Identity: id, UserKey: pub, Account: account, JWT: tok, Seed: seed,
		IssuedAt: time.Unix(uc.IssuedAt, 0).UTC(), Publish: u.Publish, Receive: u.Subscribe}
	if !expires.IsZero() {
		c.Expires = time.Unix(uc.Expires, 0).UTC()
	}
	return c, nil
}

// applyPermissions maps a natsbus.User's allow lists: nil leaves a
// direction open; an empty non-nil list denies everything (a JWT's empty
// allow list would allow everything).
func applyPermissions(p *jwt.Permissions, u natsbus.User) {
	set := func(sp *jwt.Permission, subjects []string) {
		switch {
		case subjects == nil:
		case len(subjects) == 0:
			sp.Deny.Add(">")
		default:
			sp.Allow.Add(subjects...)
		}
	}
	set(&p.Pub, u.Publish)
	set(&p.Sub, u.Subscribe)
}

// systemSubjects are what a Revoker's system-account user may publish: the
// resolver's account update and lookup requests and the server ping.
var systemSubjects = []string{
	"$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE",
	"$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP",
	"$SYS.REQ.SERVER.PING",
}

// SystemCredential mints a system-account user named name that may push
// and look up account JWTs and ping the servers, nothing else, valid until
// expires (zero: no expiry). A Revoker's connection uses it. Its key is
// derived like Mint's, so revoking it by name is possible too.
func (a *Authority) SystemCredential(name string, expires time.Time) (Credential, error) {
	id := Identity{Role: "system", Name: name}
	if err := natsbus.ValidToken(name); err != nil {
		return Credential{}, fmt.Errorf("%w: name: %v", ErrInvalid, err)
	}
	if err := a.need(a.systemSigner, SystemSigningSeedFile, "connecting to the system account"); err != nil {
		return Credential{}, err
	}
	kp, err := deriveKey(a.systemSigner, a.System.Subject, id)
	if err != nil {
		return Credential{}, err
	}
	u := natsbus.User{Name: name, Publish: systemSubjects, Subscribe: []string{natsbus.InboxPrefix(name) + ".>"}}
	return a.sign(a.systemSigner, a.System.Subject, kp, name, u, expires, id)
}
