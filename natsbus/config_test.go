package natsbus

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestValidateNamesField(t *testing.T) {
	base := DefaultServerConfig()
	base.StoreDir = "/tmp/writ-store"
	clustered := func(c *ServerConfig) {
		c.ClusterName = "writ"
		c.ClusterPort = 6222
		c.Routes = []string{"nats-route://127.0.0.1:6223"}
	}
	tests := []struct {
		name   string
		mutate func(*ServerConfig)
		field  string // "" = valid
	}{
		{"default", func(*ServerConfig) {}, ""},
		{"clustered", clustered, ""},
		{"users", func(c *ServerConfig) {
			c.Users = []User{IssuerUser("issuer", "p"), WorkerUser("w1", "p"), OperatorUser("op", "p"), AuditorUser("aud", "p")}
		}, ""},
		{"tls", func(c *ServerConfig) { c.TLS = &TLSFiles{CertFile: "c", KeyFile: "k"} }, ""},
		{"empty name", func(c *ServerConfig) { c.Name = "" }, "Name"},
		{"dotted name", func(c *ServerConfig) { c.Name = "a.b" }, "Name"},
		{"empty host", func(c *ServerConfig) { c.Host = "" }, "Host"},
		{"port zero", func(c *ServerConfig) { c.Port = 0 }, "Port"},
		{"port too big", func(c *ServerConfig) { c.Port = 70000 }, "Port"},
		{"no store", func(c *ServerConfig) { c.StoreDir = "" }, "StoreDir"},
		{"negative max store", func(c *ServerConfig) { c.JetStreamMaxStore = -1 }, "JetStreamMaxStore"},
		{"negative ready timeout", func(c *ServerConfig) { c.ReadyTimeout = -time.Second }, "ReadyTimeout"},
		{"routes without cluster name", func(c *ServerConfig) { clustered(c); c.ClusterName = "" }, "ClusterName"},
		{"cluster without port", func(c *ServerConfig) { clustered(c); c.ClusterPort = 0 }, "ClusterPort"},
		{"cluster port equals port", func(c *ServerConfig) { clustered(c); c.ClusterPort = c.Port }, "ClusterPort"},
		{"cluster host empty", func(c *ServerConfig) { clustered(c); c.ClusterHost = "" }, "ClusterHost"},
		{"route scheme", func(c *ServerConfig) { clustered(c); c.Routes = append(c.Routes, "nats://127.0.0.1:6224") }, "Routes[1]"},
		{"route port", func(c *ServerConfig) { clustered(c); c.Routes = []string{"nats-route://127.0.0.1"} }, "Routes[0]"},
		{"user name token", func(c *ServerConfig) { c.Users = []User{WorkerUser("w.*", "p")} }, "Users[0].Name"},
		{"user name wildcard", func(c *ServerConfig) { c.Users = []User{WorkerUser(">", "p")} }, "Users[0].Name"},
		{"duplicate user", func(c *ServerConfig) { c.Users = []User{WorkerUser("w1", "p"), OperatorUser("w1", "q")} }, "Users[1].Name"},
		{"no password", func(c *ServerConfig) { c.Users = []User{WorkerUser("w1", "")} }, "Users[0].Password"},
		{"bad publish subject", func(c *ServerConfig) {
			c.Users = []User{{Name: "u", Password: "p", Publish: []string{"a.>.b"}}}
		}, "Users[0].Publish[0]"},
		{"bad subscribe subject", func(c *ServerConfig) {
			c.Users = []User{{Name: "u", Password: "p", Subscribe: []string{"a..b"}}}
		}, "Users[0].Subscribe[0]"},
		{"tls without cert", func(c *ServerConfig) { c.TLS = &TLSFiles{KeyFile: "k"} }, "TLS.CertFile"},
		{"tls without key", func(c *ServerConfig) { c.TLS = &TLSFiles{CertFile: "c"} }, "TLS.KeyFile"},
		{"clustered tls without ca", func(c *ServerConfig) { clustered(c); c.TLS = &TLSFiles{CertFile: "c", KeyFile: "k"} }, "TLS.CAFile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Users = nil
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Fatalf("Validate = %q, want it to name field %s", err, tc.field)
			}
		})
	}
}

func TestValidToken(t *testing.T) {
	for _, ok := range []string{"w1", "worker_7", "A-b-C", strings.Repeat("x", 64)} {
		if err := ValidToken(ok); err != nil {
			t.Errorf("ValidToken(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "*", ">", "w 1", "w\t1", "w\n", "é", "a/b", strings.Repeat("x", 65)} {
		if err := ValidToken(bad); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ValidToken(%q) = %v, want ErrInvalidToken", bad, err)
		}
	}
}

func TestStartServerSyncsEveryWrite(t *testing.T) {
	cfg := testConfig(t, "sync")
	s := startServer(t, cfg)
	jsc := s.JetStreamConfig()
	if jsc == nil {
		t.Fatal("JetStream not enabled")
	}
	if !jsc.SyncAlways {
		t.Fatalf("JetStream SyncAlways = false (sync interval %v): writes are not fsynced", jsc.SyncInterval)
	}
	if want := filepath.Join(cfg.StoreDir, "jetstream"); jsc.StoreDir != want {
		t.Fatalf("JetStream StoreDir = %q, want %q", jsc.StoreDir, want)
	}
	if got, want := ClientURL(s), "nats://127.0.0.1:"+strconv.Itoa(cfg.Port); got != want {
		t.Fatalf("ClientURL = %q, want %q", got, want)
	}
}

func TestStartServerPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cfg := testConfig(t, "busy")
	cfg.Port = l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	s, err := StartServer(cfg, nil)
	if err == nil {
		stopServer(s)
		t.Fatal("StartServer on a used port succeeded")
	}
	if !errors.Is(err, ErrServerStart) || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Fatalf("StartServer = %v, want ErrServerStart naming %s", err, l.Addr())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("StartServer took %v to fail", d)
	}
}

func TestStartServerStoreDirIsFile(t *testing.T) {
	cfg := testConfig(t, "badstore")
	cfg.StoreDir = filepath.Join(cfg.StoreDir, "file")
	if err := os.WriteFile(cfg.StoreDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := StartServer(cfg, nil)
	if err == nil {
		stopServer(s)
		t.Fatal("StartServer with a file as StoreDir succeeded")
	}
	if !errors.Is(err, ErrServerStart) {
		t.Fatalf("StartServer = %v, want ErrServerStart", err)
	}
	t.Logf("error: %v", err)
}

func TestStartServerRejectsInvalidConfig(t *testing.T) {
	cfg := testConfig(t, "invalid")
	cfg.StoreDir = ""
	if _, err := StartServer(cfg, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("StartServer = %v, want ErrInvalidConfig", err)
	}
	if ClientURL(nil) != "" {
		t.Fatal("ClientURL(nil) not empty")
	}
}
