// Package connect turns command-line flags and environment variables into a
// NATS connection for writ's tools (issuer operator commands, worker-agent,
// auditor), so all three accept the same options and say the same things
// when the server cannot be reached.
package connect

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

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
)

// ErrConnect wraps every connection failure.
var ErrConnect = errors.New("cannot connect to NATS")

// Options are the connection settings shared by writ's tools.
type Options struct {
	URL          string
	User         string
	PasswordFile string // secrets come from files, never from flags
	CAFile       string
	Timeout      time.Duration
	Name         string // client name shown in NATS monitoring
}

// AddFlags registers --nats-url, --nats-user, --nats-password-file,
// --nats-ca and --timeout on fs, with defaults taken from the environment.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.URL, "nats-url", envOr(EnvURL, DefaultURL), "NATS server URL(s), comma separated (env "+EnvURL+")")
	fs.StringVar(&o.User, "nats-user", os.Getenv(EnvUser), "NATS user name (env "+EnvUser+")")
	fs.StringVar(&o.PasswordFile, "nats-password-file", os.Getenv(EnvPasswordFile), "file holding the NATS password (env "+EnvPasswordFile+")")
	fs.StringVar(&o.CAFile, "nats-ca", os.Getenv(EnvCA), "CA certificate for a TLS NATS server (env "+EnvCA+")")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long to keep trying before giving up")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Dial connects with the options. Errors wrap ErrConnect and say what to
// check next.
func (o Options) Dial() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(2 * time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(100 * time.Millisecond),
	}
	if o.User != "" {
		if o.PasswordFile == "" {
			return nil, fmt.Errorf("%w: --nats-user %q needs --nats-password-file", ErrConnect, o.User)
		}
		pw, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%w: reading password file: %v", ErrConnect, err)
		}
		opts = append(opts, nats.UserInfo(o.User, strings.TrimSpace(string(pw))),
			// Authenticated users may only receive replies on their own
			// inbox prefix; the issuer's embedded server enforces it.
			nats.CustomInboxPrefix(InboxPrefix(o.User)))
	}
	if o.CAFile != "" {
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	url := o.URL
	if url == "" {
		url = DefaultURL
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %v (is an issuer running? start one with `issuer serve --dev`, or set %s)", ErrConnect, url, err, EnvURL)
	}
	return nc, nil
}

// InboxPrefix is the reply-subject prefix of an authenticated user. It must
// equal natsbus.InboxPrefix (a test checks), which the server's
// permissions are built from.
func InboxPrefix(user string) string { return "_INBOX." + user }
