package natsbus

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultReadyTimeout bounds how long StartServer waits for the server to
// accept connections when ServerConfig.ReadyTimeout is zero.
const DefaultReadyTimeout = 10 * time.Second

// TLSFiles are PEM files for TLS. When set, clients must connect with TLS
// (they authenticate with passwords, not certificates) and routes use mutual
// TLS: each side presents CertFile and verifies the other against CAFile.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string // required when clustered
}

// ServerConfig configures an embedded nats-server. Build it from
// DefaultServerConfig and check it with Validate (StartServer does).
type ServerConfig struct {
	// Name identifies the server; in a JetStream cluster it is the node's
	// identity and must be unique and stable across restarts.
	Name string
	Host string
	// Port is the client port. 0 is not supported (nats-server would pick
	// its default 4222); pick a free port yourself if needed.
	Port int
	// StoreDir is the JetStream file store directory. Required.
	StoreDir string

	// ClusterName, ClusterHost and ClusterPort enable clustering; Routes
	// are the nats-route://host:port URLs of the other members (listing
	// this server's own address too is harmless).
	ClusterName string
	ClusterHost string
	ClusterPort int
	Routes      []string
	// ClusterAdvertise, when set, is the route address this server tells
	// the others to dial (host:port); by default its cluster listen address.
	ClusterAdvertise string

	// Users enables authorization; empty means no authentication at all
	// (development only), unless Operator is set.
	Users []User
	// Operator, when set, runs the server in NATS operator mode: clients
	// authenticate with user JWTs (see OperatorAuth). It excludes Users:
	// nats-server does not mix static users with operator mode.
	Operator *OperatorAuth
	// TLS, when set, is applied to client connections and routes.
	TLS *TLSFiles

	// JetStreamMaxStore caps the file store in bytes; 0 lets the server
	// derive a limit from the free disk space.
	JetStreamMaxStore int64
	// ReadyTimeout bounds the wait for the server to accept connections;
	// 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
}

// DefaultServerConfig is a single, unauthenticated server on
// 127.0.0.1:4222. StoreDir must still be set.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Name:         "writ",
		Host:         "127.0.0.1",
		Port:         4222,
		ClusterHost:  "127.0.0.1",
		ReadyTimeout: DefaultReadyTimeout,
	}
}

// clustered reports whether the config asks for clustering at all.
func (c ServerConfig) clustered() bool {
	return c.ClusterPort != 0 || c.ClusterName != "" || len(c.Routes) > 0
}

// Validate checks the config. Its error wraps ErrInvalidConfig and names the
// first offending field.
func (c ServerConfig) Validate() error {
	if err := ValidToken(c.Name); err != nil {
		return fieldErr("Name", "%v", err)
	}
	if err := checkHost(c.Host); err != nil {
		return fieldErr("Host", "%v", err)
	}
	if err := checkPort(c.Port); err != nil {
		return fieldErr("Port", "%v", err)
	}
	if strings.TrimSpace(c.StoreDir) == "" {
		return fieldErr("StoreDir", "required (JetStream file store directory)")
	}
	if c.JetStreamMaxStore < 0 {
		return fieldErr("JetStreamMaxStore", "must not be negative, got %d", c.JetStreamMaxStore)
	}
	if c.ReadyTimeout < 0 {
		return fieldErr("ReadyTimeout", "must not be negative, got %v", c.ReadyTimeout)
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if err := c.validateUsers(); err != nil {
		return err
	}
	if c.Operator != nil {
		if len(c.Users) > 0 {
			return fieldErr("Operator", "cannot be combined with Users (nats-server refuses static users in operator mode); use one or the other")
		}
		if err := c.Operator.validate("Operator"); err != nil {
			return err
		}
	}
	return c.validateTLS()
}

func (c ServerConfig) validateCluster() error {
	if !c.clustered() {
		return nil
	}
	if err := ValidToken(c.ClusterName); err != nil {
		return fieldErr("ClusterName", "required when clustered: %v", err)
	}
	if err := checkHost(c.ClusterHost); err != nil {
		return fieldErr("ClusterHost", "%v", err)
	}
	if err := checkPort(c.ClusterPort); err != nil {
		return fieldErr("ClusterPort", "required when clustered: %v", err)
	}
	if c.ClusterPort == c.Port && c.ClusterHost == c.Host {
		return fieldErr("ClusterPort", "must differ from Port (%d)", c.Port)
	}
	for i, r := range c.Routes {
		if err := checkRoute(r); err != nil {
			return fieldErr(fmt.Sprintf("Routes[%d]", i), "%v", err)
		}
	}
	return nil
}

func (c ServerConfig) validateUsers() error {
	seen := make(map[string]int, len(c.Users))
	for i, u := range c.Users {
		field := fmt.Sprintf("Users[%d]", i)
		if err := ValidToken(u.Name); err != nil {
			return fieldErr(field+".Name", "%v", err)
		}
		if j, dup := seen[u.Name]; dup {
			return fieldErr(field+".Name", "%q already used by Users[%d]", u.Name, j)
		}
		seen[u.Name] = i
		if u.Password == "" {
			return fieldErr(field+".Password", "required")
		}
		for k, s := range u.Publish {
			if err := checkSubject(s, true); err != nil {
				return fieldErr(fmt.Sprintf("%s.Publish[%d]", field, k), "%v", err)
			}
		}
		for k, s := range u.Subscribe {
			if err := checkSubject(s, true); err != nil {
				return fieldErr(fmt.Sprintf("%s.Subscribe[%d]", field, k), "%v", err)
			}
		}
	}
	return nil
}

func (c ServerConfig) validateTLS() error {
	if c.TLS == nil {
		return nil
	}
	if c.TLS.CertFile == "" {
		return fieldErr("TLS.CertFile", "required when TLS is set")
	}
	if c.TLS.KeyFile == "" {
		return fieldErr("TLS.KeyFile", "required when TLS is set")
	}
	if c.TLS.CAFile == "" && c.clustered() {
		return fieldErr("TLS.CAFile", "required when clustered (routes use mutual TLS)")
	}
	return nil
}

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

func checkHost(h string) error {
	if h == "" {
		return fmt.Errorf("required")
	}
	if strings.ContainsAny(h, " \t\r\n/") {
		return fmt.Errorf("%q is not a host name or address", h)
	}
	return nil
}

func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return fmt.Errorf("must be in 1..65535, got %d", p)
	}
	return nil
}

func checkRoute(r string) error {
	u, err := url.Parse(r)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "nats-route" {
		return fmt.Errorf("%q: scheme must be nats-route", r)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q: missing host", r)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("%q: missing or bad port", r)
	}
	return checkPort(p)
}
