package grants

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/events"
)

// constsOfType parses codes.go and returns name -> value of every string
// constant declared with the named type, so a constant added to the source
// is seen by the test without anyone listing it here.
func constsOfType(t *testing.T, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok || id.Name != typ {
				continue
			}
			if len(vs.Names) != len(vs.Values) {
				t.Fatalf("%s: every %s constant needs an explicit value", vs.Names[0].Name, typ)
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: value is not a string literal", n.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[n.Name] = v
			}
		}
	}
	return out
}

// TestReasonsTableComplete: every Reason constant in codes.go (other than
// ReasonNone) has exactly one row in Reasons with a meaning and a declared
// Recovery; no row names an undeclared reason; codes are unique and
// snake_case; RecoveryFor and Refuse read the table.
func TestReasonsTableComplete(t *testing.T) {
	reasons := constsOfType(t, "Reason")
	recoveries := constsOfType(t, "Recovery")
	if len(reasons) < 20 || len(recoveries) < 8 {
		t.Fatalf("parsed %d reasons and %d recoveries; the parser is not finding the constants", len(reasons), len(recoveries))
	}
	code := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	validRecovery := map[Recovery]bool{}
	for name, v := range recoveries {
		if !code.MatchString(v) {
			t.Errorf("%s = %q is not snake_case", name, v)
		}
		validRecovery[Recovery(v)] = true
	}
	if len(validRecovery) != len(recoveries) {
		t.Errorf("two Recovery constants share a value")
	}

	rows := map[Reason]int{}
	for _, ri := range Reasons {
		rows[ri.Reason]++
	}
	byValue := map[string]string{}
	for name, v := range reasons {
		if other, dup := byValue[v]; dup {
			t.Errorf("%s and %s share the code %q", name, other, v)
		}
		byValue[v] = name
		if name == "ReasonNone" {
			if v != "" || rows[""] != 0 {
				t.Errorf("ReasonNone must be \"\" and have no row")
			}
			continue
		}
		if !code.MatchString(v) {
			t.Errorf("%s = %q is not snake_case", name, v)
		}
		if rows[Reason(v)] != 1 {
			t.Errorf("%s (%q) has %d rows in Reasons, want 1", name, v, rows[Reason(v)])
		}
	}
	for _, ri := range Reasons {
		if _, ok := byValue[string(ri.Reason)]; !ok {
			t.Errorf("Reasons row %q is not a declared constant", ri.Reason)
		}
		if ri.Meaning == "" {
			t.Errorf("%q has no meaning", ri.Reason)
		}
		if !validRecovery[ri.Recovery] {
			t.Errorf("%q has recovery %q, which is not a declared Recovery", ri.Reason, ri.Recovery)
		}
		if RecoveryFor(ri.Reason) != ri.Recovery {
			t.Errorf("RecoveryFor(%q) = %q, want %q", ri.Reason, RecoveryFor(ri.Reason), ri.Recovery)
		}
		env := Refuse(ri.Reason, "m", "d")
		if env.Decision != Deny || env.Reason != ri.Reason || env.Recovery != ri.Recovery || env.Missing != "m" || env.Detail != "d" {
			t.Errorf("Refuse(%q) = %+v", ri.Reason, env)
		}
	}
	if RecoveryFor(ReasonNone) != RecoverNone || RecoveryFor("no_such_reason") != RecoverNone {
		t.Errorf("RecoveryFor of an unknown reason is not RecoverNone")
	}
}

// TestFromEvent: the envelope a caller receives carries the receipt's
// decision, ids, grounds and timing unchanged.
func TestFromEvent(t *testing.T) {
	e := events.Event{
		Seq: 12, Kind: events.KindSpendRefused, GrantID: "g1", Decision: string(Deny),
		Reason: string(ReasonExpired), Missing: "clock<expires_at", Recovery: string(RecoverRequestNewGrant),
		Epoch: 3, IssuedAt: 100, ExpiresAt: 200, Digest: digestA, Outcome: "confirmed", Detail: "late",
		Counters: []events.Counter{{Key: "worker/w1", Value: 1}}, Rules: []string{"lanes.x.tools"},
	}
	got := FromEvent(e)
	want := Envelope{
		Decision: Deny, GrantID: "g1", Reason: ReasonExpired, Missing: "clock<expires_at",
		Recovery: RecoverRequestNewGrant, Epoch: 3, IssuedAt: 100, ExpiresAt: 200, Seq: 12,
		Kind: events.KindSpendRefused, Digest: digestA, Counters: e.Counters, Rules: e.Rules, Outcome: "confirmed", Detail: "late",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FromEvent = %+v\nwant %+v", got, want)
	}
}
