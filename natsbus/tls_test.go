package natsbus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// writeTLSFiles writes a CA and a loopback certificate signed by it, usable
// as TLS server and client (routes are both).
func writeTLSFiles(t *testing.T) (*TLSFiles, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "writ test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "writ node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	files := &TLSFiles{
		CertFile: filepath.Join(dir, "node.pem"),
		KeyFile:  filepath.Join(dir, "node-key.pem"),
		CAFile:   filepath.Join(dir, "ca.pem"),
	}
	writePEM(t, files.CertFile, "CERTIFICATE", der)
	writePEM(t, files.KeyFile, "EC PRIVATE KEY", keyDER)
	writePEM(t, files.CAFile, "CERTIFICATE", caDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return files, pool
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Clients must use TLS; routes use mutual TLS and carry messages.
func TestTLSClientsAndRoutes(t *testing.T) {
	files, pool := writeTLSFiles(t)
	cfgs := clusterConfigs(t, 2)
	for i := range cfgs {
		cfgs[i].TLS = files
	}
	a := startServer(t, cfgs[0])
	b := startServer(t, cfgs[1])

	url := ClientURL(a)
	if url != fmt.Sprintf("tls://127.0.0.1:%d", cfgs[0].Port) {
		t.Fatalf("ClientURL = %q", url)
	}
	// A client that does not trust the CA cannot connect.
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("client without the CA connected")
	}
	tlsOpt := nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	ncA, _ := connect(t, url, tlsOpt)
	ncB, _ := connect(t, ClientURL(b), tlsOpt)

	deadline := time.Now().Add(10 * time.Second)
	for a.NumRoutes() == 0 || b.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("TLS routes not established")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sub, err := ncB.SubscribeSync("writ.evt.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := ncB.Flush(); err != nil {
		t.Fatal(err)
	}
	// Interest propagates over the route asynchronously.
	for {
		if err := ncA.Publish("writ.evt.ping", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
			if string(m.Data) != "hi" {
				t.Fatalf("got %q", m.Data)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("message did not cross the TLS route")
		}
	}
}

func TestTLSBadFiles(t *testing.T) {
	cfg := testConfig(t, "badtls")
	cfg.TLS = &TLSFiles{CertFile: filepath.Join(t.TempDir(), "missing.pem"), KeyFile: "missing-key.pem"}
	if _, err := StartServer(cfg, nil); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("StartServer with missing TLS files = %v", err)
	}
	files, _ := writeTLSFiles(t)
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.TLS = &TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: empty}
	if _, err := StartServer(cfg, nil); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Fatalf("StartServer with an empty CA file = %v", err)
	}
}
