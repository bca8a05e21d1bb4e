package faults

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/internal/testing/cluster"
	"github.com/writ-dev/writ/internal/testing/testpki"
	"github.com/writ-dev/writ/natsbus"
)

// newPKI writes a throwaway CA and one loopback certificate from it, usable
// as TLS server and client (raft and NATS routes are both), into dir as
// name-ca.pem, name-cert.pem and name-key.pem.
func newPKI(t *testing.T, dir, name string) testpki.Files {
	t.Helper()
	return testpki.NewCA(t, name).WriteFiles(t, dir, name)
}

// writeAuth writes an --auth file with the given users (name -> role) and
// returns it and the passwords.
func writeAuth(t *testing.T, dir string, users map[string]string) (string, map[string]string) {
	t.Helper()
	pws := map[string]string{}
	var items []string
	for name, role := range users {
		pw := fmt.Sprintf("pw-%s-%d", name, time.Now().UnixNano())
		pws[name] = pw
		if err := os.WriteFile(filepath.Join(dir, name+".pw"), []byte(pw), 0o600); err != nil {
			t.Fatal(err)
		}
		items = append(items, fmt.Sprintf(`{"name":%q,"role":%q,"password_file":%q}`, name, role, name+".pw"))
	}
	path := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(path, []byte(`{"users":[`+strings.Join(items, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pws
}

// logsContain waits until some node's log contains every one of subs.
func logsContain(t *testing.T, c *cluster.Cluster, d time.Duration, subs ...string) bool {
	t.Helper()
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		for i := range c.Nodes {
			log := c.LogTail(i, 2000)
			all := true
			for _, s := range subs {
				all = all && strings.Contains(log, s)
			}
			if all {
				return true
			}
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// TestSecureClusterRefusesStrangers runs a three-node cluster with NATS
// credentials and TLS everywhere (client connections, NATS routes, and the
// raft transport with mutual TLS), and checks that each of these is
// refused, and logged by the node it tried:
//   - a worker publishing under another worker's subject prefix;
//   - a client with no credentials; a client without TLS;
//   - a plain TCP peer dialling a node's raft port and sending garbage;
//   - a peer dialling the raft port with TLS and a certificate from
//     another CA.
//
// Meanwhile the legitimate worker is served, every node reports TLS and
// auth in its status, and the cluster's state is unchanged by the attacks
// (same seq and digest everywhere before and after).
func TestSecureClusterRefusesStrangers(t *testing.T) {
	smokeOK(t)
	dir := t.TempDir()
	good := newPKI(t, dir, "writ")
	rogue := newPKI(t, dir, "rogue")
	authFile, pws := writeAuth(t, dir, map[string]string{
		"w1": "worker", "w2": "worker", "ops": "operator", "harness": "issuer",
	})
	c := cluster.StartWith(t, 3, cluster.Options{
		Secure:      true,
		URLScheme:   "tls",
		ExtraArgs:   []string{"--auth", authFile, "--tls-cert", good.Cert, "--tls-key", good.Key, "--tls-ca", good.CA},
		ConnOptions: []nats.Option{nats.UserInfo("harness", pws["harness"]), nats.RootCAs(good.CA)},
	})
	leader := c.Leader()
	for i := range c.Nodes {
		if st := c.Status(i); !st.RaftTLS || !st.NATSTLS || !st.Auth {
			t.Errorf("%s status: raft_tls %v nats_tls %v auth %v", st.Node, st.RaftTLS, st.NATSTLS, st.Auth)
		}
	}
	url := c.Nodes[leader].URL()
	connect := func(user string, extra ...nats.Option) (*nats.Conn, error) {
		opts := []nats.Option{nats.RootCAs(good.CA), nats.Timeout(3 * time.Second), nats.MaxReconnects(0)}
		if user != "" {
			opts = append(opts, natsbus.ClientOptions(user, pws[user])...)
		}
		return nats.Connect(url, append(opts, extra...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The legitimate worker is served over TLS with its credentials.
	w1, err := connect("w1")
	if err != nil {
		t.Fatalf("w1 cannot connect: %v", err)
	}
	defer w1.Close()
	g := cluster.Mint(t, ctx, client.New(w1, "w1"), 1, "sec-grant-1")
	before := c.WaitConverged()

	// A worker speaking in another worker's name.
	errCh := make(chan error, 4)
	w1b, err := connect("w1", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errCh <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer w1b.Close()
	as2 := client.New(w1b, "w2")
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	env, err := as2.Spend(actx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: "impersonation"})
	acancel()
	if err == nil {
		t.Errorf("invariant a worker cannot speak for another: w1 publishing as w2 was answered %+v", env)
	}
	select {
	case perr := <-errCh:
		if !strings.Contains(strings.ToLower(perr.Error()), "permissions violation") {
			t.Errorf("w1 as w2: async error %v, want a permissions violation", perr)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("w1 as w2: no permissions violation reported to the client")
	}
	if !logsContain(t, c, 10*time.Second, "level=WARN", "Publish Violation", "writ.api.w2") {
		t.Errorf("invariant refusals are logged: no node logged w1's permissions violation on writ.api.w2")
	}

	// No credentials; no TLS.
	if nc, err := connect(""); err == nil {
		nc.Close()
		t.Errorf("invariant unauthenticated clients are refused: a client without credentials connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("client without credentials: %v, want an authorization violation", err)
	}
	if !logsContain(t, c, 10*time.Second, "level=WARN", "authentication error") {
		t.Errorf("invariant refusals are logged: no node logged the unauthenticated client")
	}
	plain := strings.Replace(url, "tls://", "nats://", 1)
	if nc, err := nats.Connect(plain, append(natsbus.ClientOptions("w1", pws["w1"]), nats.MaxReconnects(0), nats.Timeout(3*time.Second))...); err == nil {
		if !nc.TLSRequired() {
			t.Errorf("invariant clients must use TLS: a plain connection was accepted")
		}
		nc.Close()
	}

	// A plain TCP peer on the raft port, sending garbage.
	raftAddr := c.Nodes[leader].RaftAddr
	conn, err := net.DialTimeout("tcp", raftAddr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte("\x00\x01garbage: I am a raft peer, append my entries\n"))
	if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
		t.Errorf("invariant plain TCP cannot talk raft: the raft port answered a plain connection")
	}
	conn.Close()
	if !logsContain(t, c, 10*time.Second, "refused raft connection", "reason=not_tls") {
		t.Errorf("invariant refusals are logged: no node logged the plain TCP raft connection")
	}

	// A TLS peer with a certificate from another CA.
	rc, err := tls.LoadX509KeyPair(rogue.Cert, rogue.Key)
	if err != nil {
		t.Fatal(err)
	}
	rconn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", raftAddr, &tls.Config{
		// Present the rogue certificate whatever CAs the node asks for.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &rc, nil },
		InsecureSkipVerify:   true, //nolint:gosec // the attacker does not care
	})
	if err == nil {
		_ = rconn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = rconn.Write([]byte("garbage from another CA"))
		_, err = bufio.NewReader(rconn).ReadByte()
		rconn.Close()
	}
	if err == nil {
		t.Errorf("invariant only the cluster CA talks raft: a peer with a rogue certificate was answered")
	}
	if !logsContain(t, c, 10*time.Second, "refused raft connection", "reason=untrusted_certificate") {
		t.Errorf("invariant refusals are logged: no node logged the rogue certificate")
	}
	// A TLS peer with no certificate at all.
	nconn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", raftAddr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	if err == nil {
		_ = nconn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = nconn.Write([]byte("no certificate"))
		_, err = bufio.NewReader(nconn).ReadByte()
		nconn.Close()
	}
	if err == nil {
		t.Errorf("invariant raft peers must present a certificate: a peer without one was answered")
	}
	if !logsContain(t, c, 10*time.Second, "refused raft connection", "reason=no_client_certificate") {
		t.Errorf("invariant refusals are logged: no node logged the peer without a certificate")
	}

	// Nothing changed, and the cluster still serves.
	after := c.WaitConverged()
	if after.Seq < before.Seq || after.Term != before.Term {
		t.Logf("note: seq %d -> %d, term %d -> %d", before.Seq, after.Seq, before.Term, after.Term)
	}
	if after.Seq != before.Seq || after.StateDigest != before.StateDigest {
		// Publication watermarks are not authority: compare the digest only.
		if after.StateDigest != before.StateDigest {
			t.Errorf("invariant attacks change nothing: digest %.12s -> %.12s", before.StateDigest, after.StateDigest)
		}
	}
	if a, err := client.New(w1, "w1").Spend(ctx, api.SpendRequest{GrantID: g.GrantID, Args: cluster.ArgsFor(1), IdempotencyKey: "sec-spend-1"}); err != nil || !cluster.IsAttempt(a) {
		t.Errorf("the legitimate worker's spend after the attacks: %+v %v", a, err)
	}
	checkDigests(t, c)
}

// TestClusterRefusesToStartInsecure checks the start-up refusals: a
// multi-node cluster node with credentials but no TLS between nodes, TLS
// given only in part, and a node joining a NATS cluster without raft
// peers, each exit with a usage error naming the fix.
func TestClusterRefusesToStartInsecure(t *testing.T) {
	smokeOK(t)
	bin, err := cluster.Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	authFile, _ := writeAuth(t, dir, map[string]string{"ops": "operator"})
	good := newPKI(t, dir, "writ")
	base := []string{"serve", "--node-id", "n1", "--data-dir", filepath.Join(dir, "d"), "--raft-addr", "127.0.0.1:1",
		"--peers", "n1=127.0.0.1:1,n2=127.0.0.1:2,n3=127.0.0.1:3", "--auth", authFile}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"cluster without TLS", base, "needs TLS between nodes"},
		{"TLS without a CA", append(append([]string(nil), base...), "--tls-cert", good.Cert, "--tls-key", good.Key), "TLS needs all of"},
		{"NATS routes without raft peers", []string{"serve", "--insecure-no-auth", "--node-id", "n1", "--data-dir", filepath.Join(dir, "e"),
			"--raft-addr", "127.0.0.1:1", "--routes", "nats-route://127.0.0.1:2"}, "--peers is empty"},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, tc.args...).CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %v, output %q; want exit 2 saying %q", tc.name, err, out, tc.want)
		}
	}
}
