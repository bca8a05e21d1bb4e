// End to end through the real hook entry point (the built binary) against
// a real single-node issuer at receipt format 4: reviews as decision
// records, decided by a person's plain-text reply.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

var captionPattern = regexp.MustCompile(`[a-z][a-z0-9-]*_v[0-9]+_review`)

// TestPlainTextReplyReleasesAHeldCallOnce: a coordinator's Bash call that
// reads a private key is held; the model's text names the review's
// caption, says a person must decide, and gives neither an approve command
// nor the keep token. A person's plain-text reply with the keep token,
// relayed through the API as a chat gateway would, approves it; the
// retried call is permitted once; the next retry is held again under a
// new caption. Then the coordinator puts an artifact up for review with
// `worker-agent review open` (the binary hashes the file): a person keeps
// v2, the artifact is regenerated as v3, and a reply carrying the v2 keep
// token binds nothing (review_orphaned); `worker-agent request --review
// q3-report_v2_keep --artifact FILE` (the file now v3) is refused
// approval_unbindable, missing artifact_digest, recovery
// rerender_artifact; once a person keeps v3 the call naming it is
// permitted once, and again is refused (missing spent).
func TestPlainTextReplyReleasesAHeldCallOnce(t *testing.T) {
	env := testenv.StartSingle(t, t.TempDir(), func(_ *raftnode.Config, c *issuer.Config) {
		c.InitialPolicy = policy.Recommended().Canonical()
	})
	testenv.WaitFor(t, 10*time.Second, "receipt format 4 or above", func() bool { return env.Service.Status().ReceiptFormatLevel >= fsm.ReceiptFormatReviews })
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	const held = "cat ~/.ssh/id_ed25519"
	bash := func(id string) result {
		t.Helper()
		in := patch(t, fixture(t, harness.ClaudeCode+"/pre_bash.json"), map[string]any{"tool_use_id": id, "tool_name": "Bash",
			"tool_input": map[string]any{"command": held}})
		return binRun{stdin: in}.run(t, "hook", harness.ClaudeCode, "--config", cfg, "--state-dir", dir)
	}
	heldCaption := func(what string, r result) string {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: %+v", what, r)
		}
		d := hookDecision(t, r.stdout)
		reason := d["permissionDecisionReason"]
		caption := captionPattern.FindString(reason)
		if d["permissionDecision"] != "deny" || caption == "" || !strings.Contains(reason, "a person must decide") {
			t.Fatalf("%s: want the call held naming a caption a person decides, got %+v", what, r)
		}
		for _, never := range []string{"_keep", "issuer approve", "issuer review", "writ.op."} {
			if strings.Contains(reason, never) {
				t.Fatalf("%s: the model's text contains %q: %s", what, never, reason)
			}
		}
		return caption
	}
	caption := heldCaption("the held call", bash("toolu_rv_1"))

	nc, err := nats.Connect(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := client.New(nc, "")
	keep := strings.TrimSuffix(caption, "_review") + "_keep"
	at := time.Now().UnixNano()
	e, err := op.ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "slack:#ops", Sender: "alice", At: at, Text: "ok, " + keep})
	if err != nil || e.Kind != events.KindReviewApproved || e.Caption != caption {
		t.Fatalf("the person's reply: %+v %v", e, err)
	}
	if r := bash("toolu_rv_2"); r.code != 0 || r.stdout != "" {
		t.Fatalf("the approved call: want a permit (exit 0, no output), got %+v", r)
	}
	if next := heldCaption("the second retry", bash("toolu_rv_3")); next == caption {
		t.Fatalf("the second retry names the used review %s", caption)
	}

	// An artifact review, opened by the coordinator's own binary.
	art := filepath.Join(dir, "q3-report.txt")
	open := func(content string) grants.Envelope {
		t.Helper()
		if err := os.WriteFile(art, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := binRun{}.run(t, "review", "open", "--worker", "w1", "--lane", "coordinator", "--nats-url", env.URL,
			"--artifact", art, "--caption", "q3-report", "--transition", "review_ready->send", "--recipient", "cfo@example.com")
		var env grants.Envelope
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &env) != nil || env.Kind != events.KindReviewOpened {
			t.Fatalf("review open: %+v", r)
		}
		return env
	}
	if v1 := open("draft one"); v1.Caption != "q3-report_v1_review" {
		t.Fatalf("first version: %+v", v1)
	}
	if v2 := open("draft two"); v2.Caption != "q3-report_v2_review" {
		t.Fatalf("second version: %+v", v2)
	}
	if e, err := op.ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "slack:#finance", Sender: "dana", At: at + 1, Text: "q3-report_v2_keep"}); err != nil || e.Kind != events.KindReviewApproved {
		t.Fatalf("keeping v2: %+v %v", e, err)
	}
	if v3 := open("draft three"); v3.Caption != "q3-report_v3_review" {
		t.Fatalf("regenerated: %+v", v3)
	}
	e, err = op.ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "slack:#finance", Sender: "erin", At: at + 2, Text: "q3-report_v2_keep"})
	if err != nil || e.Kind != events.KindReviewOrphaned {
		t.Fatalf("the v2 token against v3: %+v %v", e, err)
	}
	// A call that names the v2 approval, with the artifact as it is now
	// (v3): refused, the artifact is not the version approved.
	send := func(ref string) (grants.Envelope, result) {
		t.Helper()
		r := binRun{}.run(t, "request", "--worker", "w1", "--lane", "coordinator", "--nats-url", env.URL,
			"--tool", "Bash", "--args", `{"command":"ls out"}`, "--review", ref, "--artifact", art)
		var e grants.Envelope
		if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
			t.Fatalf("request --review %s: %+v", ref, r)
		}
		return e, r
	}
	if e, r := send("q3-report_v2_keep"); r.code != ExitDeny || e.Reason != grants.ReasonApprovalUnbindable ||
		e.Missing != grants.MissingArtifactDigest || e.Recovery != grants.RecoverRerenderArtifact {
		t.Fatalf("the v2 approval for the v3 artifact: %+v", r)
	}
	if e, err := op.ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "slack:#finance", Sender: "dana", At: at + 3, Text: "keep q3-report_v3_keep"}); err != nil || e.Kind != events.KindReviewApproved {
		t.Fatalf("keeping v3: %+v %v", e, err)
	}
	if e, r := send("q3-report_v3_keep"); r.code != 0 || e.Decision != grants.Permit || e.Caption != "" && e.ReviewID == "" {
		t.Fatalf("the v3 approval for the v3 artifact: %+v", r)
	}
	if e, r := send("q3-report_v3_keep"); r.code != ExitDeny || e.Missing != grants.MissingSpent {
		t.Fatalf("the v3 approval used again: %+v", r)
	}
	states := map[string]string{}
	rs, err := op.Reviews(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs.Reviews {
		states[r.Caption] = r.State
	}
	if states["q3-report_v2_review"] != "superseded" || states["q3-report_v3_review"] != "consumed" || states[caption] != "consumed" {
		t.Fatalf("review states: %v", states)
	}
}
