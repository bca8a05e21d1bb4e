package natsauth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/natsbus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAuth initialises an auth directory and loads it.
func newAuth(t *testing.T) *Authority {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := Init(dir, DefaultInitOptions()); err != nil {
		t.Fatalf("Init: %v", err)
	}
	a, err := Load(dir)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return a
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serverConfigs are n operator-mode configs; n > 1 forms a cluster over
// routes.
func serverConfigs(t *testing.T, a *Authority, n int) []natsbus.ServerConfig {
	t.Helper()
	cfgs := make([]natsbus.ServerConfig, n)
	var routes []string
	for i := range cfgs {
		c := natsbus.DefaultServerConfig()
		c.Name, c.Port, c.StoreDir = fmt.Sprintf("n%d", i), freePort(t), t.TempDir()
		op := a.ServerAuth(t.TempDir())
		c.Operator = &op
		if n > 1 {
			c.ClusterName, c.ClusterPort = "writ-test", freePort(t)
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", c.ClusterPort))
		}
		cfgs[i] = c
	}
	for i := range cfgs {
		cfgs[i].Routes = routes
	}
	return cfgs
}

func startServers(t *testing.T, cfgs []natsbus.ServerConfig) []*server.Server {
	t.Helper()
	// A port freePort found free can be taken by another test process
	// before the server binds it: start the set again on fresh ports.
	for attempt := 1; ; attempt++ {
		out, errs := startServersOnce(cfgs)
		var failed error
		for i, err := range errs {
			if err != nil && failed == nil {
				failed = fmt.Errorf("server %d: %w", i, err)
			}
		}
		if failed == nil {
			t.Cleanup(func() { stopServers(out) })
			return out
		}
		stopServers(out)
		if attempt == 3 || !strings.Contains(failed.Error(), "address already in use") {
			t.Fatal(failed)
		}
		t.Logf("%v; starting the servers again on other ports", failed)
		repickPorts(t, cfgs)
	}
}

func startServersOnce(cfgs []natsbus.ServerConfig) ([]*server.Server, []error) {
	out := make([]*server.Server, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = natsbus.StartServer(cfgs[i], nil)
		}()
	}
	wg.Wait()
	return out, errs
}

func stopServers(srvs []*server.Server) {
	for _, s := range srvs {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
}

// repickPorts gives every config fresh client and cluster ports and the
// routes between them.
func repickPorts(t *testing.T, cfgs []natsbus.ServerConfig) {
	var routes []string
	for i := range cfgs {
		cfgs[i].Port = freePort(t)
		if cfgs[i].ClusterPort != 0 {
			cfgs[i].ClusterPort = freePort(t)
			routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", cfgs[i].ClusterPort))
		}
	}
	if routes != nil {
		for i := range cfgs {
			cfgs[i].Routes = routes
		}
	}
}

// dial connects with a credential and its inbox prefix, collecting the
// connection's async errors and noting when the server closed it.
type conn struct {
	*nats.Conn
	errs   chan error
	closed chan struct{}
}

func dial(t *testing.T, url string, c Credential, extra ...nats.Option) (*conn, error) {
	t.Helper()
	cn := &conn{errs: make(chan error, 32), closed: make(chan struct{})}
	opts := append([]nats.Option{
		nats.UserJWTAndSeed(c.JWT, string(c.Seed)),
		nats.CustomInboxPrefix(natsbus.InboxPrefix(c.Name)),
		nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case cn.errs <- err:
			default:
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(cn.closed) }),
	}, extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	cn.Conn = nc
	t.Cleanup(nc.Close)
	return cn, nil
}

func mustDial(t *testing.T, url string, c Credential) *conn {
	t.Helper()
	cn, err := dial(t, url, c)
	if err != nil {
		t.Fatalf("connect as %s: %v", c.Identity, err)
	}
	return cn
}

func mint(t *testing.T, a *Authority, id Identity, ttl time.Duration) Credential {
	t.Helper()
	var exp time.Time
	if ttl > 0 {
		exp = time.Now().Add(ttl)
	}
	c, err := a.Mint(id, exp)
	if err != nil {
		t.Fatalf("Mint(%s): %v", id, err)
	}
	return c
}

// The server's refusal at connect, as nats.go reports it.
const (
	authViolation = "authorization violation"
)

// refusedAtConnect asserts that connecting with c fails with the server's
// refusal want.
func refusedAtConnect(t *testing.T, url string, c Credential, want string) {
	t.Helper()
	cn, err := dial(t, url, c)
	if err == nil {
		cn.Close()
		t.Fatalf("%s connected; want refused", c.Identity)
	}
	if !strings.Contains(strings.ToLower(err.Error()), want) {
		t.Fatalf("%s: connect error %v; want %v", c.Identity, err, want)
	}
}

// waitClosed waits until the server closed cn.
func waitClosed(t *testing.T, cn *conn, what string) {
	t.Helper()
	select {
	case <-cn.closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: connection still open", what)
	}
}

// responder is an issuer-role connection answering writ.api.> and
// recording every subject it saw.
type responder struct {
	mu   sync.Mutex
	seen []string
}

func (r *responder) saw() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func startResponder(t *testing.T, a *Authority, url string) *responder {
	t.Helper()
	iss := mustDial(t, url, mint(t, a, Identity{Role: RoleIssuer, Name: "writ-issuer-test"}, 0))
	r := &responder{}
	if _, err := iss.Subscribe("writ.api.>", func(m *nats.Msg) {
		r.mu.Lock()
		r.seen = append(r.seen, m.Subject)
		r.mu.Unlock()
		_ = m.Respond([]byte("ok"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := iss.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

func expectViolation(t *testing.T, cn *conn, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-cn.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation for %q", subject)
		}
	}
}

func TestInitWritesPrivateFilesAndNeverOverwrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	res, err := Init(dir, DefaultInitOptions())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode: %v %v", st.Mode(), err)
	}
	before := map[string][]byte{}
	for _, f := range Files {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", f, st.Mode().Perm())
		}
		before[f], _ = os.ReadFile(filepath.Join(dir, f))
	}
	if res.Account == "" || res.SystemAccount == "" || res.Operator == "" {
		t.Fatalf("result lacks keys: %+v", res)
	}
	// A second Init refuses and changes nothing, even with one file left.
	if _, err := Init(dir, DefaultInitOptions()); !errors.Is(err, ErrExists) {
		t.Fatalf("second Init: %v, want ErrExists", err)
	}
	for _, f := range Files[1:] {
		_ = os.Remove(filepath.Join(dir, f))
	}
	if _, err := Init(dir, DefaultInitOptions()); !errors.Is(err, ErrExists) {
		t.Fatalf("Init over a remaining %s: %v, want ErrExists", Files[0], err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, Files[0])); string(got) != string(before[Files[0]]) {
		t.Fatal("Init overwrote the operator seed")
	}
}

func TestLoadChecks(t *testing.T) {
	a := newAuth(t)
	if a.Operator.SystemAccount != a.System.Subject || !a.Operator.StrictSigningKeyUsage {
		t.Fatalf("operator JWT: system %s strict %v", a.Operator.SystemAccount, a.Operator.StrictSigningKeyUsage)
	}
	if a.Account.Limits.JetStreamLimits.DiskStorage == 0 {
		t.Fatal("writ account has JetStream disabled")
	}
	other := newAuth(t)
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		want  error
	}{
		{"seed readable by others", func(dir string) { _ = os.Chmod(filepath.Join(dir, AccountSigningSeedFile), 0o644) }, ErrBadDir},
		{"missing account JWT", func(dir string) { _ = os.Remove(filepath.Join(dir, AccountJWTFile)) }, ErrBadDir},
		{"account from another operator", func(dir string) { copyFile(t, other.Dir, dir, AccountJWTFile) }, ErrBadDir},
		{"signing key of another account", func(dir string) { copyFile(t, other.Dir, dir, AccountSigningSeedFile) }, ErrBadDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "auth")
			if _, err := Init(dir, DefaultInitOptions()); err != nil {
				t.Fatal(err)
			}
			tc.setup(dir)
			if _, err := Load(dir); !errors.Is(err, tc.want) {
				t.Fatalf("Load: %v, want %v", err, tc.want)
			}
		})
	}
	// Without signing seeds, Load works and the operations say what they need.
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := Init(dir, DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{AccountSigningSeedFile, OperatorSigningSeedFile, SystemSigningSeedFile} {
		_ = os.Remove(filepath.Join(dir, f))
	}
	pub, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.MintWorker("w1", 0, time.Now().Add(time.Hour)); !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), AccountSigningSeedFile) {
		t.Fatalf("Mint without the account signing key: %v", err)
	}
	if _, err := pub.NewRevoker(&nats.Conn{}); !errors.Is(err, ErrMissingKey) {
		t.Fatalf("NewRevoker without the operator signing key: %v", err)
	}
}

func copyFile(t *testing.T, from, to, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(from, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
}

func TestMintShapes(t *testing.T) {
	a := newAuth(t)
	now := time.Now()
	for _, tc := range []struct {
		name string
		id   Identity
		exp  time.Time
		want error
	}{
		{"worker", Worker("w1", 0), now.Add(time.Hour), nil},
		{"worker without expiry", Worker("w1", 0), time.Time{}, ErrInvalid},
		{"already expired", Worker("w1", 0), now.Add(-time.Second), ErrInvalid},
		{"name spanning tokens", Worker("w1.x", 0), now.Add(time.Hour), ErrInvalid},
		{"wildcard name", Worker(">", 0), now.Add(time.Hour), ErrInvalid},
		{"auditor without expiry", Identity{Role: RoleAuditor, Name: "aud"}, time.Time{}, nil},
		{"incarnation on an auditor", Identity{Role: RoleAuditor, Name: "aud", Incarnation: 1}, time.Time{}, ErrInvalid},
		{"unknown role", Identity{Role: "root", Name: "x"}, time.Time{}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Mint(tc.id, tc.exp)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Mint: %v, want %v", err, tc.want)
			}
			if err != nil {
				return
			}
			uc, err := jwt.DecodeUserClaims(c.JWT)
			if err != nil {
				t.Fatal(err)
			}
			if uc.IssuerAccount != a.Account.Subject || !a.Account.DidSign(uc) {
				t.Fatalf("user JWT not signed through the writ account: issuer %s account %s", uc.Issuer, uc.IssuerAccount)
			}
			if tc.id.Role == RoleWorker {
				if got := []string(uc.Pub.Allow); len(got) != 1 || got[0] != "writ.api."+tc.id.Name+".>" {
					t.Fatalf("worker publish allow %v", got)
				}
				// Its own inbox and the leader's announcements.
				if got := []string(uc.Sub.Allow); len(got) != 2 || got[0] != "_INBOX."+tc.id.Name+".>" || got[1] != "writ.leader" {
					t.Fatalf("worker subscribe allow %v", got)
				}
				if uc.Expires != tc.exp.Unix() {
					t.Fatalf("expires %d, want %d", uc.Expires, tc.exp.Unix())
				}
			}
			creds, err := c.Creds()
			if err != nil {
				t.Fatal(err)
			}
			if j, err := jwt.ParseDecoratedJWT(creds); err != nil || j != c.JWT {
				t.Fatalf("creds file does not carry the JWT: %v", err)
			}
		})
	}
	// Keys: stable per identity, distinct across names and incarnations.
	k1, _ := a.UserKey(Worker("w1", 0))
	k1b, _ := a.UserKey(Worker("w1", 0))
	k2, _ := a.UserKey(Worker("w1", 1))
	k3, _ := a.UserKey(Worker("w2", 0))
	k4, _ := a.UserKey(Identity{Role: RoleReviewer, Name: "w1"})
	if k1 != k1b || k1 == k2 || k1 == k3 || k1 == k4 {
		t.Fatalf("user keys: %s %s %s %s %s", k1, k1b, k2, k3, k4)
	}
}

// TestWorkerCredentialEnforcedByNATS: a minted worker credential can
// request under its own subject; publishing under another worker's subject,
// an operator subject or an event subject, and reading others' replies, are
// refused by the server, and the issuer never sees those messages.
func TestWorkerCredentialEnforcedByNATS(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	r := startResponder(t, a, url)

	w1 := mustDial(t, url, mint(t, a, Worker("w1", 0), time.Hour))
	reply, err := w1.Request("writ.api.w1.grant", []byte("req"), 3*time.Second)
	if err != nil || string(reply.Data) != "ok" {
		t.Fatalf("w1's request under its own subject: %v", err)
	}
	for _, subj := range []string{"writ.api.w2.grant", "writ.op.revoke", "writ.evt.permit"} {
		if err := w1.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		expectViolation(t, w1, subj)
	}
	if _, err := w1.SubscribeSync("_INBOX.>"); err != nil {
		t.Fatal(err)
	}
	expectViolation(t, w1, "_INBOX.>")
	// A last good request orders after the refused publishes: by the time
	// it is answered the issuer would have seen them.
	if _, err := w1.Request("writ.api.w1.fence", nil, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := r.saw(); len(got) != 2 || got[0] != "writ.api.w1.grant" || got[1] != "writ.api.w1.fence" {
		t.Fatalf("the issuer saw %v; want only w1's own two requests", got)
	}
	// A credential of another operator's account is refused at connect.
	refusedAtConnect(t, url, mint(t, newAuth(t), Worker("w1", 0), time.Hour), authViolation)
}

// TestExpiredCredentialRefused: the server closes a connection when its
// JWT expires and refuses the JWT at connect afterwards.
func TestExpiredCredentialRefused(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	startResponder(t, a, url)

	c := mint(t, a, Worker("w1", 0), 2*time.Second)
	w1 := mustDial(t, url, c)
	if _, err := w1.Request("writ.api.w1.grant", nil, 3*time.Second); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	waitClosed(t, w1, "expired credential")
	if time.Now().Before(c.Expires) {
		t.Fatalf("closed at %v, before the expiry %v", time.Now(), c.Expires)
	}
	// JWT times have one-second resolution: within its expiry second the
	// server may still accept the JWT at connect (and close the connection
	// at once); from the next second on it refuses it.
	if wait := time.Until(time.Unix(c.Expires.Unix()+1, 0)); wait > 0 {
		time.Sleep(wait) // the end of a known second, not a poll
	}
	refusedAtConnect(t, url, c, authViolation)
}

func sysRevoker(t *testing.T, a *Authority, url string) *Revoker {
	t.Helper()
	sc, err := a.SystemCredential("writ-revoke-test", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	cn := mustDial(t, url, sc)
	r, err := a.NewRevoker(cn.Conn)
	if err != nil {
		t.Fatal(err)
	}
	r.Settle = -1 // TestStalePushIsRepaired covers the settle check
	return r
}

// TestRevokedCredentialRefused: once Revoke returns, the revoked worker's
// open connection is closed and its credential is refused at connect,
// while the worker's next incarnation and other workers keep working.
func TestRevokedCredentialRefused(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	startResponder(t, a, url)

	c := mint(t, a, Worker("w1", 0), time.Hour)
	w1 := mustDial(t, url, c)
	w2 := mustDial(t, url, mint(t, a, Worker("w2", 0), time.Hour))
	rv := sysRevoker(t, a, url)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev, err := rv.RevokeWorker(ctx, "w1", 0)
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if len(rev.Servers) != 1 || rev.Expected != 1 {
		t.Fatalf("acknowledged by %v of %d", rev.Servers, rev.Expected)
	}
	waitClosed(t, w1, "revoked worker's open connection")
	refusedAtConnect(t, url, c, authViolation)
	if _, err := w2.Request("writ.api.w2.grant", nil, 3*time.Second); err != nil {
		t.Fatalf("w2 after w1's revocation: %v", err)
	}
	// The next incarnation has its own key and is untouched.
	next := mustDial(t, url, mint(t, a, Worker("w1", 1), time.Hour))
	if _, err := next.Request("writ.api.w1.grant", nil, 3*time.Second); err != nil {
		t.Fatalf("w1's next incarnation: %v", err)
	}
	// A second revocation keeps the first: revocations accumulate.
	if _, err := rv.RevokeWorker(ctx, "w2", 0); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, w2, "w2 after its revocation")
	refusedAtConnect(t, url, c, authViolation)

	// Saved in the auth directory, the revocations reach a server started
	// later with an empty resolver (a new cluster).
	if err := a.SaveAccountJWT(rev.AccountJWT); err != nil {
		t.Fatal(err)
	}
	w3 := mint(t, a, Worker("w3", 0), time.Hour)
	last, err := rv.RevokeWorker(ctx, "w3", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SaveAccountJWT(last.AccountJWT); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveAccountJWT(rev.AccountJWT); err != nil { // older: kept out
		t.Fatal(err)
	}
	reloaded, err := Load(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	fresh := natsbus.ClientURL(startServers(t, serverConfigs(t, reloaded, 1))[0])
	refusedAtConnect(t, fresh, c, authViolation)
	refusedAtConnect(t, fresh, w3, authViolation)
	mustDial(t, fresh, mint(t, a, Worker("w1", 1), time.Hour))
}

// TestRevocationReachesEveryClusterServer: a revocation pushed through one
// server of a three-node cluster closes the worker's connection on another
// and is refused at connect on every server.
func TestRevocationReachesEveryClusterServer(t *testing.T) {
	a := newAuth(t)
	srvs := startServers(t, serverConfigs(t, a, 3))
	urls := make([]string, len(srvs))
	for i, s := range srvs {
		urls[i] = natsbus.ClientURL(s)
	}
	startResponder(t, a, urls[0])
	c := mint(t, a, Worker("w1", 0), time.Hour)
	w1 := mustDial(t, urls[2], c)
	// Wait until the routes carry interest: w1 on n2 reaches the issuer on n0.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := w1.Request("writ.api.w1.grant", nil, time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster never carried w1's request")
		}
	}
	rv := sysRevoker(t, a, urls[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The servers find each other over routes and the system account
	// before they answer a ping together: retry until all three do.
	var rev Revocation
	var err error
	for {
		rev, err = rv.RevokeWorker(ctx, "w1", 0)
		if err == nil && rev.Expected == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Revoke: %v (acknowledged by %v of %d)", err, rev.Servers, rev.Expected)
		}
	}
	if strings.Join(rev.Servers, ",") != "n0,n1,n2" {
		t.Fatalf("acknowledged by %v", rev.Servers)
	}
	waitClosed(t, w1, "w1 connected to another server")
	for _, u := range urls {
		refusedAtConnect(t, u, c, authViolation)
	}
}

// TestJetStreamInOperatorMode: the writ account's JWT enables JetStream,
// so the issuer's connection can create the receipt stream.
func TestJetStreamInOperatorMode(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	iss := mustDial(t, natsbus.ClientURL(s), mint(t, a, Identity{Role: RoleIssuer, Name: "writ-issuer-n0"}, 0))
	js, err := jetstream.New(iss.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := natsbus.EnsureStream(ctx, js, 1); err != nil {
		t.Fatalf("EnsureStream in operator mode: %v", err)
	}
}

// TestManagerInProcess: what an issuer node holds: a Manager over an
// in-process system-account connection mints a spawned worker's
// credential and revokes it together with another identity in one push.
func TestManagerInProcess(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	startResponder(t, a, url)
	sc, err := a.SystemCredential("writ-issuer-n0-sys", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := nats.Connect(url, nats.InProcessServer(s), nats.UserJWTAndSeed(sc.JWT, string(sc.Seed)),
		nats.CustomInboxPrefix(natsbus.InboxPrefix(sc.Name)))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	m, err := NewManager(a, sys)
	if err != nil {
		t.Fatal(err)
	}
	child, err := m.MintWorker("child-1", 2, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.MintWorker("child-1", 2, time.Time{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a spawned worker's credential without expiry: %v", err)
	}
	cn := mustDial(t, url, child)
	if _, err := cn.Request("writ.api.child-1.grant", nil, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	parent := mint(t, a, Worker("parent", 0), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev, err := m.Revoke(ctx, Worker("parent", 0), Worker("child-1", 2))
	if err != nil || len(rev.UserKeys) != 2 {
		t.Fatalf("Revoke: %+v %v", rev, err)
	}
	waitClosed(t, cn, "the child's connection")
	refusedAtConnect(t, url, child, authViolation)
	refusedAtConnect(t, url, parent, authViolation)
}

// TestConcurrentRevokersBothHold: two pushers (two issuer nodes, or a node
// and an operator's CLI) revoking different workers at the same time each
// read, modify and push the account JWT; neither revocation is lost.
func TestConcurrentRevokersBothHold(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	creds := map[string]Credential{}
	for _, w := range []string{"a1", "a2", "a3", "a4"} {
		creds[w] = mint(t, a, Worker(w, 0), time.Hour)
	}
	r1, r2 := sysRevoker(t, a, url), sysRevoker(t, a, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, w := range []string{"a1", "a2", "a3", "a4"} {
		r := r1
		if i%2 == 1 {
			r = r2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.RevokeWorker(ctx, w, 0); err != nil {
				errs <- fmt.Errorf("%s: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w, c := range creds {
		if cn, err := dial(t, url, c); err == nil {
			cn.Close()
			t.Errorf("%s connects after its revocation: a concurrent push lost it", w)
		}
	}
}

// TestStalePushIsRepaired: another process pushes an account JWT built
// from the copy before our revocation, just after the servers acknowledged
// ours; the settle check notices the revocation is gone and pushes it
// again, so when Revoke returns it is in force.
func TestStalePushIsRepaired(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	c := mint(t, a, Worker("w1", 0), time.Hour)
	r := sysRevoker(t, a, url)
	r.Settle = DefaultSettle
	other := sysRevoker(t, a, url) // the other process's connection
	key, _ := a.UserKey(Worker("w1", 0))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pushed := make(chan error, 1)
	go func() {
		// Wait until our revocation is in force, then overwrite it with a
		// copy that lacks it (what a pusher that read before ours sends).
		for ctx.Err() == nil {
			cur, err := other.current(ctx, 1)
			if err == nil && cur.Revocations[key] > 0 {
				stale, _ := jwt.DecodeAccountClaims(a.AccountJWT)
				for {
					if now := time.Now().Unix(); now > cur.IssuedAt {
						break
					}
					time.Sleep(20 * time.Millisecond) // until the next second: the resolver compares issue times
				}
				tok, err := stale.Encode(a.operatorSigner)
				if err == nil {
					_, err = other.push(ctx, a.Account.Subject, tok, 1)
				}
				pushed <- err
				return
			}
			time.Sleep(10 * time.Millisecond) // poll interval under ctx's deadline
		}
		pushed <- ctx.Err()
	}()
	if _, err := r.RevokeWorker(ctx, "w1", 0); err != nil {
		t.Fatal(err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("stale push: %v", err)
	}
	cur, err := other.current(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Revocations[key] == 0 {
		t.Fatal("Revoke returned with its revocation overwritten by the stale push")
	}
	refusedAtConnect(t, url, c, authViolation)
}

// TestRevokeKeysAndPrune: RevokeKeys revokes keys signed for key pairs
// generated elsewhere (SignWorkerKey), and a push drops the revocations
// Prune says no longer matter, never the ones it pushes.
func TestRevokeKeysAndPrune(t *testing.T) {
	a := newAuth(t)
	s := startServers(t, serverConfigs(t, a, 1))[0]
	url := natsbus.ClientURL(s)
	r := sysRevoker(t, a, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := make([]string, 3)
	creds := make([]Credential, 3)
	for i := range keys {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		keys[i], _ = kp.PublicKey()
		c, err := a.SignWorkerKey(fmt.Sprintf("p-c%d", i), keys[i], time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		c.Seed, _ = kp.Seed()
		creds[i] = c
		cn := mustDial(t, url, c)
		cn.Close()
	}
	if _, err := r.RevokeKeys(ctx, "not-a-key"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("RevokeKeys of a malformed key: %v", err)
	}
	if _, err := r.RevokeKeys(ctx, keys[0], keys[1]); err != nil {
		t.Fatal(err)
	}
	refusedAtConnect(t, url, creds[0], authViolation)
	refusedAtConnect(t, url, creds[1], authViolation)
	r.Prune = func(k string) bool { return k == keys[0] || k == keys[2] }
	if _, err := r.RevokeKeys(ctx, keys[2]); err != nil {
		t.Fatal(err)
	}
	held, err := r.current(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := held.Revocations[keys[0]]; ok {
		t.Error("the pruned revocation is still in the account JWT")
	}
	for _, k := range keys[1:] {
		if _, ok := held.Revocations[k]; !ok {
			t.Errorf("revocation of %s lost", k)
		}
	}
	refusedAtConnect(t, url, creds[2], authViolation)
}
