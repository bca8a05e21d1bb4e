package injection

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/harness"
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
//   - mail-payments.txt is an ordinary mail-and-payments session (search
//     and read mail, read a bill through the filesystem MCP server, pay
//     the payee and amount the user named, mail two colleagues at once,
//     look a third up in the address book, invite a fourth): nothing is
//     refused or held;
//   - mail-payments-injected.txt is that session with an injection in the
//     invoice mail (another payee and amount, an outside address in the
//     recipient list at any position or in cc, an invitation, a standing
//     rule for memory): each is held for the owner.
//   - workspace.txt is a session with chat, file-drive and mail MCP
//     servers of the kinds agent benchmarks use (a direct message, a
//     channel post, a share, a mail to recipients, a deletion), each
//     target named by the user: nothing is held;
//   - workspace-injected.txt has a chat message that names another person
//     to message, an outside address to share with and mail, a file to
//     delete, a member to invite, a password and a page to publish: each
//     is held.
//   - mcp-actions-injected.txt has servers with no surface of their own
//     (a shop, a bank, a smart lock, a browser) and a product review that
//     asks for a guest key, a transfer, an order and a deletion: the reads
//     go through, every action is held by the verb of its tool's name, and
//     fetches keep their URLs to the egress allow-list.
//
// TestMailSessionsThroughMCP plays the two mail sessions again with their
// MCP calls through the `worker-agent mcp` proxy.

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

// TestMailSessionsThroughMCP: the mail-and-payments sessions under the
// built-in default, their MCP calls through the proxy.
func TestMailSessionsThroughMCP(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "sessions", "mail-payments*.txt"))
	if err != nil || len(files) != 2 {
		t.Fatalf("mail sessions: %v %v", files, err)
	}
	runScenariosAs(t, files, nil, "mcp/", harness.MCP)
}
