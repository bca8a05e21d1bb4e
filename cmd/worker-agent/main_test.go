package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(envFakeMCP) == "1" {
		// Re-executed as the fake MCP server of the proxy tests.
		os.Exit(fakeMCPServer(os.Stdin, os.Stdout))
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	bins.Remove()
	os.Exit(code)
}

// result is what one in-process run produced.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration // a built-binary run: from process start to exit
}

func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := run(ctx, args, strings.NewReader(stdin), &out, &errb, nil)
	return result{code: exitCode(err), stdout: out.String(), stderr: errb.String()}
}

// cleanEnv makes sure the environment does not supply flags.
func cleanEnv(t *testing.T) {
	for _, k := range []string{EnvWorker, "WRIT_NATS_URL", "NATS_URL", "WRIT_NATS_USER", "WRIT_NATS_PASSWORD_FILE", "WRIT_NATS_CA"} {
		t.Setenv(k, "")
	}
}

// tripwire counts connections: usage errors must be caught before
// anything dials.
func tripwire(t *testing.T) (url string, accepted *atomic.Int32) { return testenv.Tripwire(t) }

// startNATS runs an embedded nats-server for the test.
func startNATS(t *testing.T) string { return testenv.StartNATS(t, false).ClientURL() }

// received is one request the fake issuer saw.
type received struct {
	subject string
	body    map[string]any
}

// fakeIssuer answers writ.api.*.* with whatever answer returns; a nil
// answer drops the message (the client must retry).
type fakeIssuer struct {
	mu   sync.Mutex
	seen []received
}

func (f *fakeIssuer) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.seen...)
}

func startFake(t *testing.T, url string, answer func(n int, subject string) []byte) *fakeIssuer {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := &fakeIssuer{}
	_, err = nc.Subscribe(api.WorkerWildcard, func(m *nats.Msg) {
		var body map[string]any
		if err := json.Unmarshal(m.Data, &body); err != nil {
			t.Errorf("request body is not JSON: %v: %s", err, m.Data)
		}
		f.mu.Lock()
		f.seen = append(f.seen, received{m.Subject, body})
		n := len(f.seen)
		f.mu.Unlock()
		if a := answer(n, m.Subject); a != nil {
			_ = m.Respond(a)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

func always(env grants.Envelope) func(int, string) []byte {
	b, _ := json.Marshal(env)
	return func(int, string) []byte { return b }
}

var (
	permitEnv   = grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Epoch: 3, IssuedAt: 1, ExpiresAt: 2, Seq: 7, Kind: events.KindPermit}
	denyEnv     = grants.Refuse(grants.ReasonAlreadySpent, "unspent", "")
	approvalEnv = grants.Envelope{Decision: grants.ApprovalRequired, ReviewID: "r-9", Reason: "authority_too_low", Missing: "owner approval", Recovery: grants.RecoverRefreshApproval}
)

func TestUsageErrorsNeverTouchTheNetwork(t *testing.T) {
	cleanEnv(t)
	url, accepted := tripwire(t)
	argsFile := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(argsFile, []byte(`{"a":1,"a":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	req := func(extra ...string) []string {
		return append([]string{"request", "--nats-url", url, "--worker", "w1", "--lane", "specialist", "--tool", "Bash"}, extra...)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string // the message must name this
	}{
		{"no subcommand", []string{"--nats-url", url}, "", "subcommand"},
		{"unknown subcommand", []string{"grantme", "--nats-url", url}, "", "grantme"},
		{"unknown flag", req(`--args`, `{}`, "--bogus"), "", "--bogus"},
		{"missing worker", []string{"request", "--nats-url", url, "--lane", "l", "--tool", "t", "--args", "{}"}, "", "--worker"},
		{"bad worker id", []string{"request", "--nats-url", url, "--worker", "w.1", "--lane", "l", "--tool", "t", "--args", "{}"}, "", "--worker"},
		{"worker too long", []string{"request", "--nats-url", url, "--worker", strings.Repeat("w", 65), "--lane", "l", "--tool", "t", "--args", "{}"}, "", "--worker"},
		{"missing lane", []string{"request", "--nats-url", url, "--worker", "w1", "--tool", "t", "--args", "{}"}, "", "--lane"},
		{"bad lane", req("--lane", "a b", "--args", "{}"), "", "--lane"},
		{"bad session", req("--session", "s*", "--args", "{}"), "", "--session"},
		{"missing tool", []string{"request", "--nats-url", url, "--worker", "w1", "--lane", "l", "--args", "{}"}, "", "--tool"},
		{"tool with space", []string{"request", "--nats-url", url, "--worker", "w1", "--lane", "l", "--tool", "a b", "--args", "{}"}, "", "--tool"},
		{"missing args", req(), "", "--args"},
		{"bad JSON args", req("--args", `{"command":`), "", "--args"},
		{"trailing data", req("--args", `{} {}`), "", "--args"},
		{"duplicate keys", req("--args-file", argsFile), "", "--args-file"},
		{"bad JSON on stdin", req("--args-file", "-"), `not json`, "--args-file"},
		{"empty stdin", req("--args-file", "-"), ``, "--args-file"},
		{"missing args file", req("--args-file", filepath.Join(t.TempDir(), "nope")), "", "--args-file"},
		{"args and args-file", req("--args", "{}", "--args-file", argsFile), "", "--args-file"},
		{"bad source", req("--args", "{}", "--source", "ok", "--source", "web/1"), "", "--source"},
		{"zero ttl", req("--args", "{}", "--ttl", "0s"), "", "--ttl"},
		{"bad ttl", req("--args", "{}", "--ttl", "soon"), "", "--ttl"},
		{"zero timeout", req("--args", "{}", "--timeout", "0s"), "", "--timeout"},
		{"empty idempotency key", req("--args", "{}", "--idempotency-key", ""), "", "--idempotency-key"},
		{"spend without grant", []string{"spend", "--nats-url", url, "--worker", "w1", "--args", "{}"}, "", "GRANT"},
		{"spend bad grant id", []string{"spend", "g.1", "--nats-url", url, "--worker", "w1", "--args", "{}"}, "", "GRANT"},
		{"spend without request", []string{"spend", "g1", "--nats-url", url, "--worker", "w1"}, "", "--digest"},
		{"spend args and digest", []string{"spend", "g1", "--nats-url", url, "--worker", "w1", "--args", "{}", "--digest", strings.Repeat("ab", 32)}, "", "--digest"},
		{"spend bad digest", []string{"spend", "g1", "--nats-url", url, "--worker", "w1", "--digest", "abc"}, "", "--digest"},
		{"spend bad args", []string{"spend", "g1", "--nats-url", url, "--worker", "w1", "--args", "[1,"}, "", "--args"},
		{"effect bad outcome", []string{"effect", "g1", "--nats-url", url, "--worker", "w1", "--outcome", "contested", "--verifier", "v"}, "", "--outcome"},
		{"effect missing outcome", []string{"effect", "g1", "--nats-url", url, "--worker", "w1", "--verifier", "v"}, "", "--outcome"},
		{"effect missing verifier", []string{"effect", "g1", "--nats-url", url, "--worker", "w1", "--outcome", "confirmed"}, "", "--verifier"},
		{"effect two grants", []string{"effect", "g1", "g2", "--nats-url", url, "--worker", "w1", "--outcome", "confirmed", "--verifier", "v"}, "", "GRANT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, tc.stdin, tc.args...)
			if r.code != ExitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, ExitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not name %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty on a usage error: %q", r.stdout)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("usage errors opened %d network connections", n)
	}
}

func TestHelpMentionsExitCodes(t *testing.T) {
	cleanEnv(t)
	for _, args := range [][]string{{"--help"}, {"request", "--help"}, {"spend", "-h"}, {"help", "effect"}} {
		r := runCLI(t, "", args...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d; stderr: %s", args, r.code, r.stderr)
		}
		for _, want := range []string{"Exit codes:", "0   permit", "10  deny", "11  approval_required", "3   issuer unavailable", "2   usage error"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
}

func decodeEnvelope(t *testing.T, stdout string) grants.Envelope {
	t.Helper()
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stdout is not exactly one line: %q", stdout)
	}
	var env grants.Envelope
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("stdout is not an envelope: %v: %q", err, stdout)
	}
	return env
}

func TestDecisionsMapToExitCodes(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	tests := []struct {
		name       string
		answer     grants.Envelope
		code       int
		wantStderr string
	}{
		{"permit", permitEnv, ExitOK, ""},
		{"deny", denyEnv, ExitDeny, "denied: already_spent (missing: unspent) — next: reconcile_consumption\n"},
		{"approval required", approvalEnv, ExitApproval, "approval required: authority_too_low [review r-9] (missing: owner approval) — next: refresh_approval\n"},
		{"unknown decision", grants.Envelope{Decision: "maybe"}, ExitUnavailable, `unknown decision "maybe"`},
	}
	commands := []struct {
		op   string
		args []string
	}{
		{api.OpGrant, []string{"request", "--lane", "specialist", "--tool", "Bash", "--args", `{"command":"ls"}`}},
		{api.OpSpend, []string{"spend", "g-1", "--args", `{"command":"ls"}`}},
		{api.OpEffect, []string{"effect", "g-1", "--outcome", "confirmed", "--verifier", "exit-status"}},
	}
	for _, tc := range tests {
		for _, c := range commands {
			t.Run(tc.name+"/"+c.op, func(t *testing.T) {
				worker := "w-" + strings.ReplaceAll(tc.name, " ", "_")
				f := startFake(t, url, func(_ int, subj string) []byte {
					if subj != api.WorkerSubject(worker, c.op) {
						return nil
					}
					b, _ := json.Marshal(tc.answer)
					return b
				})
				r := runCLI(t, "", append(c.args, "--nats-url", url, "--worker", worker, "--timeout", "5s")...)
				if r.code != tc.code {
					t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
				}
				got := decodeEnvelope(t, r.stdout)
				wantJSON, _ := json.Marshal(tc.answer)
				gotJSON, _ := json.Marshal(got)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("stdout envelope\n got %s\nwant %s", gotJSON, wantJSON)
				}
				if tc.wantStderr == "" && r.stderr != "" {
					t.Errorf("unexpected stderr: %q", r.stderr)
				}
				if !strings.Contains(r.stderr, tc.wantStderr) {
					t.Errorf("stderr %q lacks %q", r.stderr, tc.wantStderr)
				}
				seen := f.requests()
				if len(seen) != 1 {
					t.Fatalf("issuer saw %d requests, want 1", len(seen))
				}
				if seen[0].body["v"] != float64(api.Version) {
					t.Errorf("body v = %v, want %d", seen[0].body["v"], api.Version)
				}
			})
		}
	}
}

func TestRequestBody(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	f := startFake(t, url, always(permitEnv))
	t.Setenv(EnvWorker, "env-worker")
	r := runCLI(t, `{ "b": [1, 2.50], "a": "x" }`,
		"request", "--nats-url", url, "--lane", "isolated", "--session", "s1", "--tool", "web_fetch",
		"--args-file", "-", "--ttl", "1m", "--source", "web-1", "--source", "web-2,web-1", "--timeout", "5s")
	if r.code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	seen := f.requests()
	if len(seen) != 1 {
		t.Fatalf("issuer saw %d requests", len(seen))
	}
	if want := "writ.api.env-worker.grant"; seen[0].subject != want {
		t.Errorf("subject %q, want %q", seen[0].subject, want)
	}
	b := seen[0].body
	args, _ := json.Marshal(b["args"])
	checks := map[string]any{
		"v": float64(1), "lane": "isolated", "session": "s1", "tool": "web_fetch",
		"ttl_ms": float64(60000), "args": `{"a":"x","b":[1,2.5]}`,
		"sources": `["web-1","web-2"]`,
	}
	srcs, _ := json.Marshal(b["sources"])
	got := map[string]any{
		"v": b["v"], "lane": b["lane"], "session": b["session"], "tool": b["tool"],
		"ttl_ms": b["ttl_ms"], "args": string(args), "sources": string(srcs),
	}
	for k, want := range checks {
		if got[k] != want {
			t.Errorf("body %s = %v, want %v", k, got[k], want)
		}
	}
	if k, _ := b["idempotency_key"].(string); k == "" {
		t.Errorf("body carries no idempotency key: %v", b)
	}
	if _, ok := b["worker"]; ok {
		t.Errorf("body names a worker; identity belongs to the subject: %v", b)
	}
}

func TestSpendAndEffectBodies(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	attempt := grants.Envelope{Decision: grants.Permit, GrantID: "g-1", Kind: events.KindAttempt, Seq: 8}
	f := startFake(t, url, always(attempt))
	digest := strings.Repeat("AB", 32)
	runs := [][]string{
		{"spend", "g-1", "--worker", "w1", "--args", `{"z":true,"a":null}`, "--idempotency-key", "spend-key-1"},
		{"spend", "g-1", "--worker", "w1", "--digest", digest},
		{"effect", "g-1", "--worker", "w1", "--outcome", "unknown", "--verifier", "http-status", "--pretty"},
	}
	for _, args := range runs {
		r := runCLI(t, "", append(args, "--nats-url", url, "--timeout", "5s")...)
		if r.code != ExitOK {
			t.Fatalf("%v: exit %d; stderr:\n%s", args, r.code, r.stderr)
		}
	}
	seen := f.requests()
	if len(seen) != 3 {
		t.Fatalf("issuer saw %d requests, want 3", len(seen))
	}
	args, _ := json.Marshal(seen[0].body["args"])
	if seen[0].subject != "writ.api.w1.spend" || seen[0].body["grant_id"] != "g-1" ||
		string(args) != `{"a":null,"z":true}` || seen[0].body["idempotency_key"] != "spend-key-1" || seen[0].body["v"] != float64(1) {
		t.Errorf("spend with args: %s %v", seen[0].subject, seen[0].body)
	}
	if seen[1].body["digest"] != strings.ToLower(digest) || seen[1].body["args"] != nil || seen[1].body["idempotency_key"] == "" {
		t.Errorf("spend with digest: %v", seen[1].body)
	}
	if seen[2].subject != "writ.api.w1.effect" || seen[2].body["outcome"] != "unknown" ||
		seen[2].body["verifier"] != "http-status" || seen[2].body["grant_id"] != "g-1" || seen[2].body["v"] != float64(1) {
		t.Errorf("effect: %s %v", seen[2].subject, seen[2].body)
	}
}

func TestPrettyOutput(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	startFake(t, url, always(permitEnv))
	r := runCLI(t, "", "request", "--pretty", "--nats-url", url, "--worker", "w1", "--lane", "l", "--tool", "t", "--args", "{}", "--timeout", "5s")
	if r.code != ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "\n  \"decision\": \"permit\",\n") {
		t.Errorf("not indented: %q", r.stdout)
	}
	var env grants.Envelope
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil || env.GrantID != "g-1" {
		t.Errorf("pretty output does not decode: %v %+v", err, env)
	}
}

func TestRetryReusesIdempotencyKey(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	permit, _ := json.Marshal(permitEnv)
	unavail, _ := json.Marshal(grants.Refuse(grants.ReasonIssuerUnavail, "leader", ""))
	tests := []struct {
		name   string
		answer func(n int, _ string) []byte
	}{
		{"first message dropped", func(n int, _ string) []byte {
			if n == 1 {
				return nil
			}
			return permit
		}},
		{"first answer issuer_unavailable", func(n int, _ string) []byte {
			if n == 1 {
				return unavail
			}
			return permit
		}},
	}
	for _, tc := range tests {
		for _, cmd := range [][]string{
			{"request", "--lane", "l", "--tool", "t", "--args", `{"n":1}`},
			{"spend", "g-1", "--args", `{"n":1}`},
		} {
			t.Run(tc.name+"/"+cmd[0], func(t *testing.T) {
				f := startFake(t, url, tc.answer)
				start := time.Now()
				// --timeout 2s: each try waits 500ms, so a retry fits.
				r := runCLI(t, "", append(cmd, "--nats-url", url, "--worker", "w1", "--timeout", "2s")...)
				if r.code != ExitOK {
					t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
				}
				if env := decodeEnvelope(t, r.stdout); env.GrantID != "g-1" {
					t.Errorf("envelope %+v", env)
				}
				seen := f.requests()
				if len(seen) != 2 {
					t.Fatalf("issuer saw %d requests, want 2 (after %v)", len(seen), time.Since(start))
				}
				k1, k2 := seen[0].body["idempotency_key"], seen[1].body["idempotency_key"]
				if k1 == nil || k1 == "" || k1 != k2 {
					t.Errorf("retry changed the idempotency key: %v then %v", k1, k2)
				}
				b1, _ := json.Marshal(seen[0].body)
				b2, _ := json.Marshal(seen[1].body)
				if !bytes.Equal(b1, b2) {
					t.Errorf("retry changed the body:\n%s\n%s", b1, b2)
				}
			})
		}
	}
}

func TestIssuerUnavailable(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	dead, _ := tripwire(t) // accepts and hangs up: not a NATS server
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + l.Addr().String()
	l.Close()
	unavail, _ := json.Marshal(grants.Refuse(grants.ReasonIssuerUnavail, "leader", ""))

	tests := []struct {
		name   string
		url    string
		worker string
		answer func(int, string) []byte // nil: no responder at all
	}{
		{"no responder", url, "w-none", nil},
		{"silent responder", url, "w-silent", func(int, string) []byte { return nil }},
		{"always issuer_unavailable", url, "w-unavail", func(int, string) []byte { return unavail }},
		{"connection refused", closed, "w1", nil},
		{"not a NATS server", dead, "w1", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.answer != nil {
				startFake(t, tc.url, tc.answer)
			}
			start := time.Now()
			r := runCLI(t, "", "request", "--nats-url", tc.url, "--worker", tc.worker, "--lane", "l", "--tool", "t",
				"--args", "{}", "--idempotency-key", "k-42", "--timeout", "400ms")
			if r.code != ExitUnavailable {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, ExitUnavailable, r.stderr)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v with --timeout 400ms", d)
			}
			env := decodeEnvelope(t, r.stdout)
			if env.Decision != grants.Deny || env.Reason != grants.ReasonIssuerUnavail || env.Recovery != grants.RecoverRetryAuthority || env.Seq != 0 {
				t.Errorf("envelope %+v", env)
			}
			for _, want := range []string{"do not proceed", "--idempotency-key k-42"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
				}
			}
		})
	}
}

// A hook process builds only the hook commands (run): what its arguments
// reach must answer exactly as in the whole tree. "help hook ..." and a
// global flag before "hook" go through the whole tree; the same request
// with "hook" first goes through the hook's subtree alone.
func TestHookSubtreeAnswersAsTheWholeTree(t *testing.T) {
	cleanEnv(t)
	for _, tc := range []struct{ name, stdin string }{{"help", ""}, {"errors", "{}"}} {
		t.Run(tc.name, func(t *testing.T) {
			pairs := [][2][]string{
				{{"help", "hook"}, {"hook", "--help"}},
				{{"help", "hook", "claude-code"}, {"hook", "claude-code", "--help"}},
				{{"help", "hook", "codex"}, {"hook", "codex", "-h"}},
			}
			if tc.name == "errors" {
				pairs = [][2][]string{
					{{"--pretty", "hook"}, {"hook", "--pretty"}},
					{{"--pretty", "hook", "claude"}, {"hook", "claude", "--pretty"}},
					{{"--pretty", "hook", "claude-code", "--bogus"}, {"hook", "claude-code", "--bogus", "--pretty"}},
					{{"--pretty", "hook", "codex", "--deadline", "0s"}, {"hook", "codex", "--deadline", "0s", "--pretty"}},
					{{"--pretty", "hook", "claude-code", "extra"}, {"hook", "claude-code", "extra", "--pretty"}},
				}
			}
			for _, p := range pairs {
				whole, sub := runCLI(t, tc.stdin, p[0]...), runCLI(t, tc.stdin, p[1]...)
				if whole != sub {
					t.Errorf("%q: exit %d\n%s%s\n%q (hook subtree): exit %d\n%s%s", p[0], whole.code, whole.stdout, whole.stderr, p[1], sub.code, sub.stdout, sub.stderr)
				}
				if whole.stdout+whole.stderr == "" {
					t.Errorf("%q answered nothing", p[0])
				}
			}
		})
	}
}
