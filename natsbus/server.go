package natsbus

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartServer validates cfg, starts an embedded nats-server with JetStream
// on a file store in cfg.StoreDir that fsyncs every write (SyncAlways), and
// waits until it accepts connections. logf receives the server's notices,
// warnings and errors, prefixed with their level; nil discards them.
//
// On failure (a port in use, a bad TLS file, JetStream unable to start,
// not ready within cfg.ReadyTimeout) the server is shut down and the error
// wraps ErrServerStart and names the address. The caller owns a returned
// server: stop it with Shutdown and WaitForShutdown.
func StartServer(cfg ServerConfig, logf func(format string, args ...any)) (*server.Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts, err := cfg.serverOptions()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		if opts.AccountResolver != nil {
			opts.AccountResolver.Close()
		}
		return nil, fmt.Errorf("%w: server %s at %s: %v", ErrServerStart, cfg.Name, cfg.addrs(), err)
	}
	lg := newServerLogger(logf)
	s.SetLoggerV2(lg, false, false, false)
	s.Start()
	if err := waitReady(s, lg, cfg); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	return s, nil
}

// ClientURL is the URL clients use to reach s: nats://host:port, or
// tls://host:port when the server requires TLS. A server listening on all
// interfaces is reached through loopback. It returns "" for a nil or not
// listening server.
func ClientURL(s *server.Server) string {
	if s == nil {
		return ""
	}
	addr, ok := s.Addr().(*net.TCPAddr)
	if !ok || addr == nil {
		return ""
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "nats"
	if u, err := url.Parse(s.ClientURL()); err == nil && u.Scheme == "tls" {
		scheme = "tls"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(addr.Port))
}

// waitReady waits until s accepts connections (clients and, if clustered,
// routes) with JetStream on, or a fatal error was logged, or the timeout.
func waitReady(s *server.Server, lg *serverLogger, cfg ServerConfig) error {
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		if msg, failed := lg.fatalMessage(); failed {
			return fmt.Errorf("%w: server %s at %s: %s", ErrServerStart, cfg.Name, cfg.addrs(), msg)
		}
		if s.ReadyForConnections(50 * time.Millisecond) {
			if !s.JetStreamEnabled() {
				return fmt.Errorf("%w: server %s at %s: JetStream not enabled", ErrServerStart, cfg.Name, cfg.addrs())
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: server %s at %s: not ready for connections after %v",
				ErrServerStart, cfg.Name, cfg.addrs(), timeout)
		}
	}
}

// addrs describes the listen addresses for error messages.
func (c ServerConfig) addrs() string {
	a := "client " + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	if c.clustered() {
		a += ", cluster " + net.JoinHostPort(c.ClusterHost, strconv.Itoa(c.ClusterPort))
	}
	return a
}

// A route pings its peer every RoutePingInterval and is closed as stale
// when more than RouteMaxPingsOut pings go unanswered. nats-server's
// default gives a peer that stopped answering (a paused VM, a long stall)
// minutes, and meanwhile routes requests to the queue subscriptions it
// still has registered, so about half of the API requests would go to a
// node that cannot answer. With these settings a stalled peer's interest
// is dropped about 4 s after it stops answering.
const (
	RoutePingInterval = time.Second
	RouteMaxPingsOut  = 3
)

// serverOptions translates a validated config into nats-server options.
func (c ServerConfig) serverOptions() (*server.Options, error) {
	opts := &server.Options{
		ServerName:             c.Name,
		Host:                   c.Host,
		Port:                   c.Port,
		NoSigs:                 true,
		JetStream:              true,
		StoreDir:               c.StoreDir,
		SyncAlways:             true,
		JetStreamMaxStore:      c.JetStreamMaxStore,
		DisableJetStreamBanner: true,
	}
	if c.clustered() {
		opts.Cluster = server.ClusterOpts{Name: c.ClusterName, Host: c.ClusterHost, Port: c.ClusterPort, Advertise: c.ClusterAdvertise,
			PingInterval: RoutePingInterval, MaxPingsOut: RouteMaxPingsOut}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil { // unreachable after Validate
				return nil, fieldErr("Routes", "%v", err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	for _, u := range c.Users {
		opts.Users = append(opts.Users, &server.User{
			Username:    u.Name,
			Password:    u.Password,
			Permissions: permissions(u),
		})
	}
	if c.TLS != nil {
		if err := c.applyTLS(opts); err != nil {
			return nil, err
		}
	}
	if c.Operator != nil {
		// Last: nothing after it may fail and leave the resolver open.
		if _, err := c.Operator.apply(opts); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// permissions maps a User's allow lists; nil lists leave that direction
// unrestricted.
func permissions(u User) *server.Permissions {
	if u.Publish == nil && u.Subscribe == nil {
		return nil
	}
	p := &server.Permissions{}
	if u.Publish != nil {
		p.Publish = &server.SubjectPermission{Allow: slices.Clone(u.Publish)}
	}
	if u.Subscribe != nil {
		p.Subscribe = &server.SubjectPermission{Allow: slices.Clone(u.Subscribe)}
	}
	return p
}

// applyTLS requires TLS from clients and mutual TLS on routes.
func (c ServerConfig) applyTLS(opts *server.Options) error {
	files := server.TLSConfigOpts{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, CaFile: c.TLS.CAFile}
	clientTLS, err := genTLS(files)
	if err != nil {
		return err
	}
	opts.TLSConfig = clientTLS
	opts.TLS = true
	if !c.clustered() {
		return nil
	}
	files.Verify = true
	routeTLS, err := genTLS(files)
	if err != nil {
		return err
	}
	// A route is both a TLS server and a TLS client: verify peers against
	// the CA in both directions, as nats-server does for its config files.
	routeTLS.ClientAuth = tls.RequireAndVerifyClientCert
	routeTLS.RootCAs = routeTLS.ClientCAs
	opts.Cluster.TLSConfig = routeTLS
	return nil
}

func genTLS(files server.TLSConfigOpts) (*tls.Config, error) {
	tc, err := server.GenTLSConfig(&files)
	if err == nil && tc == nil {
		err = fmt.Errorf("CA file %q is empty", files.CaFile)
	}
	if err == nil && files.CaFile != "" && tc.ClientCAs == nil {
		err = fmt.Errorf("CA file %q holds no certificate", files.CaFile)
	}
	if err != nil {
		return nil, fieldErr("TLS", "%v", err)
	}
	return tc, nil
}
