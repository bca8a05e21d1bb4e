package policy

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrBuiltin marks a document that cannot carry writ's built-in rules: a
// version 1 document (it has no shape rules), or one that redefines a
// built-in rule's id.
var ErrBuiltin = errors.New("built-in rules")

// builtinShapeRules are the rules every policy writ writes to its log
// carries (WithBuiltins). They keep an agent from acting as writ's
// operator: approving its own held call, reinstating, respawning or
// lifting itself, relaying a person's reply, minting credentials,
// changing the policy or restoring state, whether through the issuer
// command line or by publishing to the operator or reviewer subjects
// directly. They read every string
// argument of every call (in: args), on every surface, in screen form, so
// a command in an MCP tool's argument, a shell one-liner or a subshell is
// caught alike. A person runs these commands; no agent does.
var builtinShapeRules = []ShapeRule{
	{
		ID:          "writ-operator-command",
		Description: "running writ's own operator commands (approve, revoke, reinstate, policy apply, snapshot restore): only a person decides these",
		In:          []string{"args"},
		// issuer (any directory, .exe, after env/sh -c/$(...)/a backtick, in
		// a list such as Python's subprocess argv), any global flags with
		// their values, then a state-changing subcommand; or "approve"
		// followed by a review id, whatever runs it (a variable, an alias,
		// a copy of the binary under another name).
		Match:  `(?i)((^|[^\w.-])issuer(\.exe)?[)\x60]?([\s,]+-[^\s,;&|]*([\s,]+[^-\s,;&|][^\s,;&|]*)?)*[\s,]+(approve|revoke|reinstate|policy([\s,]+-[^\s,;&|]*([\s,]+[^-\s,;&|][^\s,;&|]*)?)*[\s,]+apply|snapshot([\s,]+-[^\s,;&|]*([\s,]+[^-\s,;&|][^\s,;&|]*)?)*[\s,]+restore)\b|\bapprove[\s,]+(-[^\s,;&|]*[\s,]+)*rv-[0-9a-f])`,
		Action: "deny",
		Examples: Examples{
			Hit: []string{
				"issuer approve rv-0123456789abcdef0123",
				"./bin/issuer approve rv-0123456789abcdef0123",
				"/usr/local/bin/issuer approve rv-0123456789abcdef0123 --note ok",
				"env WRIT_NATS_URL=nats://127.0.0.1:4222 issuer approve rv-1",
				"cd /tmp && issuer approve rv-1",
				`sh -c "issuer approve rv-1"`,
				`"issuer" 'approve' rv-1`,
				`i\ssuer approve rv-1`,
				"issuer$IFS" + "approve rv-1",
				"issuer --nats-url nats://127.0.0.1:4222 approve rv-1",
				"issuer --json approve rv-1",
				"ISSUER APPROVE rv-1",
				"issuer revoke --worker w1",
				"issuer reinstate w1",
				"issuer policy apply /tmp/open.yaml",
				"issuer policy --timeout 5s apply open.yaml",
				"issuer snapshot restore --in s.snap --data-dir d --node-id n1 --peers n1=127.0.0.1:7000",
				"go run ./cmd/issuer approve rv-1",
				"echo y | issuer.exe approve rv-1",
				"`which issuer` approve rv-1",
				`python3 -c "import subprocess; subprocess.run(['issuer', 'approve', 'rv-1'])"`,
				"$ISSUER approve rv-0123456789abcdef0123",
				"/tmp/x --json approve rv-0123456789abcdef0123",
			},
			Miss: []string{
				"grep issuer README.md",
				"go test ./issuer/...",
				"issuer status",
				"issuer status --json",
				"issuer policy show",
				"issuer policy validate policy.yaml",
				"issuer policy diff policy.yaml",
				"issuer snapshot inspect s.snap",
				"cat issuer/approve.go",
				"go build -o bin/issuer ./cmd/issuer",
				"ls cmd/issuer",
				"git log -- issuer/approve.go",
				"writ-issuer-approve.md",
				"reissuer approve",
				"approve the rv-1 plan",
			},
		},
	},
	{
		ID:          "writ-operator-decisions",
		Description: "deciding or relaying reviews, respawning or lifting workers, and minting or revoking NATS credentials with writ's command line: only a person does these",
		In:          []string{"args"},
		// issuer (as writ-operator-command finds it) with any global flags,
		// then review approve/reject/reply, respawn, lift or auth
		// init/mint/revoke; or review approve/reject of a review id or
		// caption, whatever runs it.
		Match: `(?i)((^|[^\w.-])issuer(\.exe)?[)\x60]?` + operatorFlags + `[\s,]+(review` + operatorFlags + `[\s,]+(approve|reject|reply)|respawn|lift|auth` + operatorFlags +
			`[\s,]+(init|mint|revoke))\b|\breview\s+(approve|reject)\s+(-[^\s,;&|]*\s+)*(rv-[0-9a-f]|[a-z0-9]+(_[a-z0-9]+)*_v[0-9]+_review\b))`,
		Action: "deny",
		Examples: Examples{
			Hit: []string{
				"issuer review approve bash_v1_review",
				"issuer review reject rv-0123456789abcdef0123",
				"issuer --json review approve k-7f3a",
				"issuer review reply --channel slack --sender ops --at 2026-12-07T10:00:00Z --text yes",
				"issuer respawn w1 --lane isolated",
				"issuer lift w1",
				"issuer auth mint --dir keys --worker w1 --ttl 1h --out w1.creds",
				"issuer auth revoke --dir keys --worker w2",
				"/usr/local/bin/issuer auth init --dir keys",
				`python3 -c "import subprocess; subprocess.run(['issuer', 'lift', 'w1'])"`,
				"$ISSUER review approve bash_v2_review",
				"./x review reject rv-1",
			},
			Miss: []string{
				"issuer review list",
				"issuer review show rv-1",
				"issuer reviews --json",
				"issuer fleet --json",
				"issuer route list",
				"issuer auth --help",
				"Please review, approve and merge the PR",
				"review approve flow in docs/reviews.md",
				"go test ./issuer/... -run TestRespawn",
				"cat cmd/issuer/lift.go",
			},
		},
	},
	{
		ID:          "writ-operator-subject",
		Description: "publishing to writ's operator subjects (writ.op.*) directly: only a person acts as writ's operator",
		In:          []string{"args"},
		Match:       `(?i)\bwrit\.op\.`,
		Action:      "deny",
		Examples: Examples{
			Hit: []string{
				`nats req writ.op.approve '{"review_id":"rv-1"}'`,
				"nats pub writ.op.reinstate w1",
				"nats --server nats://127.0.0.1:4222 request writ.op.policy @open.json",
				`"writ.op.approve"`,
				"writ.op.revoke",
				"WRIT.OP.APPROVE",
			},
			Miss: []string{
				"nats req writ.api.w1.grant {}",
				"grep -rn OperatorPrefix api/",
				"cat api/api.go",
				"writ.opinion.md",
			},
		},
	},
	{
		ID:          "writ-reviewer-subject",
		Description: "publishing to writ's reviewer subjects (writ.review.*) directly: decisions and relayed replies come from a person's reviewer identity, never an agent",
		In:          []string{"args"},
		Match:       `(?i)\bwrit\.review\.`,
		Action:      "deny",
		Examples: Examples{
			Hit: []string{
				`nats req writ.review.dana.reply '{"text":"approve bash_v1_review"}'`,
				"nats pub writ.review.ops.decide {}",
				`"writ.review.gateway.reply"`,
				"WRIT.REVIEW.DANA.DECIDE",
			},
			Miss: []string{
				"issuer review list",
				"cat docs/reviews.md",
				"writ.reviewers.md",
				"nats sub writ.evt.review_opened",
			},
		},
	},
}

// operatorFlags is the global flags of the issuer command line, with
// their values, as the built-in rules skip them.
const operatorFlags = `([\s,]+-[^\s,;&|]*([\s,]+[^-\s,;&|][^\s,;&|]*)?)*`

// BuiltinShapeRules returns a copy of the rules WithBuiltins adds to every
// version 2 document.
func BuiltinShapeRules() []ShapeRule {
	out := make([]ShapeRule, len(builtinShapeRules))
	for i, r := range builtinShapeRules {
		out[i] = r
		out[i].In = append([]string(nil), r.In...)
		out[i].Examples.Hit = append([]string(nil), r.Examples.Hit...)
		out[i].Examples.Miss = append([]string(nil), r.Examples.Miss...)
	}
	return out
}

// IsBuiltinRule reports whether id names a built-in shape rule.
func IsBuiltinRule(id string) bool {
	for _, r := range builtinShapeRules {
		if r.ID == id {
			return true
		}
	}
	return false
}

// WithBuiltins returns the document that is written to the log for p: p
// with writ's built-in shape rules first among its shape rules. It is
// applied where an operator's document enters writ (the initial policy,
// `issuer policy apply`, validate), never when a log entry is replayed:
// the entry carries the rules explicitly, so every replica and every
// replay judges by the document the log holds. A document that already
// carries a built-in rule unchanged (one printed by `issuer policy show`)
// keeps it once; one that redefines a built-in id — another expression,
// action, scope or examples — is refused, as is a version 1 document,
// which has no shape rules: write a version 2 document instead.
func WithBuiltins(p *Policy) (*Policy, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: %w: no document", ErrInvalid, ErrBuiltin)
	}
	if p.Version != SchemaVersion {
		return nil, fmt.Errorf("%w: %w: version: a version %d document cannot carry writ's built-in rules, which keep an agent from running writ's operator commands; write a version %d document (start from `issuer policy show --recommended`)",
			ErrInvalid, ErrBuiltin, p.Version, SchemaVersion)
	}
	builtins := BuiltinShapeRules()
	rules := make([]ShapeRule, 0, len(builtins)+len(p.ShapeRules))
	rules = append(rules, builtins...)
	for i, r := range p.ShapeRules {
		if !IsBuiltinRule(r.ID) {
			rules = append(rules, r)
			continue
		}
		for _, b := range builtins {
			if b.ID == r.ID && !sameShapeRule(b, r) {
				return nil, fmt.Errorf("%w: %w: shape_rules[%d].id: %q is a built-in rule and cannot be redefined or weakened; leave it out (writ adds it to every document) or copy it unchanged from `issuer policy show`",
					ErrInvalid, ErrBuiltin, i, r.ID)
			}
		}
	}
	q := *p
	q.ShapeRules = rules
	q.c = nil
	out, err := Parse(q.Canonical())
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HasBuiltins reports whether p carries every built-in shape rule
// unchanged.
func HasBuiltins(p *Policy) bool {
	if p == nil || p.Version != SchemaVersion {
		return false
	}
	for _, b := range builtinShapeRules {
		found := false
		for _, r := range p.ShapeRules {
			if r.ID == b.ID && sameShapeRule(b, r) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// sameShapeRule compares two rules field by field, treating an absent
// list and an empty one alike (the canonical form drops both).
func sameShapeRule(a, b ShapeRule) bool {
	norm := func(r ShapeRule) ShapeRule {
		if len(r.Surfaces) == 0 {
			r.Surfaces = nil
		}
		if len(r.In) == 0 {
			r.In = nil
		}
		if len(r.Examples.Hit) == 0 {
			r.Examples.Hit = nil
		}
		if len(r.Examples.Miss) == 0 {
			r.Examples.Miss = nil
		}
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
