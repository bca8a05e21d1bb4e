package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/telemetry"
)

// TestServeFollowsAndServes: serve projects the stream, keeps following
// it while the web view answers (the fleet page's head moves to the new
// last receipt), serves a grant's chain and /metrics with only bounded
// label values, and stops when its context ends.
func TestServeFollowsAndServes(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(10)
	b.publish(is.receipts()...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	g := &globals{stdout: io.Discard, stderr: &bytes.Buffer{}}
	g.conn.URL, g.conn.Timeout = url, 5*time.Second
	db := filepath.Join(t.TempDir(), "p.db")
	go func() { done <- serveWeb(ctx, g, db, "127.0.0.1:0", false, func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	fetch := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		return string(body)
	}
	waitHead := func() {
		t.Helper()
		want := is.s.Chain().Head.String()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(fetch("/"), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the fleet page never showed head %s:\n%s", want, fetch("/"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitHead()
	is.scenario(15)
	b.publish(is.receipts()...)
	waitHead() // followed live
	page := fetch("/")
	if !strings.Contains(page, is.s.Digest().String()) || !strings.Contains(page, "projection lag <span class=\"ok\">0</span>") {
		t.Errorf("fleet page lacks the issuer's digest or shows lag:\n%s", page)
	}
	chain := fetch("/grant/g3")
	for _, w := range []string{"<th>decision</th>", "<th>attempt</th>", "<th>effect</th>", "<b>contested</b>"} {
		if !strings.Contains(chain, w) {
			t.Errorf("/grant/g3 lacks %q", w)
		}
	}
	metrics := fetch("/metrics")
	if _, err := telemetry.CheckExposition(metrics, map[string]map[string]bool{"code": {}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`writ_auditor_receipts_total{kind="permit"}`, "writ_auditor_projection_lag 0", `writ_auditor_effects_total{outcome="contested"}`} {
		if !strings.Contains(metrics, w) {
			t.Errorf("/metrics lacks %q", w)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestServeWithoutStream: with NATS unreachable serve still serves the
// projection file, the page says why the stream is not followed, and
// explain on the file serve holds says who holds it; --offline does not
// try the stream at all.
func TestServeWithoutStream(t *testing.T) {
	cleanEnv(t)
	url := startJetStream(t)
	b := newBus(t, url)
	is := newIssuer()
	is.scenario(5)
	b.publish(is.receipts()...)
	db := filepath.Join(t.TempDir(), "p.db")
	if r := runCLI(t, "project", "--db", db, "--nats-url", url); r.code != ExitOK {
		t.Fatalf("project: %d %s", r.code, r.stderr)
	}
	for _, offline := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		addrc := make(chan string, 1)
		done := make(chan error, 1)
		g := &globals{stdout: io.Discard, stderr: &bytes.Buffer{}}
		g.conn.URL, g.conn.Timeout = "nats://127.0.0.1:1", 200*time.Millisecond // nothing listens on port 1
		go func() { done <- serveWeb(ctx, g, db, "127.0.0.1:0", offline, func(a string) { addrc <- a }) }()
		addr := <-addrc
		var page string
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			page = string(body)
			if offline || strings.Contains(page, "stream: ") || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(page, is.s.Chain().Head.String()) {
			t.Errorf("offline=%v: the page lacks the file's head", offline)
		}
		if got := strings.Contains(page, "stream: "); got == offline {
			t.Errorf("offline=%v: stream error shown %v:\n%s", offline, got, page)
		}
		r := runCLI(t, "explain", "--db", db, "g0")
		if r.code != ExitUnavailable || !strings.Contains(r.stderr, "auditor serve") {
			t.Errorf("explain on a held file: %d %s", r.code, r.stderr)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve: %v", err)
		}
	}
}
