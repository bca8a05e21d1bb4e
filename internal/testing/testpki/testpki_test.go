package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"testing"
)

// A server and a client with certificates from the same CA complete a
// mutual TLS handshake over loopback; a client trusting another CA does not.
func TestMutualTLS(t *testing.T) {
	ca := NewCA(t, "test")
	f := ca.WriteFiles(t, t.TempDir(), "node")
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("localhost"); err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()

	certPEM, keyPEM := ca.Issue(t, "client.test")
	client, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{
		Certificates: []tls.Certificate{client},
		RootCAs:      ca.Pool(),
		ServerName:   "localhost",
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != "ok" {
		t.Fatalf("read %q, %v", b, err)
	}
	c.Close()

	other := NewCA(t, "other")
	if c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: other.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}); err == nil {
		c.Close()
		t.Fatal("a client trusting another CA accepted the server")
	}
}
