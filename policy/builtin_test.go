package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
	"github.com/writ-dev/writ/policy"
)

// builtinDocs are the documents every built-in rule must hold in: the
// recommended policy, docs/policy.example.yaml, and the built-in default
// once it is a version 2 document.
func builtinDocs(t *testing.T) map[string]*policy.Policy {
	t.Helper()
	docs := map[string]*policy.Policy{
		"recommended":         policy.Recommended(),
		"policy.example.yaml": loadPolicy(t, "../docs/policy.example.yaml"),
	}
	if d := policy.Default(); d.Version == policy.SchemaVersion {
		docs["default"] = d
	}
	for name, p := range docs {
		q, err := policy.WithBuiltins(p)
		if err != nil {
			t.Fatalf("%s: WithBuiltins: %v", name, err)
		}
		docs[name] = q
	}
	return docs
}

// TestBuiltinRulesRefuseOperatorCommands: a worker's call that runs one of
// writ's operator commands, or publishes to an operator subject, is denied
// by a built-in shape rule in every document writ writes to its log —
// through Bash, through an MCP tool's argument, in the coordinator lane
// that may otherwise call anything — while near misses pass that rule.
func TestBuiltinRulesRefuseOperatorCommands(t *testing.T) {
	cases := []struct {
		name, lane, tool, args string
		rule                   string // "" = not refused by a built-in rule
	}{
		{"bash approve", "coordinator", "Bash", `{"command":"issuer approve rv-0123456789abcdef0123"}`, "writ-operator-command"},
		{"bash path prefix", "coordinator", "Bash", `{"command":"/usr/local/bin/issuer approve rv-0123456789abcdef0123"}`, "writ-operator-command"},
		{"bash env", "coordinator", "Bash", `{"command":"env issuer reinstate w1"}`, "writ-operator-command"},
		{"bash sh -c quoted", "coordinator", "Bash", `{"command":"sh -c \"iss''uer  approve rv-1\""}`, "writ-operator-command"},
		{"bash IFS", "coordinator", "Bash", `{"command":"issuer${IFS}policy${IFS}apply open.yaml"}`, "writ-operator-command"},
		{"bash multi-line", "coordinator", "Bash", "{\"command\":\"true\\nissuer snapshot restore --in s\"}", "writ-operator-command"},
		{"specialist bash", "specialist", "Bash", `{"command":"./bin/issuer --json approve rv-1"}`, "writ-operator-command"},
		{"nats req", "coordinator", "Bash", `{"command":"nats req writ.op.approve '{\"review_id\":\"rv-1\"}'"}`, "writ-operator-subject"},
		{"nats pub", "coordinator", "Bash", `{"command":"nats pub writ.op.policy @open.json"}`, "writ-operator-subject"},
		{"mcp subject arg", "coordinator", "mcp__nats__request", `{"subject":"writ.op.approve","payload":"{\"review_id\":\"rv-1\"}"}`, "writ-operator-subject"},
		{"mcp nested command arg", "coordinator", "mcp__shell__run", `{"argv":["sh","-c","issuer approve rv-1"]}`, "writ-operator-command"},
		{"mcp argv split into elements", "coordinator", "mcp__shell__exec", `{"argv":["/usr/local/bin/issuer","approve","rv-0123456789abcdef0123"],"cwd":"/tmp"}`, "writ-operator-command"},
		{"mcp argv policy apply", "coordinator", "mcp__shell__exec", `{"cmd":{"argv":["issuer","policy","apply","open.yaml"]}}`, "writ-operator-command"},
		{"renamed binary", "coordinator", "Bash", `{"command":"cp bin/issuer /tmp/x && /tmp/x approve rv-0123456789abcdef0123"}`, "writ-operator-command"},
		{"near miss argv", "coordinator", "mcp__shell__exec", `{"argv":["go","test","./issuer/..."]}`, ""},
		{"near miss separate fields", "coordinator", "Bash", `{"command":"go test ./cmd/issuer","description":"approve the plan"}`, ""},
		{"near miss grep", "coordinator", "Bash", `{"command":"grep issuer README.md"}`, ""},
		{"near miss go test", "coordinator", "Bash", `{"command":"go test ./issuer/..."}`, ""},
		{"near miss status", "coordinator", "Bash", `{"command":"issuer status"}`, ""},
		{"near miss policy show", "coordinator", "Bash", `{"command":"issuer policy show"}`, ""},
		{"near miss cat", "coordinator", "Bash", `{"command":"cat issuer/approve.go"}`, ""},
		{"near miss worker subject", "coordinator", "Bash", `{"command":"nats req writ.api.w1.grant {}"}`, ""},
		{"near miss mcp", "coordinator", "mcp__github__get_issue", `{"repo":"writ-dev/issuer","number":3}`, ""},
	}
	for name, p := range builtinDocs(t) {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				j := p.Judge(req(t, "w1", tc.lane, tc.tool, tc.args), usage{}, now)
				refused := j.Decision == grants.Deny && j.Reason == grants.ReasonShapeRule &&
					len(j.Rules) > 0 && strings.HasPrefix(j.Rules[len(j.Rules)-1], "shape:writ-operator-")
				if tc.rule == "" {
					if refused {
						t.Fatalf("near miss refused by a built-in rule: %+v", j)
					}
					return
				}
				if !refused || j.Rules[len(j.Rules)-1] != "shape:"+tc.rule {
					t.Fatalf("want deny by shape:%s, got %s %s rules=%v", tc.rule, j.Decision, j.Reason, j.Rules)
				}
			})
		}
	}
}

// TestBuiltinRulesOnlyWhereWritten: a document as it was before writ added
// the built-in rules (an old log entry) judges exactly as before — the
// engine adds nothing on its own, so replaying an old log reaches the same
// decisions.
func TestBuiltinRulesOnlyWhereWritten(t *testing.T) {
	p := policy.Recommended()
	if policy.HasBuiltins(p) {
		t.Fatal("the recommended document itself carries the built-in rules; WithBuiltins adds them where a document enters the log")
	}
	j := p.Judge(req(t, "w1", "coordinator", "Bash", `{"command":"issuer approve rv-1"}`), usage{}, now)
	if j.Reason == grants.ReasonShapeRule {
		t.Fatalf("a document without the built-in rules refused by shape: %+v", j)
	}
}

// TestWithBuiltins: the rules are added once, first; a document printed
// back (carrying them unchanged) applies again to the same form; a
// redefinition or weakening of a built-in id, and a version 1 document,
// are refused with an error naming the field and what to do.
func TestWithBuiltins(t *testing.T) {
	base := policy.Recommended()
	once, err := policy.WithBuiltins(base)
	if err != nil {
		t.Fatal(err)
	}
	if !policy.HasBuiltins(once) {
		t.Fatal("WithBuiltins result lacks the built-in rules")
	}
	b := policy.BuiltinShapeRules()
	for i := range b {
		if once.ShapeRules[i].ID != b[i].ID {
			t.Fatalf("shape_rules[%d] = %s, want the built-in %s first", i, once.ShapeRules[i].ID, b[i].ID)
		}
	}
	if got, want := len(once.ShapeRules), len(base.ShapeRules)+len(b); got != want {
		t.Fatalf("%d shape rules, want %d", got, want)
	}
	twice, err := policy.WithBuiltins(once)
	if err != nil {
		t.Fatal(err)
	}
	if string(twice.Canonical()) != string(once.Canonical()) {
		t.Fatal("applying a document that already carries the built-in rules changed it")
	}

	redefine := func(mut func(*policy.ShapeRule)) *policy.Policy {
		q, err := policy.Parse(once.Canonical())
		if err != nil {
			t.Fatal(err)
		}
		mut(&q.ShapeRules[0])
		return q
	}
	for _, tc := range []struct {
		name string
		mut  func(*policy.ShapeRule)
	}{
		{"escalate instead of deny", func(r *policy.ShapeRule) { r.Action = "escalate" }},
		{"narrower expression", func(r *policy.ShapeRule) { r.Match = `^issuer approve$` }},
		{"fewer surfaces", func(r *policy.ShapeRule) { r.Surfaces = []string{"shell"} }},
		{"sinks only", func(r *policy.ShapeRule) { r.In = []string{"sinks"} }},
		{"examples dropped", func(r *policy.ShapeRule) { r.Examples = policy.Examples{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.WithBuiltins(redefine(tc.mut))
			if !errors.Is(err, policy.ErrBuiltin) || !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("want ErrBuiltin, got %v", err)
			}
			if !strings.Contains(err.Error(), "shape_rules[0].id") || !strings.Contains(err.Error(), "writ-operator-command") {
				t.Fatalf("error does not name the field and rule: %v", err)
			}
		})
	}
	_, err = policy.WithBuiltins(policy.Default())
	if policy.Default().Version == policy.LegacyVersion {
		if !errors.Is(err, policy.ErrBuiltin) || !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("a version 1 document: want an error pointing at version 2, got %v", err)
		}
	} else if err != nil {
		t.Fatalf("the built-in default: %v", err)
	}
}

// TestArgsRulesFailClosed: a rule that reads every argument cannot be
// sidestepped by leaving the arguments out (a digest-only request) or by
// padding one past the length writ screens: both are refused, on a
// surface that declares no sinks of its own.
func TestArgsRulesFailClosed(t *testing.T) {
	p, err := policy.WithBuiltins(policy.Recommended())
	if err != nil {
		t.Fatal(err)
	}
	bare := &policy.Request{Worker: "w1", Lane: "coordinator", Tool: "mcp__nats__publish"}
	if j := p.Judge(bare, usage{}, now); j.Decision != grants.Deny || j.Reason != grants.ReasonInvalidRequest || j.Missing != "args" {
		t.Fatalf("arguments not forwarded: %+v", j)
	}
	padded := `{"subject":"writ.op.approve` + strings.Repeat(" ", args.MaxString) + `"}`
	if j := p.Judge(req(t, "w1", "coordinator", "mcp__nats__publish", padded), usage{}, now); j.Decision != grants.Deny || j.Rules[len(j.Rules)-1] != "shape:unscreened" {
		t.Fatalf("an argument too long to screen: %+v", j)
	}
	// Without the built-in rules the same surface reads no argument.
	if j := policy.Recommended().Judge(bare, usage{}, now); j.Reason == grants.ReasonInvalidRequest {
		t.Fatalf("a surface without an args rule needs no arguments: %+v", j)
	}
}
