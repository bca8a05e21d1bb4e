// Package testpki makes throwaway certificate authorities and certificates
// for tests: an ECDSA P-256 CA that issues leaf certificates usable as TLS
// server and client (serverAuth and clientAuth), valid from an hour ago for
// a day. Nothing here is fit for anything but tests.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Loopback is the names a certificate is issued for when none are given.
var Loopback = []string{"127.0.0.1", "localhost"}

// CA is a throwaway certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	name string
	der  []byte
	next atomic.Int64 // last serial number used
}

// Files are the paths of PEM files written by WriteFiles.
type Files struct {
	CA   string // the CA's certificate
	Cert string // the leaf certificate
	Key  string // the leaf's private key (PKCS #8)
}

// NewCA makes a CA whose certificate's common name is name + " CA".
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, Key: key, name: name, der: der}
	ca.next.Store(1)
	return ca
}

// CertPEM is the CA's certificate, PEM encoded.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Pool is a certificate pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Issue makes a key and a certificate signed by the CA for names (IP
// addresses or DNS names; Loopback if none), usable as TLS server and
// client. It returns both PEM encoded, the key as PKCS #8.
func (ca *CA) Issue(t testing.TB, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	if len(names) == 0 {
		names = Loopback
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.next.Add(1)),
		Subject:      pkix.Name{CommonName: ca.name + " node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// WriteFiles issues a certificate for names (Loopback if none) and writes
// it, its key and the CA's certificate into dir as prefix-cert.pem,
// prefix-key.pem and prefix-ca.pem.
func (ca *CA) WriteFiles(t testing.TB, dir, prefix string, names ...string) Files {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, names...)
	f := Files{
		CA:   filepath.Join(dir, prefix+"-ca.pem"),
		Cert: filepath.Join(dir, prefix+"-cert.pem"),
		Key:  filepath.Join(dir, prefix+"-key.pem"),
	}
	for path, b := range map[string][]byte{f.CA: ca.CertPEM(), f.Cert: certPEM, f.Key: keyPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
