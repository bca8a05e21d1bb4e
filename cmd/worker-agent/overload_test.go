package main

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/harness"
)

// An issuer that sheds load (issuer_unavailable at its in-flight limit on
// every attempt) or never answers before the hook's deadline leaves every
// PreToolUse blocked — a main-session call, a Task call that would spawn a
// subagent, a subagent's call — with one line saying the call was blocked
// rather than run unchecked and, when the issuer said so, what it kept.
// Nothing here may ever exit 0.
func TestHookRefusesUnderOverload(t *testing.T) {
	cleanEnv(t)
	url := startNATS(t)
	shed := grants.Refuse(grants.ReasonIssuerUnavail, "capacity",
		"issuer is at its in-flight limit: "+grants.KeptUndecided+"; "+grants.KeptRetrySame)
	for _, tc := range []struct {
		name   string
		answer func(int, string) []byte
		want   []string
	}{
		{"in-flight limit", always(shed), []string{"did not answer in time", "capacity", grants.KeptUndecided, grants.KeptBlocked}},
		{"no answer", func(int, string) []byte { return nil }, []string{"did not answer in time", grants.KeptBlocked}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := "ov-" + strings.ReplaceAll(tc.name, " ", "-")
			f := startFake(t, url, func(n int, subj string) []byte {
				if !strings.HasPrefix(subj, "writ.api."+w+".") {
					return nil
				}
				return tc.answer(n, subj)
			})
			dir := t.TempDir()
			cfg := writeJSON(t, dir, "w.json", map[string]any{"worker": w, "lane": "coordinator", "nats_url": url,
				"subagents": map[string]any{"Explore": "isolated"}})
			good := fixture(t, "claude-code/pre_bash.json")
			for _, in := range []struct {
				what  string
				stdin []byte
			}{
				{"Bash", good},
				{"Task", patch(t, good, map[string]any{"tool_name": "Task", "tool_input": map[string]any{"prompt": "look", "subagent_type": "Explore"}})},
				{"subagent Read", patch(t, good, map[string]any{"tool_name": "Read", "tool_input": map[string]any{"file_path": "/tmp/a"},
					"agent_id": "agent_ov", "agent_type": "Explore"})},
			} {
				r := binRun{stdin: in.stdin}.run(t, "hook", harness.ClaudeCode, "--config", cfg, "--state-dir", dir, "--deadline", "1500ms")
				if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
					t.Fatalf("%s: exit %d stdout %q stderr %q; want exit 2, one line, nothing on stdout", in.what, r.code, r.stdout, r.stderr)
				}
				for _, s := range tc.want {
					if !strings.Contains(r.stderr, s) {
						t.Errorf("%s: stderr %q lacks %q", in.what, r.stderr, s)
					}
				}
				if r.took > 4*time.Second {
					t.Fatalf("%s took %v with a 1.5s deadline", in.what, r.took)
				}
			}
			if len(f.requests()) == 0 {
				t.Fatal("the fake issuer was never asked")
			}
		})
	}
}
