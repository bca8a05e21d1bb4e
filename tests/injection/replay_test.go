package injection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// hookExit runs the hook binary on one event like runner.hook, but returns
// its exit code and output instead of requiring exit 0.
func (r *runner) hookExit(t *testing.T, ev map[string]any) (code int, stdout, stderr string) {
	t.Helper()
	ev["session_id"] = r.session
	ev["cwd"] = r.ws
	ev["transcript_path"] = filepath.Join(r.home, "transcript.jsonl")
	in, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, "--config", r.config, "hook", r.harness)
	cmd.Dir = r.ws
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(cleanEnv(), "HOME="+r.home, "XDG_STATE_HOME="+filepath.Join(r.home, "state"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("worker-agent hook: %v", err)
	}
	return code, out.String(), errb.String()
}

// attempts counts the attempt receipts of the call with tool_use_id id.
func (r *runner) attempts(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := r.readStream(ctx); err != nil {
		t.Fatal(err)
	}
	grant := ""
	for _, e := range r.seen {
		if e.Kind == events.KindPermit && strings.HasSuffix(e.IdemKey, ":"+id) {
			grant = e.GrantID
		}
	}
	n := 0
	for _, e := range r.seen {
		if e.Kind == events.KindAttempt && grant != "" && e.GrantID == grant {
			n++
		}
	}
	return n
}

// TestReplayedPreToolUse: a PreToolUse delivered twice for the same
// tool_use_id, through the real hook binary. Attack: the first was
// permitted (and the tool may have run), so the repeat is blocked (exit 2,
// the reason on stderr) and the issuer records one attempt, not a second
// permit for the harness. Benign twin: the repeat of a refused call is
// answered again (the same refusal, exit 0), and a new call id for the same
// tool and arguments is permitted as a call of its own.
func TestReplayedPreToolUse(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("testdata", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, workerAgent(t), doc, "replay")
	r.do(t, step{verb: "session", a: "one"})
	r.do(t, step{verb: "start"})
	r.do(t, step{verb: "prompt", a: "Send 1200 to my landlord, IBAN DE89370400440532013000, for December rent."})

	pay := step{line: 1, verb: "call", a: "mcp__bank__send_money", b: `{"recipient":"DE89370400440532013000","amount":1200}`}
	id := r.callID()
	pre := func(id string) map[string]any { return r.toolEvent("PreToolUse", pay, id) }
	if code, out, errs := r.hookExit(t, pre(id)); code != 0 || strings.Contains(out, `"deny"`) {
		t.Fatalf("first PreToolUse: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if ev := r.decision(t, pay, id); ev.Decision != string(grants.Permit) {
		t.Fatalf("first PreToolUse: %s %s", ev.Decision, ev.Reason)
	}
	code, out, errs := r.hookExit(t, pre(id))
	if code != 2 || !strings.Contains(errs, "already permitted") || !strings.Contains(errs, id) {
		t.Fatalf("repeated PreToolUse: exit %d, stdout %q, stderr %q; want exit 2 naming the call", code, out, errs)
	}
	if n := r.attempts(t, id); n != 1 {
		t.Fatalf("%d attempt receipts for one call", n)
	}
	// Its PostToolUse still records the one run.
	post := r.toolEvent("PostToolUse", pay, id)
	post["tool_response"] = map[string]any{"success": true}
	if code, _, errs := r.hookExit(t, post); code != 0 {
		t.Fatalf("PostToolUse after the blocked repeat: exit %d: %s", code, errs)
	}

	// Benign twins. A refused call asked again gets its refusal again.
	steal := step{line: 2, verb: "call", a: "mcp__bank__send_money", b: `{"recipient":"GB29NWBK60161331926819","amount":5}`}
	sid := r.callID()
	for i := 0; i < 2; i++ {
		code, out, errs := r.hookExit(t, r.toolEvent("PreToolUse", steal, sid))
		if code != 0 || !strings.Contains(out, `"deny"`) || strings.Contains(errs, "already permitted") {
			t.Fatalf("refused call, delivery %d: exit %d, stdout %q, stderr %q", i+1, code, out, errs)
		}
	}
	// The same tool and arguments under a new call id: a call of its own
	// (the effect ledger holds the first payment, so it is held for a
	// review, not blocked as a replay).
	nid := r.callID()
	code, out, errs = r.hookExit(t, pre(nid))
	if code != 0 || strings.Contains(errs, "already permitted") {
		t.Fatalf("new call id: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if ev := r.decision(t, pay, nid); ev.Decision == string(grants.Deny) {
		t.Fatalf("new call id refused: %s %s", ev.Decision, ev.Reason)
	}
}
