package injection

import (
	"os"
	"path/filepath"
	"testing"
)

// The coding-session replays (testdata/sessions/*.txt) run through the
// real worker-agent hook binary against a real issuer, once under the
// built-in default (the policy a fresh issuer applies by itself) and once
// under docs/policy.example.yaml applied by an operator:
//
//   - claude-code.txt and codex.txt are ordinary coding sessions in a
//     project directory (reads, searches, edits, tests, git, a subagent, a
//     docs fetch, a web search, the harness's bookkeeping tools, Codex's
//     shell and apply_patch): every call is permitted and nothing is held
//     for review;
//   - dangerous.txt is the same kind of session asked (by a page or a
//     file) to do what a coding agent must not: send credentials out, run
//     a download, open a reverse shell, rewrite writ's policy, write the
//     agent's memory, read a private key, pass a secret it read to a
//     foreign host. Each is refused or held, by the rule it names.

func sessionFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "sessions", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sessions found: %v", err)
	}
	return files
}

// TestCodingSessionsBuiltinDefault: the sessions under the policy a fresh
// issuer starts with (no policy applied by anyone).
func TestCodingSessionsBuiltinDefault(t *testing.T) {
	runScenarios(t, sessionFiles(t), nil, "default/")
}

// TestCodingSessionsExamplePolicy: the sessions under
// docs/policy.example.yaml.
func TestCodingSessionsExamplePolicy(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "policy.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runScenarios(t, sessionFiles(t), doc, "example/")
}

// TestOutsideWorkspaceAnswer: under the example policy with a workspace
// per worker, a read outside it is held for review and the answer the
// model reads says which workspace it left.
func TestOutsideWorkspaceAnswer(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "policy.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc = append(doc, "\nworkspace: /work/{worker}\n"...)
	f := filepath.Join(t.TempDir(), "outside-workspace.txt")
	scenario := "session project\nfile main.go package main\nstart\n" +
		`call Read {"file_path":"{ws}/main.go"} => approval_required boundary_crossing text~is outside the workspace /work/w1` + "\n"
	if err := os.WriteFile(f, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	runScenarios(t, []string{f}, doc, "")
}
