package natsbus

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/internal/testing/testpki"
)

// writeTLSFiles writes a CA and a loopback certificate signed by it, usable
// as TLS server and client (routes are both).
func writeTLSFiles(t *testing.T) (*TLSFiles, *x509.CertPool) {
	t.Helper()
	ca := testpki.NewCA(t, "writ test")
	f := ca.WriteFiles(t, t.TempDir(), "node")
	return &TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}, ca.Pool()
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
