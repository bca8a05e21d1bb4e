package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --version, `version --json` and shell completion, as every writ command
// has them.
func TestVersionAndCompletion(t *testing.T) {
	cleanEnv(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--version"}, []string{"worker-agent ", "commit ", "go1."}},
		{[]string{"version"}, []string{"worker-agent ", "commit ", "go1."}},
		{[]string{"version", "--json"}, []string{`"program":"worker-agent"`, `"version":`, `"go":"go1.`}},
		{[]string{"completion", "bash"}, []string{"bash completion", "worker-agent"}},
		{[]string{"completion", "zsh"}, []string{"#compdef worker-agent"}},
		{[]string{"completion", "fish"}, []string{"complete -c worker-agent"}},
		{[]string{"--help"}, []string{"completion bash|zsh|fish", "NATS_URL", "WRIT_NATS_URL"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, "", tc.args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not contain %q:\n%.400s", w, r.stdout)
				}
			}
		})
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(runCLI(t, "", "version", "--json").stdout), &v); err != nil || v["program"] != "worker-agent" {
		t.Fatalf("version --json: %v %v", v, err)
	}
}

func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "nats://" + l.Addr().String()
}

// Connection errors, and what each says: a bad URL is a usage error
// (exit 2, nothing on stdout); NATS up with no issuer is "did not answer",
// never "cannot connect"; nothing listening is "cannot connect" after
// retrying for --timeout.
func TestConnectionErrors(t *testing.T) {
	cleanEnv(t)
	live := startNATS(t)
	dead := closedURL(t)
	req := []string{"request", "--worker", "w1", "--lane", "l", "--tool", "t", "--args", "{}"}
	cases := []struct {
		name     string
		env      map[string]string
		args     []string
		code     int
		want     []string
		not      string
		minTaken time.Duration
	}{
		{"bad URL", nil, []string{"--nats-url", "http://127.0.0.1:4222", "--timeout", "30s"}, ExitUsage,
			[]string{"nats://HOST:PORT", `scheme "http"`}, "cannot connect", 0},
		{"URL without host", nil, []string{"--nats-url", "nats://:4222"}, ExitUsage, []string{"names no host"}, "cannot connect", 0},
		{"NATS without an issuer", nil, []string{"--nats-url", live, "--timeout", "500ms"}, ExitUnavailable,
			[]string{"did not answer", "issuer serve", "issuer status", "do not proceed"}, "cannot connect", 0},
		{"nothing listening", nil, []string{"--nats-url", dead, "--timeout", "1s"}, ExitUnavailable,
			[]string{"cannot connect to NATS at " + dead, "kept trying"}, "did not answer", 900 * time.Millisecond},
		{"NATS_URL when WRIT_NATS_URL is unset", map[string]string{"NATS_URL": live}, []string{"--timeout", "500ms"}, ExitUnavailable,
			[]string{"NATS at " + live + " is reachable"}, "cannot connect", 0},
		{"WRIT_NATS_URL wins over NATS_URL", map[string]string{"WRIT_NATS_URL": dead, "NATS_URL": live}, []string{"--timeout", "500ms"}, ExitUnavailable,
			[]string{"cannot connect to NATS at " + dead}, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			start := time.Now()
			r := runCLI(t, "", append(req, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q: %q", w, r.stderr)
				}
			}
			if tc.not != "" && strings.Contains(r.stderr, tc.not) {
				t.Errorf("stderr says %q: %q", tc.not, r.stderr)
			}
			if tc.code == ExitUsage && r.stdout != "" {
				t.Errorf("a usage error printed an envelope: %q", r.stdout)
			}
			if d := time.Since(start); d < tc.minTaken {
				t.Errorf("gave up after %v, before --timeout", d)
			}
		})
	}
}

// Oversized arguments are refused before anything is sent, with their
// real size and the limit.
func TestOversizedArgsStateTheirSize(t *testing.T) {
	cleanEnv(t)
	url, accepted := tripwire(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"a":"`+strings.Repeat("x", 300000)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	grown := `[` + strings.TrimSuffix(strings.Repeat("1e400,", 1000), ",") + `]` // small input, huge canonical form
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  []string
	}{
		{"--args-file", "", []string{"--args-file", big}, []string{"300008 bytes", "limit is 262144"}},
		{"--args-file -", `{"a":"` + strings.Repeat("y", 400000) + `"}`, []string{"--args-file", "-"}, []string{"400008 bytes", "limit is 262144"}},
		{"--args", "", []string{"--args", `{"a":"` + strings.Repeat("z", 270000) + `"}`}, []string{"270008 bytes", "limit is 262144"}},
		{"canonical form", "", []string{"--args", grown}, []string{"limit 262144", "it is ", "the input is 6001"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.stdin, append([]string{"request", "--worker", "w1", "--lane", "l", "--tool", "t", "--nats-url", url}, tc.args...)...)
			if r.code != ExitUsage {
				t.Fatalf("exit %d, want 2; stderr %q", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not state %q: %q", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "not valid JSON") {
				t.Errorf("calls oversized arguments malformed: %q", r.stderr)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("oversized arguments dialled NATS %d times", n)
	}
}
