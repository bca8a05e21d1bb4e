package purity

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The layer table: which packages each writ package may not import,
// directly or through any other package (non-test files; tests may
// import what they need). A writ package is named relative to the module
// ("api/client"), anything else by its full import path; a name matches
// the package itself and every package below it. A rule whose package
// ends in "/..." covers every package below that directory.
//
// A rule with Pending set is a violation the code still has and that is
// being removed: while it holds, the test reports it with t.Log and
// passes; once the import is gone the rule is enforced like any other,
// and Pending should be cleared. A Pending rule that no longer fails is
// reported too, so that it is cleared.
type layerRule struct {
	// Pkg is the package (or pkg/... pattern) the rule constrains.
	Pkg string
	// Forbid lists what may not be in Pkg's import closure.
	Forbid []string
	// OnlyWrit, when set, lists the only writ packages the closure may
	// hold besides Pkg itself.
	OnlyWrit []string
	// Optional: no package need match Pkg (a package planned, not yet
	// written).
	Optional bool
	// Pending says why a known violation is tolerated for now.
	Pending string
	// Why the rule exists, for the failure message.
	Why string
}

// transport is what the deterministic core and the wire format must never
// pull in: raft, NATS and the network.
var transport = []string{"github.com/hashicorp/raft", "github.com/nats-io", "net"}

var layers = []layerRule{
	{Pkg: "events", OnlyWrit: []string{"internal/jsonwire"},
		Why: "events is the receipt format everything else builds on"},
	{Pkg: "api", Forbid: append([]string{"api/client", "github.com/google/uuid", "crypto/rand"}, transport...),
		Why: "api is the wire format alone, for the state machine to import"},
	{Pkg: "fsm", Forbid: append([]string{"raftnode", "natsbus", "issuer", "api/client"}, transport...),
		Why: "the state machine is pure and knows nothing of how commands reach it"},
	{Pkg: "cmd/worker-agent", Forbid: []string{"fsm", "raftnode", "issuer"},
		Why: "the worker holds no authority: it asks the issuer"},
	{Pkg: "worker/...", Forbid: []string{"fsm", "raftnode", "issuer"},
		Why: "the worker holds no authority: it asks the issuer"},
	{Pkg: "cmd/worker-agent", Forbid: []string{"policy"},
		Why: "the worker does not judge calls: the issuer's policy does"},
	{Pkg: "worker/...", Forbid: []string{"policy"},
		Why: "the worker does not judge calls: the issuer's policy does"},
	{Pkg: "args", OnlyWrit: []string{"events", "internal/jsonwire"},
		Why: "canonical arguments are shared by the worker, the issuer and the state machine"},
	{Pkg: "audit", Forbid: []string{"issuer", "raftnode"},
		Why: "the auditor checks receipts independently of the issuer that wrote them"},
	{Pkg: "natsauth", Forbid: []string{"fsm", "issuer", "raftnode", "policy"},
		Why: "NATS credentials are transport: minting and revoking them decides nothing about authority"},
}

// pkgGraph is the import graph: every package's direct imports.
type pkgGraph map[string][]string

// layerViolation is one forbidden import found in a package's closure.
type layerViolation struct {
	rule    layerRule
	pkg     string
	chain   []string // pkg ... the forbidden package
	pending bool
}

func (v layerViolation) String() string {
	return fmt.Sprintf("%s imports %s (via %s): %s", v.chain[0], v.chain[len(v.chain)-1], strings.Join(v.chain, " -> "), v.rule.Why)
}

// matches reports whether path is name or lies below it.
func matches(path, name string) bool {
	return path == name || strings.HasPrefix(path, name+"/")
}

// full turns a table name into an import path: module-relative names of
// writ packages get the module prefix; standard-library and other
// modules' paths are left as they are.
func full(name string) string {
	if strings.Contains(strings.SplitN(name, "/", 2)[0], ".") || isStd(name) {
		return name
	}
	return module + "/" + name
}

// isStd reports whether name is one of the standard-library roots the
// table names.
func isStd(name string) bool {
	return slices.Contains([]string{"net", "crypto/rand", "os/exec"}, name)
}

// ruleTargets lists the packages of graph a rule constrains.
func ruleTargets(g pkgGraph, r layerRule) []string {
	var out []string
	if dir, ok := strings.CutSuffix(r.Pkg, "/..."); ok {
		for p := range g {
			if matches(p, full(dir)) {
				out = append(out, p)
			}
		}
	} else if _, ok := g[full(r.Pkg)]; ok {
		out = append(out, full(r.Pkg))
	}
	sort.Strings(out)
	return out
}

// forbiddenBy reports whether the rule forbids path in the closure of pkg.
func forbiddenBy(r layerRule, pkg, path string) bool {
	if path == pkg {
		return false
	}
	for _, f := range r.Forbid {
		if matches(path, full(f)) {
			return true
		}
	}
	if r.OnlyWrit != nil && matches(path, module) {
		for _, ok := range r.OnlyWrit {
			if path == full(ok) {
				return false
			}
		}
		return true
	}
	return false
}

// checkLayers applies the rules to the graph. It returns the violations
// (pending ones marked) and the rules that matched no package although
// they are not optional.
func checkLayers(g pkgGraph, rules []layerRule) (found []layerViolation, unmatched []string) {
	for _, r := range rules {
		targets := ruleTargets(g, r)
		if len(targets) == 0 && !r.Optional {
			unmatched = append(unmatched, r.Pkg)
		}
		for _, pkg := range targets {
			// Breadth-first over the closure, keeping the first way each
			// package was reached, so the message shows a shortest chain.
			from := map[string]string{pkg: ""}
			queue := []string{pkg}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if forbiddenBy(r, pkg, p) {
					var chain []string
					for q := p; q != ""; q = from[q] {
						chain = append(chain, q)
					}
					slices.Reverse(chain)
					found = append(found, layerViolation{rule: r, pkg: pkg, chain: chain, pending: r.Pending != ""})
					continue // one report per forbidden package, not per package below it
				}
				imps := slices.Clone(g[p])
				sort.Strings(imps)
				for _, imp := range imps {
					if _, seen := from[imp]; !seen {
						from[imp] = p
						queue = append(queue, imp)
					}
				}
			}
		}
	}
	return found, unmatched
}

// moduleGraph returns the import graph of every package of the module
// and all it imports (non-test files), as `go list -deps` gives it.
func moduleGraph(t *testing.T) pkgGraph {
	t.Helper()
	g := pkgGraph{}
	for _, p := range goListDeps(t, "./...") {
		g[p.ImportPath] = p.Imports
	}
	if _, ok := g[module+"/fsm"]; !ok {
		t.Fatalf("go list did not list %s/fsm", module)
	}
	return g
}

// TestLayers checks the layer table against the module's import graph.
func TestLayers(t *testing.T) {
	g := moduleGraph(t)
	found, unmatched := checkLayers(g, layers)
	for _, pkg := range unmatched {
		t.Errorf("layer rule for %s matches no package: fix the table", pkg)
	}
	pendingHeld := map[int]bool{}
	for _, v := range found {
		if v.pending {
			t.Logf("pending (%s): %v", v.rule.Pending, v)
			pendingHeld[slices.IndexFunc(layers, func(r layerRule) bool { return r.Pkg == v.rule.Pkg && r.Pending == v.rule.Pending })] = true
			continue
		}
		t.Error(v)
	}
	for i, r := range layers {
		if r.Pending != "" && !pendingHeld[i] && len(ruleTargets(g, r)) > 0 {
			t.Logf("pending rule for %s (%s) no longer fails: clear its Pending", r.Pkg, r.Pending)
		}
	}
}

// TestLayerCheckerReportsForbiddenImports feeds the checker a made-up
// graph with forbidden imports, direct and transitive, and a pending one,
// and checks what it reports.
func TestLayerCheckerReportsForbiddenImports(t *testing.T) {
	w := func(name string) string { return module + "/" + name }
	g := pkgGraph{
		w("api"):                     {"encoding/json", w("internal/jsonwire"), w("api/client")},
		w("api/client"):              {w("api"), "github.com/nats-io/nats.go"},
		w("internal/jsonwire"):       {"strconv"},
		w("events"):                  {w("internal/jsonwire"), w("grants")},
		w("grants"):                  {w("events")},
		w("fsm"):                     {w("events"), w("helper")},
		w("helper"):                  {"net/http"},
		w("cmd/worker-agent"):        {w("api/client"), w("policy")},
		w("policy"):                  {w("events")},
		w("worker/tools"):            {w("issuer")},
		w("issuer"):                  {w("fsm")},
		"github.com/nats-io/nats.go": {"net"},
		"net/http":                   {"net"},
	}
	rules := []layerRule{
		{Pkg: "api", Forbid: []string{"api/client", "github.com/nats-io", "net"}, Why: "wire only"},
		{Pkg: "events", OnlyWrit: []string{"internal/jsonwire"}, Why: "leaf"},
		{Pkg: "fsm", Forbid: []string{"net"}, Why: "pure"},
		{Pkg: "cmd/worker-agent", Forbid: []string{"policy"}, Pending: "being removed", Why: "no policy"},
		{Pkg: "worker/...", Forbid: []string{"fsm"}, Why: "no authority"},
		{Pkg: "audit", Forbid: []string{"issuer"}, Why: "independent"},
	}
	found, unmatched := checkLayers(g, rules)
	var got []string
	for _, v := range found {
		s := strings.Join(v.chain, " -> ")
		if v.pending {
			s = "pending: " + s
		}
		got = append(got, strings.ReplaceAll(s, module+"/", ""))
	}
	sort.Strings(got)
	want := []string{
		"api -> api/client",
		"events -> grants",
		"fsm -> helper -> net/http",
		"pending: cmd/worker-agent -> policy",
		"worker/tools -> issuer -> fsm",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got  %q\n want %q", got, want)
	}
	if !slices.Equal(unmatched, []string{"audit"}) {
		t.Errorf("unmatched rules %q, want [audit]", unmatched)
	}
	// The real table holds the real graph to the same checks: a package
	// the table forbids, added to the closure, is reported.
	g = pkgGraph{w("api"): {w("api/client")}, w("api/client"): {"github.com/nats-io/nats.go"}, "github.com/nats-io/nats.go": nil}
	found, _ = checkLayers(g, layers)
	if len(found) == 0 || found[0].chain[len(found[0].chain)-1] != w("api/client") || found[0].pending {
		t.Errorf("the layer table does not report api importing api/client: %v", found)
	}
}
