package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/testing/testenv"
)

// --version, `version --json` and shell completion, as every writ command
// has them.
func TestVersionAndCompletion(t *testing.T) {
	cleanEnv(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--version"}, []string{"issuer ", "commit ", "go1."}},
		{[]string{"version"}, []string{"issuer ", "commit ", "go1."}},
		{[]string{"version", "--json"}, []string{`"program":"issuer"`, `"version":`, `"go":"go1.`}},
		{[]string{"completion", "bash"}, []string{"bash completion", "issuer"}},
		{[]string{"completion", "zsh"}, []string{"#compdef issuer"}},
		{[]string{"completion", "fish"}, []string{"complete -c issuer"}},
		{[]string{"--help"}, []string{"completion bash|zsh|fish", "NATS_URL", "WRIT_NATS_URL"}},
		{[]string{"status", "--help"}, []string{"NATS_URL", "nats://HOST:PORT", "connecting included"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, tc.args...)
			if r.code != exitOK {
				t.Fatalf("%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not contain %q:\n%.400s", w, r.stdout)
				}
			}
		})
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(runCLI(t, "version", "--json").stdout), &v); err != nil || v["program"] != "issuer" {
		t.Fatalf("version --json: %v %v", v, err)
	}
}

// A --nats-url that does not parse is a usage error naming the expected
// form, and nothing is dialled.
func TestBadNATSURLIsUsage(t *testing.T) {
	cleanEnv(t)
	for _, u := range []string{"://x", "http://127.0.0.1:4222", "nats://127.0.0.1:99999", "nats://:4222"} {
		for _, args := range [][]string{{"status"}, {"revoke", "--worker", "w1"}, {"reinstate", "w1"}, {"approve", "rv-0123456789abcdef0123"}, {"policy", "show"}} {
			r := runCLI(t, append(args, "--nats-url", u, "--timeout", "30s")...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "nats://HOST:PORT") || strings.Contains(r.stderr, "cannot connect") {
				t.Errorf("%v --nats-url %q: want exit 2 naming the expected form, got %s", args, u, r)
			}
		}
	}
}

// NATS is up but no issuer serves it: the error says the issuer did not
// answer and what to check, never that NATS is unreachable.
func TestNoIssuerIsNotUnreachable(t *testing.T) {
	cleanEnv(t)
	url := testenv.StartNATS(t, false).ClientURL()
	for _, args := range [][]string{
		{"status"}, {"status", "--node", "n9"}, {"revoke", "--worker", "w1"}, {"reinstate", "w1"},
		{"approve", "rv-0123456789abcdef0123"}, {"policy", "show"}, {"snapshot", "save", "--out", t.TempDir() + "/s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runCLI(t, append(args, "--nats-url", url, "--timeout", "500ms")...)
			if r.code != exitUnavailable {
				t.Fatalf("want exit %d, got %s", exitUnavailable, r)
			}
			for _, w := range []string{"did not answer", url, "issuer serve", "issuer status"} {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q: %q", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "cannot connect") {
				t.Errorf("says NATS is unreachable while it is up: %q", r.stderr)
			}
		})
	}
}

func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "nats://" + l.Addr().String()
}

// NATS_URL is read when WRIT_NATS_URL is unset; WRIT_NATS_URL wins.
func TestNATSURLEnvironment(t *testing.T) {
	cleanEnv(t)
	live := testenv.StartNATS(t, false).ClientURL()
	dead := deadURL(t)
	cases := []struct {
		name, writ, nats string
		want             string
	}{
		{"NATS_URL alone", "", live, "NATS at " + live + " is reachable"},
		{"WRIT_NATS_URL wins", dead, live, "cannot connect to NATS at " + dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WRIT_NATS_URL", tc.writ)
			t.Setenv("NATS_URL", tc.nats)
			r := runCLI(t, "status", "--timeout", "500ms")
			if r.code != exitUnavailable || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want exit 3 and %q, got %s", tc.want, r)
			}
		})
	}
}

// --timeout covers connecting: with nothing listening, status keeps trying
// for the timeout, then says NATS is unreachable.
func TestTimeoutCoversConnecting(t *testing.T) {
	cleanEnv(t)
	dead := deadURL(t)
	start := time.Now()
	r := runCLI(t, "status", "--nats-url", dead, "--timeout", "1s")
	if d := time.Since(start); r.code != exitUnavailable || d < 900*time.Millisecond || !strings.Contains(r.stderr, "kept trying") || !strings.Contains(r.stderr, "cannot connect to NATS") {
		t.Fatalf("after %v: want exit 3 after retrying for about 1s, got %s", d, r)
	}
}

// Errors print with one "issuer: " prefix, even when the error itself
// comes from the issuer package and starts with one.
func TestErrorPrefixOnce(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{errors.New("issuer: invalid config: CommitTimeout must be positive"), "issuer: invalid config: CommitTimeout must be positive\n"},
		{fmt.Errorf("starting: %w", errors.New("issuer: x")), "issuer: starting: issuer: x\n"},
		{usageError{errors.New("--bogus")}, "issuer: --bogus\n"},
	}
	for _, tc := range cases {
		var b bytes.Buffer
		exitCode(tc.err, &b)
		if b.String() != tc.want {
			t.Errorf("printed %q, want %q", b.String(), tc.want)
		}
	}
}

// A status digest share outside (0, 1] is a usage error that names the
// flag, and the node does not start.
func TestServeStatusDigestShareIsChecked(t *testing.T) {
	cleanEnv(t)
	for _, v := range []string{"-0.5", "1.5", "NaN"} {
		r := runCLI(t, "serve", "--dev", "--data-dir", t.TempDir(), "--nats-port", fmt.Sprint(freePort(t)),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--status-digest-share", v)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--status-digest-share") {
			t.Errorf("--status-digest-share %s: want exit 2 naming the flag, got %s", v, r)
		}
	}
}
