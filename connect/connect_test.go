package connect

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/writ-dev/writ/internal/testing/faultproxy"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/natsauth"
	"github.com/writ-dev/writ/natsbus"
)

func TestInboxPrefixMatchesServerPermissions(t *testing.T) {
	if got, want := InboxPrefix("w1"), natsbus.InboxPrefix("w1"); got != want {
		t.Fatalf("client inbox prefix %q != server permission prefix %q", got, want)
	}
}

func TestDialErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"user without password file", Options{URL: "nats://127.0.0.1:1", User: "w1"}, "--nats-password-file"},
		{"missing password file", Options{URL: "nats://127.0.0.1:1", User: "w1", PasswordFile: filepath.Join(dir, "nope")}, "password file"},
		{"nothing listening", Options{URL: "nats://127.0.0.1:1"}, "issuer serve --dev"},
		{"nothing listening, one try", Options{URL: "nats://127.0.0.1:1", Timeout: time.Minute, ConnectOnce: true}, "issuer serve --dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := tc.o.Dial()
			if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want ErrConnect mentioning %q, got %v", tc.want, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("gave up after %v; none of these is worth retrying for long", d)
			}
		})
	}
}

// The URL comes from --nats-url, else WRIT_NATS_URL, else NATS_URL (the
// NATS ecosystem's variable), else the development default.
func TestURLPrecedence(t *testing.T) {
	cases := []struct {
		name          string
		writ, natsEnv string
		flag          []string
		want          string
	}{
		{"nothing set", "", "", nil, DefaultURL},
		{"NATS_URL only", "", "nats://nats-env:4222", nil, "nats://nats-env:4222"},
		{"WRIT_NATS_URL only", "nats://writ-env:4222", "", nil, "nats://writ-env:4222"},
		{"WRIT_NATS_URL wins over NATS_URL", "nats://writ-env:4222", "nats://nats-env:4222", nil, "nats://writ-env:4222"},
		{"blank WRIT_NATS_URL falls through", "  ", "nats://nats-env:4222", nil, "nats://nats-env:4222"},
		{"the flag wins over both", "nats://writ-env:4222", "nats://nats-env:4222", []string{"--nats-url", "nats://flag:4222"}, "nats://flag:4222"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvURL, tc.writ)
			t.Setenv(EnvURLFallback, tc.natsEnv)
			var o Options
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.flag); err != nil {
				t.Fatal(err)
			}
			if o.URL != tc.want {
				t.Fatalf("URL %q, want %q", o.URL, tc.want)
			}
			usage := fs.FlagUsages()
			for _, w := range []string{EnvURL, EnvURLFallback, "nats://HOST:PORT"} {
				if !strings.Contains(usage, w) {
					t.Errorf("--help does not mention %s:\n%s", w, usage)
				}
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct {
		url  string
		ok   bool
		want string // in the error
	}{
		{"nats://127.0.0.1:4222", true, ""},
		{"127.0.0.1:4222", true, ""},
		{"localhost", true, ""},
		{"tls://a.example:4443, wss://b.example", true, ""},
		{"nats://n1:4222,nats://n2:4222,", true, ""},
		{"", false, "no URL"},
		{" , ", false, "no URL"},
		{"://bad", false, "does not parse"},
		{"http://127.0.0.1:4222", false, `scheme "http"`},
		{"nats://:4222", false, "no host"},
		{"nats://h:99999", false, `port "99999"`},
		{"nats://h:port", false, "does not parse"},
		{"nats://h:4222/path", false, "path"},
		{"nats://n1:4222,ftp://n2", false, `"ftp://n2"`},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			err := CheckURL(tc.url)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadURL) || errors.Is(err, ErrConnect) {
				t.Fatalf("want ErrBadURL (and not ErrConnect), got %v", err)
			}
			for _, w := range []string{tc.want, "nats://HOST:PORT"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Dial refuses a bad URL before it dials anything.
	if _, err := (Options{URL: "http://x", Timeout: time.Minute}).Dial(); !errors.Is(err, ErrBadURL) {
		t.Fatalf("Dial of a bad URL: %v", err)
	}
}

// A server that comes up while Dial is retrying is connected to: the
// timeout covers the first connection, not only the requests after it.
func TestDialRetriesUntilTheServerIsUp(t *testing.T) {
	port := testenv.FreePort(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	// The first try reaches a socket that hangs up, as a server that is
	// not ready yet may; then the real server starts on the same port.
	hungUp := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
		ln.Close()
		close(hungUp)
	}()
	type dialed struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		nc, err := Options{URL: fmt.Sprintf("nats://127.0.0.1:%d", port), Timeout: 30 * time.Second}.Dial()
		done <- dialed{nc, err}
	}()
	select {
	case <-hungUp:
	case d := <-done:
		t.Fatalf("Dial returned before the server was up: %v", d.err)
	case <-time.After(20 * time.Second):
		t.Fatal("Dial never tried")
	}
	select {
	case d := <-done:
		t.Fatalf("Dial gave up after its first try instead of retrying within --timeout: %v", d.err)
	default:
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	select {
	case d := <-done:
		if d.err != nil {
			t.Fatalf("Dial did not connect once the server was up: %v", d.err)
		}
		d.nc.Close()
	case <-time.After(25 * time.Second):
		t.Fatal("Dial did not return")
	}
}

// With nothing listening, Dial keeps trying for --timeout, then names the
// URL, how long it tried and what to do.
func TestDialGivesUpAtTheTimeout(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d", testenv.FreePort(t))
	start := time.Now()
	_, err := Options{URL: url, Timeout: 1500 * time.Millisecond}.Dial()
	d := time.Since(start)
	if !errors.Is(err, ErrConnect) {
		t.Fatalf("want ErrConnect, got %v", err)
	}
	if d < 1400*time.Millisecond || d > 6*time.Second {
		t.Fatalf("gave up after %v with a 1.5s timeout", d)
	}
	for _, w := range []string{url, "kept trying for 1.5s", "issuer serve --dev", EnvURL, EnvURLFallback} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// NATS is up but nothing answers: the error says the issuer did not
// answer, never that NATS is unreachable.
func TestNoAnswerIsNotAConnectionError(t *testing.T) {
	s := testenv.StartNATS(t, false)
	o := Options{URL: s.ClientURL(), Timeout: 300 * time.Millisecond}
	nc, err := o.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("writ.silent") // subscribed, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_, noResponders := nc.Request("writ.nobody", nil, time.Second)
	_, timedOut := nc.Request("writ.silent", nil, 200*time.Millisecond)
	cases := []struct {
		name string
		err  error
		want []string
	}{
		{"no responders", noResponders, []string{"did not answer", "within 300ms", s.ClientURL(), "reachable", "issuer serve", "issuer status"}},
		{"timeout", timedOut, []string{"did not answer", "reachable", "leader", "issuer status", "--timeout"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the request was answered")
			}
			err := o.NoAnswer(tc.err)
			if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, tc.err) || errors.Is(err, ErrConnect) {
				t.Fatalf("want ErrNoAnswer wrapping %v, not ErrConnect; got %v", tc.err, err)
			}
			if strings.Contains(err.Error(), ErrConnect.Error()) {
				t.Errorf("says NATS is unreachable: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// Errors that already say what happened pass through.
	for _, e := range []error{nil, ErrConnect, fmt.Errorf("%w: x", ErrBadURL)} {
		if got := o.NoAnswer(e); got != e {
			t.Errorf("NoAnswer(%v) = %v", e, got)
		}
	}
}

// A connection whose server stalls (it stops answering but keeps the TCP
// connection open, as a paused VM does) moves to the next server in the
// URL list within seconds, and requests are answered again.
func TestStalledServerIsLeftWithinSeconds(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(testenv.SetupTimeout) {
		t.Fatal("nats server did not start")
	}
	// Two routes to the same server: the one the client uses is stalled.
	links := make([]*faultproxy.Link, 2)
	for i := range links {
		l, err := faultproxy.Listen(fmt.Sprintf("nats%d", i), s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		links[i] = l
	}
	echo, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	if _, err := echo.Subscribe("echo", func(m *nats.Msg) { m.Respond(m.Data) }); err != nil {
		t.Fatal(err)
	}
	if err := echo.Flush(); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://%s,nats://%s", links[0].Addr(), links[1].Addr())
	nc, err := Options{URL: url, Timeout: testenv.SetupTimeout}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Request("echo", []byte("before"), 5*time.Second); err != nil {
		t.Fatalf("request before the stall: %v", err)
	}
	first := nc.ConnectedUrl()
	stalled := links[0]
	if strings.Contains(first, links[1].Addr()) {
		stalled = links[1]
	}
	stalled.Set(faultproxy.Faults{Blackhole: true})
	stalledAt := time.Now()

	// Allow the detection time, one failed reconnect attempt to the
	// stalled address (a connect try lasts up to 2s) and slack for a
	// loaded machine; the library's default would take minutes.
	bound := StallDetection + 2*time.Second + 5*time.Second
	for {
		_, err := nc.Request("echo", []byte("after"), 500*time.Millisecond)
		if err == nil && nc.ConnectedUrl() != first {
			t.Logf("answered through %s %s after the stall of %s", nc.ConnectedUrl(), time.Since(stalledAt).Round(100*time.Millisecond), first)
			return
		}
		if time.Since(stalledAt) > bound {
			t.Fatalf("still on the stalled server %s %s after the stall (last error: %v)", first, time.Since(stalledAt).Round(100*time.Millisecond), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDialWithCredsFile: --nats-creds connects to an operator-mode server
// with a minted worker credential, and requests get their replies on the
// worker's own inbox prefix (the only one its permissions allow).
func TestDialWithCredsFile(t *testing.T) {
	a := testAuth(t)
	cfg := natsbus.DefaultServerConfig()
	cfg.Port, cfg.StoreDir = testenv.FreePort(t), t.TempDir()
	op := a.ServerAuth(t.TempDir())
	cfg.Operator = &op
	s, err := natsbus.StartServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	url := natsbus.ClientURL(s)

	issuerFile := writeCreds(t, a, natsauth.Identity{Role: natsauth.RoleIssuer, Name: "writ-issuer-t"}, time.Time{})
	iss, err := Options{URL: url, CredsFile: issuerFile, Timeout: 5 * time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Close()
	if _, err := iss.Subscribe("writ.api.w1.grant", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) }); err != nil {
		t.Fatal(err)
	}
	_ = iss.Flush()

	w1File := writeCreds(t, a, natsauth.Worker("w1", 0), time.Now().Add(time.Hour))
	nc, err := Options{URL: url, CredsFile: w1File, Timeout: 5 * time.Second}.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if m, err := nc.Request("writ.api.w1.grant", nil, 3*time.Second); err != nil || string(m.Data) != "ok" {
		t.Fatalf("request with --nats-creds: %v", err)
	}

	// Refusals say what to do next.
	garbage := filepath.Join(t.TempDir(), "bad.creds")
	_ = os.WriteFile(garbage, []byte("not a creds file"), 0o600)
	other := writeCreds(t, testAuth(t), natsauth.Worker("w1", 0), time.Now().Add(time.Hour))
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"creds and user", Options{URL: url, CredsFile: w1File, User: "w1", Password: "x"}, "use one"},
		{"not a creds file", Options{URL: url, CredsFile: garbage}, "issuer auth mint"},
		{"another operator's creds", Options{URL: url, CredsFile: other}, "issuer auth mint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.o.Dial()
			if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want ErrConnect mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

func testAuth(t testing.TB) *natsauth.Authority {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "auth")
	if _, err := natsauth.Init(dir, natsauth.DefaultInitOptions()); err != nil {
		t.Fatal(err)
	}
	a, err := natsauth.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func writeCreds(t *testing.T, a *natsauth.Authority, id natsauth.Identity, exp time.Time) string {
	t.Helper()
	c, err := a.Mint(id, exp)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Creds()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), id.Name+".creds")
	if err := natsauth.WriteSecretFile(p, b); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzCredsName: whatever a credentials file holds, CredsName does not
// panic, fails with ErrConnect, or returns a name that can head an inbox
// prefix (one subject token).
func FuzzCredsName(f *testing.F) {
	a := testAuth(f)
	for _, name := range []string{"w1", "writ-issuer-n1"} {
		c, err := a.Mint(natsauth.Worker(name, 0), time.Now().Add(time.Hour))
		if err != nil {
			f.Fatal(err)
		}
		b, _ := c.Creds()
		f.Add(b)
	}
	f.Add([]byte("-----BEGIN NATS USER JWT-----\nx.y.z\n------END NATS USER JWT------\n"))
	f.Add([]byte(""))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "f.creds")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		name, err := CredsName(p)
		if err != nil {
			if !errors.Is(err, ErrConnect) {
				t.Fatalf("error does not wrap ErrConnect: %v", err)
			}
			return
		}
		if !credsNameOK(name) || strings.ContainsAny(name, ".*> ") {
			t.Fatalf("CredsName returned %q", name)
		}
	})
}
