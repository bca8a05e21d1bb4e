package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/harness"
	"github.com/writ-dev/writ/internal/testing/testenv"
	"github.com/writ-dev/writ/issuer"
	"github.com/writ-dev/writ/policy"
	"github.com/writ-dev/writ/raftnode"
)

// startIssuerAt starts a single issuer whose receipt format level is held
// at level, and waits until it is in force.
func startIssuerAt(t testing.TB, level uint64) *testenv.Single {
	t.Helper()
	env := testenv.StartSingle(t, t.TempDir(), func(rc *raftnode.Config, ic *issuer.Config) {
		testenv.WithInitialPolicy(policy.LegacyDefault().Canonical())(rc, ic)
		ic.ReceiptFormat = level
	})
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("receipt format %d", level), func() bool {
		return env.Service.Status().ReceiptFormatLevel == level
	})
	return env
}

// opTap records the worker API requests of worker, by operation, in the
// order the server routed them.
type opTap struct {
	nc   *nats.Conn
	mu   sync.Mutex
	seen []string
}

func tapOps(t testing.TB, url, worker string) *opTap {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	tap := &opTap{nc: nc}
	if _, err := nc.Subscribe(api.WorkerPrefix+worker+".*", func(m *nats.Msg) {
		tap.mu.Lock()
		tap.seen = append(tap.seen, m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
		tap.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return tap
}

// take returns the operations seen since the last take. The hook has its
// answers, so the server routed its requests before the flush's pong.
func (p *opTap) take(t testing.TB) []string {
	t.Helper()
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.seen
	p.seen = nil
	return out
}

// TestHookRoundTrips counts the requests one hooked Claude Code call
// (PreToolUse, then PostToolUse with a result to register) sends to a real
// issuer, and the raft entries its receipts were written in. At receipt
// format 11 the PreToolUse asks for the grant and spends it in one request
// (one entry: the permit and the attempt) and the PostToolUse, reading the
// grant from the call's record, reports the outcome and registers the
// result in one request (one entry: the effect and the source): two
// round trips, both committed. Below 11 the issuer proposes each combined
// request as its two commands (two entries each); with no record of the
// call (another state directory) the PostToolUse asks for the grant again
// (a replayed request: a proposal, no receipt) before reporting.
func TestHookRoundTrips(t *testing.T) {
	pre := patch(t, fixture(t, "claude-code/post_webfetch.json"), map[string]any{
		"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})
	post := fixture(t, "claude-code/post_webfetch.json")
	cases := []struct {
		name       string
		level      uint64
		sameState  bool
		pre, post  []string
		proposals  int // commands the issuer proposes for them
		entries    int // raft entries the call's receipts were written in
		receiptsOf []events.Kind
	}{
		{"format 11", fsm.ReceiptFormatGrantSpend, true,
			[]string{api.OpGrantSpend}, []string{api.OpEffectSource}, 2, 2,
			[]events.Kind{events.KindPermit, events.KindAttempt, events.KindEffect, events.KindSource}},
		// Below 11 the issuer proposes each combined request's two
		// commands in turn: the worker's round trips stay two.
		{"format 10", fsm.ReceiptFormatResultFields, true,
			[]string{api.OpGrantSpend}, []string{api.OpEffectSource}, 4, 4,
			[]events.Kind{events.KindPermit, events.KindAttempt, events.KindEffect, events.KindSource}},
		{"format 11, no call record", fsm.ReceiptFormatGrantSpend, false,
			[]string{api.OpGrantSpend}, []string{api.OpGrant, api.OpEffectSource}, 3, 2,
			[]events.Kind{events.KindPermit, events.KindAttempt, events.KindEffect, events.KindSource}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := startIssuerAt(t, tc.level)
			dir := t.TempDir()
			cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
			tap := tapOps(t, env.URL, "w1")
			session := fmt.Sprintf("rt%d-5b0c6a9e", i)
			in := func(b []byte) []byte { return patch(t, b, map[string]any{"session_id": session}) }

			preDir, postDir := t.TempDir(), ""
			if tc.sameState {
				postDir = preDir
			}
			if r := (binRun{dir: preDir, stdin: in(pre)}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 || r.stdout != "" {
				t.Fatalf("PreToolUse: %+v", r)
			}
			if got := tap.take(t); !reflect.DeepEqual(got, tc.pre) {
				t.Fatalf("PreToolUse sent %v, want %v", got, tc.pre)
			}
			if r := (binRun{dir: postDir, stdin: in(post)}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 {
				t.Fatalf("PostToolUse: %+v", r)
			}
			if got := tap.take(t); !reflect.DeepEqual(got, tc.post) {
				t.Fatalf("PostToolUse sent %v, want %v", got, tc.post)
			}
			var in0 harness.HookInput
			_ = json.Unmarshal(in(pre), &in0)
			key := harness.IdempotencyKey(harness.ClaudeCode, session, in0.ToolUseID)
			all := receipts(t, env)
			evs := byKey(all, key)
			if len(evs) != 2 {
				t.Fatalf("receipts under the call's key: %v", kinds(evs))
			}
			grant := evs[0].GrantID
			var mine []events.Event
			for _, e := range all {
				if e.GrantID == grant && e.GrantID != "" || e.Kind == events.KindSource && e.Session == in0.SessionID {
					mine = append(mine, e)
				}
			}
			if got := kinds(mine); !reflect.DeepEqual(got, tc.receiptsOf) {
				t.Fatalf("the call's receipts: %v, want %v", got, tc.receiptsOf)
			}
			entries := map[uint64]bool{}
			for _, e := range mine {
				entries[e.RaftIndex] = true
			}
			if len(entries) != tc.entries {
				t.Fatalf("the call's receipts were written in %d raft entries, want %d", len(entries), tc.entries)
			}
			t.Logf("%s: %d requests (%d proposals), receipts in %d raft entries", tc.name, len(tc.pre)+len(tc.post), tc.proposals, len(entries))
		})
	}
}

// TestHookRecordBindsTheCall: a PostToolUse that reads its grant from the
// call's record still refuses to bind a result whose tool_input differs
// from the one the PreToolUse presented (the record keeps the request
// digest), and records nothing for it; the same call's own PostToolUse is
// then recorded once.
func TestHookRecordBindsTheCall(t *testing.T) {
	env := startIssuerAt(t, fsm.ReceiptFormatGrantSpend)
	dir := t.TempDir()
	cfg := writeJSON(t, dir, "worker.json", workerConfigFor(env.URL))
	tap := tapOps(t, env.URL, "w1")
	post := patch(t, fixture(t, "claude-code/post_webfetch.json"), map[string]any{"session_id": "rec-5b0c6a9e"})
	pre := patch(t, post, map[string]any{"hook_event_name": "PreToolUse", "tool_response": nil, "duration_ms": nil})
	state := t.TempDir()
	if r := (binRun{dir: state, stdin: pre}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 || r.stdout != "" {
		t.Fatalf("PreToolUse: %+v", r)
	}
	tap.take(t)
	other := patch(t, post, map[string]any{"tool_input": map[string]any{"url": "https://evil.example/x", "prompt": "p"}})
	r := (binRun{dir: state, stdin: other}).run(t, "hook", "claude-code", "--config", cfg)
	if r.code != 2 || !strings.Contains(r.stderr, "tool_input differs") {
		t.Fatalf("PostToolUse with other arguments: %+v", r)
	}
	if got := tap.take(t); len(got) != 0 {
		t.Fatalf("a mismatched PostToolUse sent %v", got)
	}
	if r := (binRun{dir: state, stdin: post}).run(t, "hook", "claude-code", "--config", cfg); r.code != 0 {
		t.Fatalf("PostToolUse: %+v", r)
	}
	if got := tap.take(t); !reflect.DeepEqual(got, []string{api.OpEffectSource}) {
		t.Fatalf("PostToolUse sent %v", got)
	}
}
