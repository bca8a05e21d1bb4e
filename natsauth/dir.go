package natsauth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/writ-dev/writ/natsbus"
)

// Files of an auth directory. Seeds (.nk) are secret; JWTs are public.
const (
	OperatorSeedFile        = "operator.nk"         // offline
	OperatorSigningSeedFile = "operator-signing.nk" // issuer nodes, `issuer auth revoke`
	OperatorJWTFile         = "operator.jwt"
	SystemSeedFile          = "system.nk"         // offline
	SystemSigningSeedFile   = "system-signing.nk" // issuer nodes, `issuer auth revoke`
	SystemJWTFile           = "system.jwt"
	AccountSeedFile         = "account.nk"         // offline
	AccountSigningSeedFile  = "account-signing.nk" // issuer nodes, `issuer auth mint`
	AccountJWTFile          = "account.jwt"
)

// Files lists every file Init writes, in the order it writes them.
var Files = []string{
	OperatorSeedFile, OperatorSigningSeedFile, OperatorJWTFile,
	SystemSeedFile, SystemSigningSeedFile, SystemJWTFile,
	AccountSeedFile, AccountSigningSeedFile, AccountJWTFile,
}

// OfflineFiles are the identity seeds no running process needs: keep them
// off the nodes, backed up, and use them only to re-sign the JWTs (for
// example to replace a signing key that leaked).
var OfflineFiles = []string{OperatorSeedFile, SystemSeedFile, AccountSeedFile}

// Sentinel errors. Errors returned by this package wrap one of these.
var (
	// ErrExists reports that Init, or WriteSecretFile, found a file it
	// would write: keys and credentials are never overwritten.
	ErrExists = errors.New("natsauth: refusing to overwrite")
	// ErrBadDir reports an auth directory that cannot be used: a missing
	// or malformed file, a JWT that does not chain to the operator, or a
	// seed file others may read.
	ErrBadDir = errors.New("natsauth: bad auth directory")
	// ErrMissingKey reports an operation that needs a signing key this
	// Authority was loaded without.
	ErrMissingKey = errors.New("natsauth: signing key not loaded")
	// ErrInvalid reports a bad argument: a name that is not a subject
	// token, an unknown role, a bad expiry.
	ErrInvalid = errors.New("natsauth: invalid argument")
	// ErrPush reports that an account update was not stored by the
	// servers: refused, unanswered, or answered by fewer servers than
	// expected.
	ErrPush = errors.New("natsauth: account update not pushed")
)

// InitOptions name what Init creates. Build them with DefaultInitOptions.
type InitOptions struct {
	OperatorName string
	AccountName  string
}

// DefaultInitOptions names the operator "writ" and the account "writ".
func DefaultInitOptions() InitOptions {
	return InitOptions{OperatorName: "writ", AccountName: "writ"}
}

// Validate checks the options; the error names the field.
func (o InitOptions) Validate() error {
	if err := natsbus.ValidToken(o.OperatorName); err != nil {
		return fmt.Errorf("%w: OperatorName: %v", ErrInvalid, err)
	}
	if err := natsbus.ValidToken(o.AccountName); err != nil {
		return fmt.Errorf("%w: AccountName: %v", ErrInvalid, err)
	}
	return nil
}

// InitResult describes what Init created: the public keys and the files.
type InitResult struct {
	Dir             string   `json:"dir"`
	Operator        string   `json:"operator"`
	OperatorSigning string   `json:"operator_signing_key"`
	SystemAccount   string   `json:"system_account"`
	Account         string   `json:"account"`
	AccountSigning  string   `json:"account_signing_key"`
	Files           []string `json:"files"`
	Offline         []string `json:"offline"`
}

// Init creates the operator, the system account and the writ account, with
// a signing key each, in dir (created 0700 if missing), every file 0600.
// It refuses (ErrExists) when any of Files is already there, and removes
// what it wrote when it fails part way.
func Init(dir string, o InitOptions) (InitResult, error) {
	if err := o.Validate(); err != nil {
		return InitResult{}, err
	}
	if strings.TrimSpace(dir) == "" {
		return InitResult{}, fmt.Errorf("%w: dir: required", ErrInvalid)
	}
	for _, f := range Files {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return InitResult{}, fmt.Errorf("%w: %s exists; Init never overwrites keys (choose an empty directory, or keep using this one)", ErrExists, filepath.Join(dir, f))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return InitResult{}, fmt.Errorf("%w: %v", ErrBadDir, err)
	}

	keys := map[string]nkeys.KeyPair{}
	for f, mk := range map[string]func() (nkeys.KeyPair, error){
		OperatorSeedFile: nkeys.CreateOperator, OperatorSigningSeedFile: nkeys.CreateOperator,
		SystemSeedFile: nkeys.CreateAccount, SystemSigningSeedFile: nkeys.CreateAccount,
		AccountSeedFile: nkeys.CreateAccount, AccountSigningSeedFile: nkeys.CreateAccount,
	} {
		kp, err := mk()
		if err != nil {
			return InitResult{}, fmt.Errorf("natsauth: creating key: %w", err)
		}
		keys[f] = kp
	}
	pub := func(f string) string { p, _ := keys[f].PublicKey(); return p }
	opPub, opSign := pub(OperatorSeedFile), pub(OperatorSigningSeedFile)
	sysPub, sysSign := pub(SystemSeedFile), pub(SystemSigningSeedFile)
	accPub, accSign := pub(AccountSeedFile), pub(AccountSigningSeedFile)

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = o.OperatorName
	oc.SigningKeys.Add(opSign)
	oc.StrictSigningKeyUsage = true
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(keys[OperatorSeedFile])
	if err != nil {
		return InitResult{}, fmt.Errorf("natsauth: signing the operator JWT: %w", err)
	}
	sc := jwt.NewAccountClaims(sysPub)
	sc.Name = "SYS"
	sc.SigningKeys.Add(sysSign)
	sysJWT, err := sc.Encode(keys[OperatorSigningSeedFile])
	if err != nil {
		return InitResult{}, fmt.Errorf("natsauth: signing the system account JWT: %w", err)
	}
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = o.AccountName
	ac.SigningKeys.Add(accSign)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit,
		Consumer: jwt.NoLimit, MaxAckPending: jwt.NoLimit,
	}
	accJWT, err := ac.Encode(keys[OperatorSigningSeedFile])
	if err != nil {
		return InitResult{}, fmt.Errorf("natsauth: signing the account JWT: %w", err)
	}

	contents := map[string][]byte{OperatorJWTFile: []byte(opJWT + "\n"), SystemJWTFile: []byte(sysJWT + "\n"), AccountJWTFile: []byte(accJWT + "\n")}
	for f, kp := range keys {
		seed, err := kp.Seed()
		if err != nil {
			return InitResult{}, fmt.Errorf("natsauth: %w", err)
		}
		contents[f] = append(seed, '\n')
	}
	var written []string
	for _, f := range Files {
		p := filepath.Join(dir, f)
		if err := writeNew(p, contents[f]); err != nil {
			for _, w := range written {
				_ = os.Remove(w)
			}
			if errors.Is(err, fs.ErrExist) {
				return InitResult{}, fmt.Errorf("%w: %s appeared while writing; nothing was kept", ErrExists, p)
			}
			return InitResult{}, fmt.Errorf("%w: writing %s: %v (nothing was kept)", ErrBadDir, p, err)
		}
		written = append(written, p)
	}
	return InitResult{
		Dir: dir, Operator: opPub, OperatorSigning: opSign, SystemAccount: sysPub,
		Account: accPub, AccountSigning: accSign, Files: append([]string(nil), Files...),
		Offline: append([]string(nil), OfflineFiles...),
	}, nil
}

// writeNew creates path 0600, failing if it exists, and syncs it.
func writeNew(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteSecretFile writes b to path with mode 0600, refusing to replace an
// existing file: for credentials handed out on disk.
func WriteSecretFile(path string, b []byte) error {
	if err := writeNew(path, b); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s exists; remove it first or choose another file", ErrExists, path)
		}
		return err
	}
	return nil
}

// Authority is a loaded auth directory: the JWTs and whichever signing
// keys were present.
type Authority struct {
	Dir         string
	OperatorJWT string
	SystemJWT   string
	AccountJWT  string
	Operator    *jwt.OperatorClaims
	System      *jwt.AccountClaims
	Account     *jwt.AccountClaims

	operatorSigner nkeys.KeyPair
	systemSigner   nkeys.KeyPair
	accountSigner  nkeys.KeyPair
}

// Load reads dir: the three JWTs (required) and the signing seeds that are
// present. It checks that the JWTs chain (the operator signed both
// accounts, the system account is the operator's, each seed is a signing
// key its JWT lists) and refuses a seed file that group or others may read.
// Identity seeds are never read.
func Load(dir string) (*Authority, error) {
	a := &Authority{Dir: dir}
	var err error
	if a.OperatorJWT, err = readJWT(dir, OperatorJWTFile); err != nil {
		return nil, err
	}
	if a.SystemJWT, err = readJWT(dir, SystemJWTFile); err != nil {
		return nil, err
	}
	if a.AccountJWT, err = readJWT(dir, AccountJWTFile); err != nil {
		return nil, err
	}
	if a.Operator, err = jwt.DecodeOperatorClaims(a.OperatorJWT); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadDir, filepath.Join(dir, OperatorJWTFile), err)
	}
	if a.System, err = jwt.DecodeAccountClaims(a.SystemJWT); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadDir, filepath.Join(dir, SystemJWTFile), err)
	}
	if a.Account, err = jwt.DecodeAccountClaims(a.AccountJWT); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadDir, filepath.Join(dir, AccountJWTFile), err)
	}
	for _, c := range []struct {
		f  string
		ac *jwt.AccountClaims
	}{{SystemJWTFile, a.System}, {AccountJWTFile, a.Account}} {
		if !a.Operator.DidSign(c.ac) {
			return nil, fmt.Errorf("%w: %s is not signed by the operator in %s", ErrBadDir, filepath.Join(dir, c.f), OperatorJWTFile)
		}
	}
	if a.Operator.SystemAccount != a.System.Subject {
		return nil, fmt.Errorf("%w: %s names system account %s, but %s is %s", ErrBadDir, OperatorJWTFile, a.Operator.SystemAccount, SystemJWTFile, a.System.Subject)
	}
	if a.operatorSigner, err = readSigner(dir, OperatorSigningSeedFile, func(pub string) bool { return a.Operator.SigningKeys.Contains(pub) }); err != nil {
		return nil, err
	}
	if a.systemSigner, err = readSigner(dir, SystemSigningSeedFile, func(pub string) bool { return a.System.SigningKeys.Contains(pub) }); err != nil {
		return nil, err
	}
	if a.accountSigner, err = readSigner(dir, AccountSigningSeedFile, func(pub string) bool { return a.Account.SigningKeys.Contains(pub) }); err != nil {
		return nil, err
	}
	return a, nil
}

func readJWT(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("%w: %v (create the directory with `issuer auth init --dir %s`)", ErrBadDir, err, dir)
	}
	return strings.TrimSpace(string(b)), nil
}

// readSigner reads a signing seed, or returns nil when the file is absent.
func readSigner(dir, name string, listed func(pub string) bool) (nkeys.KeyPair, error) {
	p := filepath.Join(dir, name)
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDir, err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: others can read a signing key; chmod 600 %s", ErrBadDir, p, st.Mode().Perm(), p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadDir, err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: not an nkey seed: %v", ErrBadDir, p, err)
	}
	pub, _ := kp.PublicKey()
	if !listed(pub) {
		return nil, fmt.Errorf("%w: %s holds key %s, which its JWT does not list as a signing key", ErrBadDir, p, pub)
	}
	return kp, nil
}

// ServerAuth is the operator-mode setting of the embedded servers: trust
// this operator, keep accounts in resolverDir, preload both accounts.
func (a *Authority) ServerAuth(resolverDir string) natsbus.OperatorAuth {
	return natsbus.OperatorAuth{
		OperatorJWT:   a.OperatorJWT,
		SystemAccount: a.System.Subject,
		Accounts:      []string{a.SystemJWT, a.AccountJWT},
		ResolverDir:   resolverDir,
	}
}

// need reports ErrMissingKey naming the file when kp is nil.
func (a *Authority) need(kp nkeys.KeyPair, file, what string) error {
	if kp == nil {
		return fmt.Errorf("%w: %s needs %s in %s", ErrMissingKey, what, file, a.Dir)
	}
	return nil
}

// CanServe reports whether the Authority holds the three signing keys an
// issuer node needs (ErrMissingKey naming the first missing file).
func (a *Authority) CanServe() error {
	for _, k := range []struct {
		kp   nkeys.KeyPair
		file string
	}{{a.operatorSigner, OperatorSigningSeedFile}, {a.systemSigner, SystemSigningSeedFile}, {a.accountSigner, AccountSigningSeedFile}} {
		if err := a.need(k.kp, k.file, "an issuer node"); err != nil {
			return err
		}
	}
	return nil
}

// SaveAccountJWT replaces the directory's account JWT with token (a
// Revocation's AccountJWT) when token is the same account, signed by the
// operator, and newer; an older or equal one is left alone. The file is
// replaced atomically and stays 0600.
func (a *Authority) SaveAccountJWT(token string) error {
	ac, err := jwt.DecodeAccountClaims(token)
	if err != nil {
		return fmt.Errorf("%w: not an account JWT: %v", ErrInvalid, err)
	}
	if ac.Subject != a.Account.Subject || !a.Operator.DidSign(ac) {
		return fmt.Errorf("%w: account JWT of %s, not signed by this operator for %s", ErrInvalid, ac.Subject, a.Account.Subject)
	}
	p := filepath.Join(a.Dir, AccountJWTFile)
	if cur, err := readJWT(a.Dir, AccountJWTFile); err == nil {
		if cc, err := jwt.DecodeAccountClaims(cur); err == nil && cc.IssuedAt >= ac.IssuedAt {
			return nil
		}
	}
	tmp := p + ".new"
	_ = os.Remove(tmp)
	if err := writeNew(tmp, []byte(token+"\n")); err != nil {
		return fmt.Errorf("%w: %v", ErrBadDir, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %v", ErrBadDir, err)
	}
	a.AccountJWT, a.Account = token, ac
	return nil
}
