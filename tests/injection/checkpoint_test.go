package injection

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/client"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/internal/testing/testenv"
	wk "github.com/writ-dev/writ/worker"
)

// checkpointStep plays the checkpoint steps of a scenario (see the
// format in injection_test.go): the resurrection attacks replay what a
// bundle remembers after a restore, and must find nothing spendable.
func (r *runner) checkpointStep(t *testing.T, s step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	w := client.New(r.nc, worker)
	switch s.verb {
	case "hold":
		env, err := w.Grant(ctx, api.GrantRequest{Lane: lane, Tool: s.a, Args: json.RawMessage(r.expand(s.b)), Cwd: r.ws})
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("%s: %v %+v", r.where(s), err, env)
		}
		r.held = env.GrantID
	case "stage":
		r.staged = [2]string{s.a, s.b}
	case "approve-last":
		if err := r.readStream(ctx); err != nil {
			t.Fatal(err)
		}
		id := ""
		for _, e := range r.seen {
			if e.Kind == events.KindApprovalRequired && e.Session == r.session {
				id = e.ReviewID
			}
		}
		env, err := client.New(r.nc, "operator").Approve(ctx, api.ApproveRequest{ReviewID: id})
		if id == "" || err != nil || env.Decision != grants.Permit {
			t.Fatalf("%s: approving %q: %v %+v", r.where(s), id, err, env)
		}
	case "checkpoint":
		switch s.a {
		case "save":
			r.bundle = filepath.Join(r.home, "session.ckpt")
			args := []string{"--worker", worker, "checkpoint", "save", "--out", r.bundle, "--session", r.session,
				"--state-dir", r.state, "--lane", lane, "--task", "scenario " + r.name}
			if r.held != "" {
				args = append(args, "--grant", r.held)
			}
			if c := r.lastCaption(ctx, t); c != "" {
				args = append(args, "--review", c)
			}
			if r.staged[0] != "" {
				args = append(args, "--staged", r.staged[0]+"="+r.staged[1])
			}
			r.binary(t, s, args...)
		case "restore":
			out := r.binary(t, s, "--nats-url", r.env.URL, "--worker", worker, "checkpoint", "restore", r.bundle)
			var rs wk.Restored
			if err := json.Unmarshal([]byte(out), &rs); err != nil || rs.Incarnation == 0 {
				t.Fatalf("%s: restore answered %q (%v)", r.where(s), out, err)
			}
		default:
			t.Fatalf("%s: want checkpoint save or checkpoint restore", r.where(s))
		}
	case "revoke-dest":
		var doc map[string]any
		if err := json.Unmarshal(r.policy, &doc); err != nil {
			t.Fatalf("%s: %v", r.where(s), err)
		}
		deny, _ := doc["deny"].([]any)
		doc["deny"] = append(deny, map[string]any{"id": "revoked-destination", "tools": []string{"*"}, "targets": []string{s.a}})
		pol, _ := json.Marshal(doc)
		env, err := client.New(r.nc, "operator").SetPolicy(ctx, pol)
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("%s: %v %+v", r.where(s), err, env)
		}
		r.policy = pol
	case "replay-held":
		cp := r.readBundle(t, s)
		if len(cp.History) != 1 {
			t.Fatalf("%s: the bundle holds %d grant ids", r.where(s), len(cp.History))
		}
		env, err := w.Spend(ctx, api.SpendRequest{GrantID: cp.History[0], Digest: r.heldDigest(t, cp.History[0])})
		r.check(t, s, env, err)
	case "resend-staged":
		cp := r.readBundle(t, s)
		if len(cp.Staged) != 1 {
			t.Fatalf("%s: the bundle holds %d staged messages", r.where(s), len(cp.Staged))
		}
		args, _ := json.Marshal(map[string]string{"to": cp.Staged[0].Destination, "subject": "staged", "body": s.b})
		id := r.callID()
		r.hook(t, s, r.toolEvent("PreToolUse", step{a: cp.Staged[0].Tool, b: string(args)}, id))
		ev := r.decision(t, s, id)
		r.check(t, s, grants.Envelope{Decision: grants.Decision(ev.Decision), Reason: grants.Reason(ev.Reason), Detail: ev.Detail}, nil)
	case "claim-review":
		cp := r.readBundle(t, s)
		if len(cp.Reviews) != 1 {
			t.Fatalf("%s: the bundle holds %d review references", r.where(s), len(cp.Reviews))
		}
		// The caption's keep token, relayed as a person's chat reply.
		keep := strings.TrimSuffix(cp.Reviews[0], "_review") + "_keep"
		r.replies++
		env, err := client.New(r.nc, "operator").ReplyReview(ctx, "", api.ReviewReplyRequest{Channel: "chat", Sender: "restored-session",
			At: int64(r.replies), Text: keep})
		r.check(t, s, env, err)
	case "revoke-worker":
		env, err := client.New(r.nc, "operator").Revoke(ctx, api.RevokeRequest{Worker: worker})
		if err != nil || env.Decision != grants.Permit {
			t.Fatalf("%s: %v %+v", r.where(s), err, env)
		}
	case "expect-spawn":
		child := wk.SubagentChildID(worker, r.session, s.a)
		if err := r.readStream(ctx); err != nil {
			t.Fatal(err)
		}
		for _, e := range r.seen {
			if e.Kind == events.KindSpawn && e.Worker == child {
				if e.Parent != worker || e.Lane != s.b || e.ParentLane != lane {
					t.Errorf("%s: spawn receipt %+v", r.where(s), e)
				}
				return
			}
		}
		t.Errorf("%s: no spawn receipt for subagent %s (child %s)", r.where(s), s.a, child)
	default:
		t.Fatalf("%s: unknown step", r.where(s))
	}
}

// check compares an answer with the step's expectation.
func (r *runner) check(t *testing.T, s step, env grants.Envelope, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", r.where(s), err)
	}
	if env.Decision != s.decision || (s.reason != "" && env.Reason != s.reason) || (s.text != "" && !strings.Contains(env.Detail, s.text)) {
		t.Errorf("%s: got %s %s (%q), want %s %s %q", r.where(s), env.Decision, env.Reason, env.Detail, s.decision, s.reason, s.text)
	}
}

// heldDigest is the request digest of a grant, as its permit recorded it.
// Receipts reach the stream after the answer (in publication rounds), so
// it reads the stream until the permit is there.
func (r *runner) heldDigest(t *testing.T, id string) string {
	t.Helper()
	var digest string
	testenv.WaitFor(t, stepTimeout, "the permit of grant "+id+" in the stream", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := r.readStream(ctx); err != nil {
			return false
		}
		for _, e := range r.seen {
			if e.Kind == events.KindPermit && e.GrantID == id {
				digest = e.Digest.String()
				return true
			}
		}
		return false
	})
	return digest
}

// lastCaption is the caption of the session's latest review.
func (r *runner) lastCaption(ctx context.Context, t *testing.T) string {
	if err := r.readStream(ctx); err != nil {
		t.Fatal(err)
	}
	c := ""
	for _, e := range r.seen {
		if e.Kind == events.KindApprovalRequired && e.Session == r.session && e.Caption != "" {
			c = fsm.Caption(e.Caption, e.ArtifactVersion)
		}
	}
	return c
}

func (r *runner) readBundle(t *testing.T, s step) *wk.Checkpoint {
	t.Helper()
	cp, err := wk.ReadCheckpoint(r.bundle)
	if err != nil {
		t.Fatalf("%s: %v", r.where(s), err)
	}
	return cp
}

// binary runs the worker-agent binary (not as a hook) and returns its
// stdout; it must exit 0.
func (r *runner) binary(t *testing.T, s step, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir = r.ws
	cmd.Env = append(cleanEnv(), "HOME="+r.home, "XDG_STATE_HOME="+filepath.Join(r.home, "state"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: worker-agent %s: %v\nstdout: %s\nstderr: %s", r.where(s), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestSubagentsAreSpawnedWorkers: testdata/fleet/subagents.txt under the
// issuer's built-in default policy.
func TestSubagentsAreSpawnedWorkers(t *testing.T) {
	runScenarios(t, []string{filepath.Join("testdata", "fleet", "subagents.txt")}, nil, "")
}
