// Package connect turns command-line flags and environment variables into a
// NATS connection for writ's tools (issuer operator commands, worker-agent,
// auditor), so all three accept the same options and say the same things
// when the server cannot be reached or the issuer does not answer.
package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
)

// DefaultURL is where a development issuer listens.
const DefaultURL = "nats://127.0.0.1:4222"

// Environment variables read when the matching flag is not given.
const (
	EnvURL          = "WRIT_NATS_URL"
	EnvUser         = "WRIT_NATS_USER"
	EnvPasswordFile = "WRIT_NATS_PASSWORD_FILE"
	EnvCA           = "WRIT_NATS_CA"
	EnvCreds        = "WRIT_NATS_CREDS"
)

// EnvURLFallback is the NATS ecosystem's own variable (the nats CLI and
// client libraries read it); it is used when EnvURL is unset or empty.
const EnvURLFallback = "NATS_URL"

// DefaultTimeout is --timeout's default.
const DefaultTimeout = 10 * time.Second

var (
	// ErrConnect wraps every failure to reach NATS itself.
	ErrConnect = errors.New("cannot connect to NATS")
	// ErrBadURL wraps a --nats-url that does not parse; it is a usage
	// error, and nothing was dialled.
	ErrBadURL = errors.New("bad --nats-url")
	// ErrNoAnswer wraps a request that NATS carried (the connection was
	// up) but that no issuer answered in time.
	ErrNoAnswer = errors.New("the issuer did not answer")
)

// Options are the connection settings shared by writ's tools.
type Options struct {
	URL          string
	User         string
	PasswordFile string // secrets come from files, never from flags
	// Password is the password itself, for code that was handed it by a
	// caller holding the secret (never a flag); used when PasswordFile is
	// empty.
	Password string
	// CredsFile is a NATS .creds file (a user JWT and its nkey seed, as
	// `issuer auth mint` writes) for servers in operator mode. It excludes
	// User.
	CredsFile string
	// JWT and Seed are a user credential held in memory, for code that
	// minted it (never flags); used when CredsFile is empty.
	JWT, Seed string
	CAFile    string
	Timeout   time.Duration
	Name      string // client name shown in NATS monitoring
	// ConnectOnce makes Dial try once instead of retrying until Timeout:
	// for a caller that must answer at once when NATS is down (a hook
	// blocks the call; the next call tries again).
	ConnectOnce bool
	// LeaderAffinity keeps the connection at the issuer leader's NATS
	// server when the URL lists several servers (see Affinity; package
	// api/client acts on it). The flag turns it on by default; a zero
	// Options leaves it off.
	LeaderAffinity bool
	// AffinityEvery is the least time between two moves of the
	// connection (0: DefaultAffinityEvery).
	AffinityEvery time.Duration
}

// URLHelp is the --nats-url help text: what it accepts and where its
// default comes from.
const URLHelp = "NATS server URL(s), comma separated, as nats://HOST:PORT (also tls://, ws://, wss://) (env " +
	EnvURL + ", then " + EnvURLFallback + ")"

// AddFlags registers --nats-url, --nats-user, --nats-password-file,
// --nats-creds, --nats-ca and --timeout on fs, with defaults taken from the
// environment.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "nats-url", DefaultURLFromEnv(), URLHelp)
	fs.StringVar(&o.User, "nats-user", os.Getenv(EnvUser), "NATS user name (env "+EnvUser+")")
	fs.StringVar(&o.PasswordFile, "nats-password-file", os.Getenv(EnvPasswordFile), "file holding the NATS password (env "+EnvPasswordFile+")")
	fs.StringVar(&o.CredsFile, "nats-creds", os.Getenv(EnvCreds), "NATS credentials file (user JWT and seed, from issuer auth mint) for an issuer in operator mode; instead of --nats-user (env "+EnvCreds+")")
	fs.StringVar(&o.CAFile, "nats-ca", os.Getenv(EnvCA), "CA certificate for a TLS NATS server (env "+EnvCA+")")
	fs.DurationVar(&o.Timeout, "timeout", DefaultTimeout, "how long to keep trying, connecting included, before giving up")
	fs.BoolVar(&o.LeaderAffinity, "nats-leader-affinity", LeaderAffinityFromEnv(),
		"with several --nats-url servers, keep the connection at the issuer leader's server, which the leader names in its answers (env "+EnvLeaderAffinity+")")
}

// DefaultURLFromEnv is the URL used when --nats-url is not given:
// WRIT_NATS_URL, else NATS_URL, else DefaultURL.
func DefaultURLFromEnv() string {
	for _, k := range []string{EnvURL, EnvURLFallback} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return DefaultURL
}

// CheckURL reports whether s is a list of NATS server URLs nats.go can
// dial. The error wraps ErrBadURL and says what form is expected.
func CheckURL(s string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s; want nats://HOST:PORT (or tls://, ws://, wss://), several comma separated, e.g. %s",
			ErrBadURL, s, fmt.Sprintf(format, a...), DefaultURL)
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n++
		full := part
		if !strings.Contains(part, "://") {
			full = "nats://" + part
		}
		u, err := url.Parse(full)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return bad("%q does not parse: %v", part, err)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return bad("%q has scheme %q", part, u.Scheme)
		}
		if u.Hostname() == "" {
			return bad("%q names no host", part)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return bad("%q has port %q", part, p)
			}
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			return bad("%q has a path or query", part)
		}
	}
	if n == 0 {
		return bad("no URL given")
	}
	return nil
}

func (o Options) url() string {
	if strings.TrimSpace(o.URL) == "" {
		return DefaultURL
	}
	return o.URL
}

// A connection pings its server every PingInterval and counts the server as
// stalled when more than MaxPingsOut pings are unanswered: it then
// reconnects, to another server if the URL lists several, within about
// StallDetection of the stall.
const (
	PingInterval   = time.Second
	MaxPingsOut    = 2
	StallDetection = (MaxPingsOut + 1) * PingInterval
)

// Dial connects with the options, retrying for up to Timeout while NATS is
// unreachable (a server that is starting or restarting). Errors wrap
// ErrBadURL (usage) or ErrConnect and say what to check next.
func (o Options) Dial() (*nats.Conn, error) { return o.DialContext(context.Background()) }

// DialContext is Dial that also gives up when ctx ends.
func (o Options) DialContext(ctx context.Context) (*nats.Conn, error) {
	addr := o.url()
	if err := CheckURL(addr); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
		// The client library's default notices a server that stopped
		// answering (a paused VM, a stuck disk, a long GC) only after
		// minutes; these settings give up on it after StallDetection and
		// move to another server in the list.
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
	}
	if o.CredsFile == "" && o.JWT != "" {
		uc, err := jwt.DecodeUserClaims(o.JWT)
		if err != nil || !credsNameOK(uc.Name) {
			return nil, fmt.Errorf("%w: the in-memory credential holds no user JWT named by a subject token: %v", ErrConnect, err)
		}
		opts = append(opts, nats.UserJWTAndSeed(o.JWT, o.Seed), nats.CustomInboxPrefix(InboxPrefix(uc.Name)))
	}
	if o.User != "" && o.CredsFile != "" {
		return nil, fmt.Errorf("%w: --nats-user %q and --nats-creds %s both given: use one (a password user, or a credentials file for an issuer in operator mode)", ErrConnect, o.User, o.CredsFile)
	}
	if o.CredsFile != "" {
		name, err := CredsName(o.CredsFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile),
			nats.CustomInboxPrefix(InboxPrefix(name)))
	}
	if o.User != "" {
		pw := []byte(o.Password)
		switch {
		case o.PasswordFile != "":
			var err error
			if pw, err = os.ReadFile(o.PasswordFile); err != nil {
				return nil, fmt.Errorf("%w: reading password file: %v", ErrConnect, err)
			}
		case o.Password == "":
			return nil, fmt.Errorf("%w: --nats-user %q needs --nats-password-file", ErrConnect, o.User)
		}
		opts = append(opts, nats.UserInfo(o.User, strings.TrimSpace(string(pw))),
			// Authenticated users may only receive replies on their own
			// inbox prefix; the issuer's embedded server enforces it.
			nats.CustomInboxPrefix(InboxPrefix(o.User)))
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}

	var aff *Affinity
	if o.LeaderAffinity {
		if aff = newAffinity(addr, o.AffinityEvery); aff != nil {
			opts = append(opts, aff.options()...)
		}
	}

	// Without a Timeout or a ctx deadline there is one try of up to 2s.
	start := time.Now()
	deadline := start.Add(max(o.Timeout, 2*time.Second))
	if o.Timeout > 0 {
		deadline = start.Add(o.Timeout)
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	wait := 50 * time.Millisecond
	for {
		// One try may take at most 2s, and never past the deadline.
		try := max(min(2*time.Second, time.Until(deadline)), 100*time.Millisecond)
		nc, err := nats.Connect(addr, append(opts, nats.Timeout(try))...)
		if err == nil {
			if aff != nil {
				aff.bind(nc)
			}
			return nc, nil
		}
		if !retryable(err) {
			if o.CredsFile != "" && strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
				return nil, fmt.Errorf("%w at %s: %v: the server refused the credentials in %s (expired, revoked, or minted for another operator); ask the operator for new ones (`issuer auth mint`)",
					ErrConnect, addr, err, o.CredsFile)
			}
			return nil, fmt.Errorf("%w at %s: %v", ErrConnect, addr, err)
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil || o.Timeout <= 0 || o.ConnectOnce {
			tried := ""
			if !o.ConnectOnce && o.Timeout > 0 {
				tried = fmt.Sprintf(" (kept trying for %s)", time.Since(start).Round(100*time.Millisecond))
			}
			return nil, fmt.Errorf("%w at %s%s: %v. Is an issuer running? Start one with `issuer serve --dev`, or point --nats-url (env %s or %s) at its NATS server",
				ErrConnect, addr, tried, err, EnvURL, EnvURLFallback)
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// retryable reports whether a failed connect may succeed later: nothing
// listening yet, a server that hung up, or a network timeout. Authentication and TLS failures
// are final.
func retryable(err error) bool {
	if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // hung up mid-handshake
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// NoAnswer explains err, the failure of a request sent over a connection
// Dial opened: NATS was reachable, but the issuer did not answer. The
// result wraps ErrNoAnswer and err, and says what to check. Errors that
// already wrap ErrConnect, ErrBadURL or ErrNoAnswer are returned as they
// are.
func (o Options) NoAnswer(err error) error {
	if err == nil || errors.Is(err, ErrConnect) || errors.Is(err, ErrBadURL) || errors.Is(err, ErrNoAnswer) {
		return err
	}
	return &noAnswerError{url: o.url(), timeout: o.Timeout, err: err}
}

type noAnswerError struct {
	url     string
	timeout time.Duration
	err     error
}

func (e *noAnswerError) Error() string {
	within := ""
	if e.timeout > 0 {
		within = " within " + e.timeout.String()
	}
	if errors.Is(e.err, nats.ErrNoResponders) {
		return fmt.Sprintf("%v%s: NATS at %s is reachable, but no issuer is serving there (%v). Is `issuer serve` running against this NATS server? Check with `issuer status`",
			ErrNoAnswer, within, e.url, nats.ErrNoResponders)
	}
	return fmt.Sprintf("%v%s (NATS at %s is reachable): %v. Is a leader elected? Check with `issuer status` (or `issuer status --node ID`), or give it longer with --timeout",
		ErrNoAnswer, within, e.url, e.err)
}

func (e *noAnswerError) Unwrap() []error { return []error{ErrNoAnswer, e.err} }

// CredsName reads a .creds file and returns the name in its user JWT, which
// sets the user's inbox prefix. Errors wrap ErrConnect and say what is
// wrong with the file.
func CredsName(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: reading credentials file: %v", ErrConnect, err)
	}
	tok, err := jwt.ParseDecoratedJWT(raw)
	if err != nil {
		return "", fmt.Errorf("%w: credentials file %s: %v (want a file written by `issuer auth mint`)", ErrConnect, path, err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return "", fmt.Errorf("%w: credentials file %s does not hold a user JWT: %v (want a file written by `issuer auth mint`)", ErrConnect, path, err)
	}
	if !credsNameOK(uc.Name) {
		return "", fmt.Errorf("%w: credentials file %s: its user JWT's name %q is not a single subject token (want a file written by `issuer auth mint`)", ErrConnect, path, uc.Name)
	}
	if uc.Expires > 0 && time.Now().Unix() > uc.Expires {
		return "", fmt.Errorf("%w: credentials file %s expired at %s; mint a new one with `issuer auth mint`", ErrConnect, path, time.Unix(uc.Expires, 0).UTC().Format(time.RFC3339))
	}
	return uc.Name, nil
}

// credsNameOK reports whether name can head an inbox prefix: 1 to 64
// letters, digits, '_' or '-' (what issuer auth mint accepts).
func credsNameOK(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// InboxPrefix is the reply-subject prefix of an authenticated user. It must
// equal natsbus.InboxPrefix (a test checks), which the server's
// permissions are built from.
func InboxPrefix(user string) string { return "_INBOX." + user }
