package raftnode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TLSFiles are the PEM files of a node's raft transport under mutual TLS.
// Every node presents CertFile (with KeyFile) and accepts only peers whose
// certificate chains to CAFile, in both directions: a connection without
// TLS, or with a certificate from another CA, is refused before raft reads
// a byte of it, and the refusal is logged.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// validate checks that every file is named.
func (f *TLSFiles) validate() error {
	switch {
	case f.CertFile == "":
		return fieldErr("TLS.CertFile", "required when TLS is set (use --tls-cert)")
	case f.KeyFile == "":
		return fieldErr("TLS.KeyFile", "required when TLS is set (use --tls-key)")
	case f.CAFile == "":
		return fieldErr("TLS.CAFile", "required: raft peers verify each other against it (use --tls-ca)")
	}
	return nil
}

// load reads the files and returns the server side (require and verify a
// client certificate) and the client side (present ours, verify theirs)
// of the raft transport's TLS.
func (f *TLSFiles) load() (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: TLS: loading %s / %s: %v", ErrConfig, f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: TLS: %v", ErrConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%w: TLS: %s holds no PEM certificate", ErrConfig, f.CAFile)
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS13,
	}
	return server, client, nil
}

// tlsStream is a raft.StreamLayer over mutual TLS. Accepted connections
// are handshaken (bounded in time and number) before raft sees them.
type tlsStream struct {
	*streamAcceptor
	adv      net.Addr
	client   *tls.Config
	redirect map[string]string
	log      hclog.Logger
}

func newTLSStream(ln net.Listener, adv net.Addr, server, client *tls.Config, redirect map[string]string, lg hclog.Logger) *tlsStream {
	s := &tlsStream{streamAcceptor: newStreamAcceptor(ln), adv: adv, client: client, redirect: redirect, log: lg}
	s.wg.Add(1)
	go s.run(func(c net.Conn) (net.Conn, error) {
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(handshakeTimeout))
		if err := tc.Handshake(); err != nil {
			return nil, err
		}
		_ = tc.SetDeadline(time.Time{})
		return tc, nil
	}, func(c net.Conn, err error) {
		s.log.Warn("refused raft connection: TLS handshake failed", "remote", describeConn(c), "reason", handshakeReason(err), "error", err)
	})
	return s
}

func (s *tlsStream) Addr() net.Addr { return s.adv }

// Dial connects to a peer and completes the handshake, verifying the
// peer's certificate against the CA and the address dialled.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	target := dialTarget(s.redirect, address)
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, err
	}
	cfg := s.client.Clone()
	cfg.ServerName = host // the advertised address, even when redirected
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", target, cfg)
	if err != nil {
		// A peer that is down is raft's business (it logs and backs off);
		// a peer that fails verification is ours to report.
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "dial" {
			s.log.Warn("raft peer failed TLS verification", "peer", string(address), "reason", handshakeReason(err), "error", err)
		}
		return nil, err
	}
	return c, nil
}

// handshakeReason classifies a refused handshake for the log.
func handshakeReason(err error) string {
	var rec tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var ne net.Error
	switch {
	case errors.As(err, &rec):
		return "not_tls"
	case errors.As(err, &cv), errors.As(err, &ue):
		return "untrusted_certificate"
	case errors.As(err, &ne) && ne.Timeout():
		return "handshake_timeout"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "didn't provide a certificate"), strings.Contains(msg, "certificate required"):
		return "no_client_certificate"
	case strings.Contains(msg, "certificate"):
		return "untrusted_certificate"
	}
	return "handshake_failed"
}
