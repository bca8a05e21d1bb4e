package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/events"
)

// --version, `version --json` and shell completion, as every writ command
// has them.
func TestVersionAndCompletion(t *testing.T) {
	cleanEnv(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--version"}, []string{"auditor ", "commit ", "go1."}},
		{[]string{"version"}, []string{"auditor ", "commit ", "go1."}},
		{[]string{"version", "--json"}, []string{`"program":"auditor"`, `"version":`, `"go":"go1.`}},
		{[]string{"completion", "bash"}, []string{"bash completion", "auditor"}},
		{[]string{"completion", "zsh"}, []string{"#compdef auditor"}},
		{[]string{"completion", "fish"}, []string{"complete -c auditor"}},
		{[]string{"--help"}, []string{"completion bash|zsh|fish", "NATS_URL", "WRIT_NATS_URL"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, tc.args...)
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
	if err := json.Unmarshal([]byte(runCLI(t, "version", "--json").stdout), &v); err != nil {
		t.Fatalf("version --json is not JSON: %v", err)
	}
}

// A --nats-url that does not parse is a usage error that says what form
// is expected, found before anything is dialled.
func TestBadNATSURLIsUsage(t *testing.T) {
	cleanEnv(t)
	for _, u := range []string{"://x", "http://127.0.0.1:4222", "nats://127.0.0.1:99999", "nats://:4222"} {
		for _, cmd := range []string{"tail", "verify"} {
			r := runCLI(t, cmd, "--nats-url", u, "--timeout", "30s")
			if r.code != ExitUsage || !strings.Contains(r.stderr, "nats://HOST:PORT") || strings.Contains(r.stderr, "cannot connect") {
				t.Errorf("%s --nats-url %q: exit %d, stderr %q; want exit 2 naming the expected form", cmd, u, r.code, r.stderr)
			}
		}
	}
}

// NATS_URL is read when WRIT_NATS_URL is unset; WRIT_NATS_URL wins.
func TestNATSURLEnvironment(t *testing.T) {
	cleanEnv(t)
	live := startJetStream(t) // no receipt stream: the error names the server asked
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	cases := []struct {
		name, writ, nats string
		want             string
	}{
		{"NATS_URL alone", "", live, "no receipt stream"},
		{"WRIT_NATS_URL wins", dead, live, "cannot connect to NATS at " + dead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WRIT_NATS_URL", tc.writ)
			t.Setenv("NATS_URL", tc.nats)
			r := runCLI(t, "verify", "--timeout", "1s")
			if r.code != ExitUnavailable || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 3 and %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// --timeout covers connecting: with nothing listening, tail keeps trying
// for the timeout before it reports NATS unreachable.
func TestTimeoutCoversConnecting(t *testing.T) {
	cleanEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	l.Close()
	start := time.Now()
	r := runCLI(t, "tail", "--nats-url", dead, "--timeout", "1s")
	if d := time.Since(start); r.code != ExitUnavailable || d < 900*time.Millisecond || !strings.Contains(r.stderr, "kept trying") {
		t.Fatalf("exit %d after %v, stderr %q; want exit 3 after retrying for about 1s", r.code, d, r.stderr)
	}
}

// A deny or approval_required line names the tool that was refused or
// held.
func TestTailShowsTheTool(t *testing.T) {
	cases := []struct {
		name string
		e    events.Event
		want string
	}{
		{"deny", events.Event{Seq: 7, Kind: events.KindDeny, Worker: "w1", Tool: "Bash", Reason: "denied_by_policy"},
			" deny - w1 denied_by_policy tool=Bash\n"},
		{"deny with grounds", events.Event{Seq: 7, Kind: events.KindDeny, Worker: "w1", Tool: "WebFetch", Reason: "denied_by_policy", Grounds: []string{"a", "b"}},
			" deny - w1 denied_by_policy tool=WebFetch grounds=2\n"},
		{"approval required", events.Event{Seq: 8, Kind: events.KindApprovalRequired, Worker: "w1", Tool: "Edit", Reason: "approval_required", ReviewID: "rv-0123"},
			" approval_required - w1 approval_required tool=Edit review=rv-0123\n"},
		{"spend refused keeps its form", events.Event{Seq: 9, Kind: events.KindSpendRefused, GrantID: "g1", Worker: "w1", Tool: "Bash", Reason: "already_spent"},
			" spend_refused g1 w1 already_spent\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeHuman(&b, tc.e)
			if !strings.HasSuffix(b.String(), tc.want) {
				t.Fatalf("line %q, want suffix %q", b.String(), tc.want)
			}
		})
	}
}

// A review receipt's line names the caption, what the review covers, who
// decided it and the reply it came from, quoted verbatim.
func TestTailShowsReviews(t *testing.T) {
	art := events.Sum([]byte("q3"))
	cases := []struct {
		name string
		e    events.Event
		want string
	}{
		{"opened", events.Event{Seq: 1, Kind: events.KindReviewOpened, Worker: "w1", ReviewID: "rv-1", Caption: "q3-report", ArtifactVersion: 2,
			ArtifactPath: "out/q3.pdf", ArtifactDigest: art, Transition: "review_ready->send", Destination: "class:finance", ReviewerRole: "finance", Detail: "x"},
			" review_opened - w1 caption=q3-report_v2_review review=rv-1 artifact=out/q3.pdf sha256=" + art.Short() + " transition=review_ready->send dest=class:finance role=finance\n"},
		{"approved by a reply", events.Event{Seq: 2, Kind: events.KindReviewApproved, Worker: "w1", ReviewID: "rv-1", Caption: "bash", ArtifactVersion: 1,
			Tool: "Bash", Actor: "reviewer:dana", ExpiresAt: 1767225600000000000, ReplyChannel: "slack:#ops", ReplySender: "dana", ReplyText: "bash_v1_keep \"now\""},
			` review_approved - w1 caption=bash_v1_review review=rv-1 tool=Bash by=reviewer:dana until=2026-01-01T00:00:00Z reply="slack:#ops/dana: bash_v1_keep \"now\""` + "\n"},
		{"consumed", events.Event{Seq: 3, Kind: events.KindReviewConsumed, GrantID: "g1", Worker: "w1", ReviewID: "rv-1", Caption: "bash", ArtifactVersion: 1, Tool: "Bash", RefSeq: 2},
			" review_consumed g1 w1 caption=bash_v1_review review=rv-1 tool=Bash permit=2\n"},
		{"orphaned", events.Event{Seq: 4, Kind: events.KindReviewOrphaned, Actor: "operator", Missing: "live review bash_v1_keep",
			Candidates: []string{"bash_v2_review"}, ReplyChannel: "chat", ReplySender: "erin", ReplyText: "bash_v1_keep"},
			` review_orphaned - - by=operator missing="live review bash_v1_keep" candidates=bash_v2_review reply="chat/erin: bash_v1_keep"` + "\n"},
		{"rejected with a note", events.Event{Seq: 5, Kind: events.KindReviewRejected, Worker: "w1", ReviewID: "rv-2", Caption: "plan", ArtifactVersion: 1, Actor: "operator", Detail: "stale"},
			` review_rejected - w1 caption=plan_v1_review review=rv-2 by=operator note="stale"` + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			writeHuman(&b, tc.e)
			if !strings.HasSuffix(b.String(), tc.want) {
				t.Fatalf("line %q, want suffix %q", b.String(), tc.want)
			}
		})
	}
}
