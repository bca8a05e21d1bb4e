package policy

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/lanes"
)

// Consequence classes, in a fixed order (their index is used internally).
var Consequences = []string{
	"local_read", "local_mutation", "outbound_send", "remote_query",
	"credential_use", "arbitrary_execution", "device_actuation",
}

const nClasses = 7

func classIndex(c string) int {
	for i, n := range Consequences {
		if n == c {
			return i
		}
	}
	return -1
}

// Limits on a version 2 document, beyond MaxDocumentBytes.
const (
	maxEntries      = 1024 // entries of any one list
	maxPattern      = 1024 // bytes of one pattern, field name or path
	maxRegexp       = 4096 // bytes of one shape rule expression
	maxLedgerWindow = 24 * time.Hour
	defaultLedger   = 10 * time.Minute
)

// Effect-ledger scopes and quota scopes.
const (
	ScopeWorker = "worker"
	ScopeLane   = "lane"
	ScopeFleet  = "fleet"
)

// compiled is a version 2 document prepared for Judge: patterns compiled,
// names resolved to indexes, lookups built. It is immutable once built.
type compiled struct {
	surfaces     []cSurface
	toolExact    map[string]int      // literal tool name -> first surface listing it
	toolGlobs    []toolGlob          // non-literal tool patterns, and those of surfaces with verbs, by surface index
	verbs        map[string]struct{} // every verb any surface lists (verbs.go)
	lanes        map[string]*cLane
	allow        []cRule
	deny         []cRule
	preauths     []cPreauth
	preauthByID  map[string]int
	protected    []lanes.Glob
	egress       []lanes.Glob
	trust        []lanes.Glob
	crossing     [nClasses]bool
	reviewClass  [nClasses]bool
	reviewTarget []lanes.Glob
	shape        []cShape
	quotas       []cQuota
	ledgerWindow int64
	ledgerScope  string
	workspace    string
	prov         cProvenance
	routes       []cRoute
	results      cResults
	ext          cExt // fields added with list targets and per-surface domains (surfaces_ext.go)
}

type toolGlob struct {
	surface int
	g       lanes.Glob
}

type cSurface struct {
	id, operation, consequence string
	class                      int
	hasTarget                  bool
	targetPtr, canon           string
	sinks                      []string // JSON pointers
	amountPtr, bytesPtr        string
	shape                      []int           // indexes of the shape rules that apply
	args                       bool            // a shape rule that applies reads every argument
	verbs                      map[string]bool // nil: the surface takes its tools whatever their verb
	x                          surfaceExt
}

type cLane struct {
	name      string
	ttl       int64
	surfaces  []bool // by surface index
	classes   [nClasses]bool
	workspace string // template; "{worker}" is the worker id
}

type cMatch struct {
	lanes, workers []string
	tools          []lanes.Glob
	targets        []lanes.Glob
}

type cRule struct {
	id        string
	m         cMatch
	maxAmount *uint64
}

type cPreauth struct {
	id                  string
	m                   cMatch
	expires             int64
	perCall, cumulative *uint64
	uses                *uint64
}

type cShape struct {
	id            string
	re            *regexp.Regexp
	pre           prefilter
	deny          bool
	sinks, target bool
	args          bool // every string argument of the call, in screen form
}

type cQuota struct {
	id                      string
	lanes, workers          []string
	perLane                 bool
	window                  int64
	requests, amount, bytes *uint64
}

// invalid builds a validation error naming field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// compile validates a version 2 document and prepares it. Every error
// wraps ErrInvalid and names the field.
func compile(p *Policy) (*compiled, error) {
	if p.Version != SchemaVersion {
		return nil, fmt.Errorf("%w: %w: version: got %d, want %d", ErrInvalid, ErrVersion, p.Version, SchemaVersion)
	}
	c := &compiled{toolExact: map[string]int{}, lanes: map[string]*cLane{}, preauthByID: map[string]int{}}
	steps := []func(*Policy) error{
		c.compileTop, c.compileSurfaces, c.compileLanes, c.compileWorkers, c.compileRules,
		c.compilePreauths, c.compileBoundaries, c.compileReview, c.compileShapes, c.compileQuotas,
		c.compileProvenance, c.compileRoutes, c.compileResults, c.compileExt,
	}
	// Every step runs, so that one refusal lists every problem; a step
	// keeps a placeholder for an entry it refused (a surface, a lane), so
	// that later references to it are not reported as problems too.
	var ps problems
	for _, step := range steps {
		ps.add(step(p))
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *compiled) compileTop(p *Policy) error {
	if err := checkTTL("default_ttl", p.DefaultTTL, false); err != nil {
		return err
	}
	switch p.Unpinned {
	case "", "allow", "deny":
	default:
		return invalid("unpinned", "want allow or deny, got %q", p.Unpinned)
	}
	if p.Workspace != "" {
		if err := checkWorkspace(p.Workspace); err != nil {
			return invalid("workspace", "%v", err)
		}
	}
	c.workspace = p.Workspace
	w := p.Ledger.Window
	if w == 0 {
		w = Duration(defaultLedger)
	}
	if time.Duration(w) < time.Second || time.Duration(w) > maxLedgerWindow {
		return invalid("ledger.window", "%s is outside [1s, %s]", time.Duration(w), maxLedgerWindow)
	}
	c.ledgerWindow = int64(w)
	switch p.Ledger.Scope {
	case "", ScopeWorker:
		c.ledgerScope = ScopeWorker
	case ScopeLane, ScopeFleet:
		c.ledgerScope = p.Ledger.Scope
	default:
		return invalid("ledger.scope", "want worker, lane or fleet, got %q", p.Ledger.Scope)
	}
	return nil
}

// checkWorkspace checks a workspace template: an absolute clean path in
// which "{worker}" is the only placeholder.
func checkWorkspace(ws string) error {
	s := strings.ReplaceAll(ws, "{worker}", "w")
	if strings.ContainsAny(s, "{}") {
		return fmt.Errorf("only {worker} may be substituted")
	}
	if len(ws) > maxPattern || !strings.HasPrefix(s, "/") || path.Clean(s) != s || hasControl(s) {
		return fmt.Errorf("%q is not an absolute clean path", ws)
	}
	return nil
}

// checkField checks an argument field name: a top-level key, or a JSON
// pointer starting with '/'.
func checkField(field, f string) error {
	if f == "" || len(f) > maxPattern || hasControl(f) {
		return invalid(field, "want a field name or a JSON pointer of 1-%d bytes", maxPattern)
	}
	if strings.HasPrefix(f, "/") {
		for i := 0; i < len(f); i++ {
			if f[i] == '~' && (i+1 >= len(f) || f[i+1] != '0' && f[i+1] != '1') {
				return invalid(field, "bad JSON pointer escape in %q", f)
			}
		}
	}
	return nil
}

func globs(field string, pats []string, check func(string) error) ([]lanes.Glob, error) {
	if len(pats) > maxEntries {
		return nil, invalid(field, "more than %d entries", maxEntries)
	}
	out := make([]lanes.Glob, 0, len(pats))
	for i, s := range pats {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s == "" || len(s) > maxPattern {
			return nil, invalid(f, "pattern must be 1-%d bytes", maxPattern)
		}
		if check != nil {
			if err := check(s); err != nil {
				return nil, invalid(f, "%v", err)
			}
		}
		g, err := lanes.CompileGlob(s)
		if err != nil {
			return nil, invalid(f, "%v", err)
		}
		out = append(out, g)
	}
	return out, nil
}

// targetPattern checks a pattern over canonical targets: "*" or one that
// starts with a method prefix, so that a pattern cannot silently never
// match.
func targetPattern(s string) error {
	if s == "*" {
		return nil
	}
	for _, m := range canonMethods {
		if strings.HasPrefix(s, m+":") {
			return nil
		}
	}
	return fmt.Errorf("%q must start with path:, url:, email:, shell:, raw: or digest: (or be *)", s)
}

func lowerPattern(s string) error {
	if strings.ToLower(s) != s {
		return fmt.Errorf("%q must be lower-case (hosts and domains are compared lower-cased)", s)
	}
	return nil
}

func (c *compiled) compileSurfaces(p *Policy) error {
	if len(p.Surfaces) == 0 {
		return invalid("surfaces", "at least one tool surface is required")
	}
	if len(p.Surfaces) > maxEntries {
		return invalid("surfaces", "more than %d entries", maxEntries)
	}
	seen := map[string]bool{}
	var ps problems
	for i, s := range p.Surfaces {
		// Every field is checked, each problem reported; a surface with a
		// problem stays as a placeholder, which keeps the surfaces'
		// indices and lets lanes and rules name it without a second one.
		f := fmt.Sprintf("surfaces[%d]", i)
		bad := len(ps.list) + ps.more
		if err := safeID(s.ID); err != nil {
			ps.add(invalid(f+".id", "%v", err))
		} else if seen[s.ID] {
			ps.add(invalid(f+".id", "duplicate surface id %q", s.ID))
		}
		seen[s.ID] = true
		if len(s.Tools) == 0 {
			ps.add(invalid(f+".tools", "at least one tool name or pattern is required"))
		}
		gs, err := globs(f+".tools", s.Tools, nil)
		ps.add(err)
		verbs, err := checkVerbs(f+".verbs", s.Verbs)
		ps.add(err)
		for v := range verbs {
			if c.verbs == nil {
				c.verbs = map[string]struct{}{}
			}
			c.verbs[v] = struct{}{}
		}
		for _, g := range gs {
			// A surface with verbs may pass a tool its pattern matches on
			// to a later surface, so its literal names are looked up in
			// order with the patterns, not in toolExact.
			if g.Literal() && verbs == nil {
				if _, ok := c.toolExact[g.String()]; !ok {
					c.toolExact[g.String()] = i
				}
			} else {
				c.toolGlobs = append(c.toolGlobs, toolGlob{surface: i, g: g})
			}
		}
		if err := safeID(s.Operation); err != nil {
			ps.add(invalid(f+".operation", "%v", err))
		}
		cs := cSurface{id: s.ID, operation: s.Operation, consequence: s.Consequence, class: classIndex(s.Consequence), verbs: verbs}
		if cs.class < 0 {
			ps.add(invalid(f+".consequence", "want one of %s, got %q", strings.Join(Consequences, ", "), s.Consequence))
			cs.class = 0
		}
		if s.Target.Field != "" || s.Target.Canon != "" || s.Target.List || s.Target.Optional || len(s.Target.Also) > 0 {
			ps.add(checkField(f+".target.field", s.Target.Field))
			if !contains(canonMethods, s.Target.Canon) {
				ps.add(invalid(f+".target.canon", "want one of %s, got %q", strings.Join(canonMethods, ", "), s.Target.Canon))
			}
			cs.hasTarget, cs.targetPtr, cs.canon = true, args.FieldPointer(s.Target.Field), s.Target.Canon
		}
		if len(s.Sinks) > maxEntries {
			ps.add(invalid(f+".sinks", "more than %d entries", maxEntries))
		} else {
			for j, sink := range s.Sinks {
				ps.add(checkField(fmt.Sprintf("%s.sinks[%d]", f, j), sink))
				cs.sinks = append(cs.sinks, args.FieldPointer(sink))
			}
		}
		if s.AmountField != "" {
			ps.add(checkField(f+".amount_field", s.AmountField))
			cs.amountPtr = args.FieldPointer(s.AmountField)
		}
		if s.BytesField != "" {
			ps.add(checkField(f+".bytes_field", s.BytesField))
			cs.bytesPtr = args.FieldPointer(s.BytesField)
		}
		if len(ps.list)+ps.more != bad {
			cs = cSurface{id: s.ID, operation: s.Operation, consequence: s.Consequence, class: cs.class, verbs: verbs}
		}
		c.surfaces = append(c.surfaces, cs)
	}
	return ps.err()
}

// surfaceSet resolves surface ids or patterns to a membership list; each
// entry must name at least one surface.
func (c *compiled) surfaceSet(field string, pats []string) ([]bool, error) {
	gs, err := globs(field, pats, nil)
	if err != nil {
		return nil, err
	}
	set := make([]bool, len(c.surfaces))
	for i, g := range gs {
		hit := false
		for j, s := range c.surfaces {
			if g.Match(s.id) {
				set[j], hit = true, true
			}
		}
		if !hit {
			return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "%q names no declared surface", g.String())
		}
	}
	return set, nil
}

func classSet(field string, names []string) ([nClasses]bool, error) {
	var set [nClasses]bool
	for i, n := range names {
		if n == "*" {
			for j := range set {
				set[j] = true
			}
			continue
		}
		k := classIndex(n)
		if k < 0 {
			return set, invalid(fmt.Sprintf("%s[%d]", field, i), "want one of %s or *, got %q", strings.Join(Consequences, ", "), n)
		}
		set[k] = true
	}
	return set, nil
}

func (c *compiled) compileLanes(p *Policy) error {
	if len(p.Lanes) == 0 {
		return invalid("lanes", "at least one lane is required")
	}
	var ps problems
	for _, name := range sortedKeys(p.Lanes) {
		l := p.Lanes[name]
		f := "lanes." + name
		bad := len(ps.list) + ps.more
		if err := safeID(name); err != nil {
			ps.add(invalid(f, "%v", err))
		}
		ps.add(checkTTL(f+".ttl", l.TTL, true))
		if len(l.Tools) > 0 || len(l.Deny) > 0 {
			ps.add(invalid(f, "tools and deny are version 1 lane fields; use surfaces and top-level deny rules"))
		}
		set, err := c.surfaceSet(f+".surfaces", l.Surfaces)
		ps.add(err)
		classes, err := classSet(f+".consequences", l.Consequences)
		ps.add(err)
		if l.Workspace != "" {
			if err := checkWorkspace(l.Workspace); err != nil {
				ps.add(invalid(f+".workspace", "%v", err))
			}
		}
		if len(ps.list)+ps.more != bad {
			// A placeholder, as for surfaces.
			c.lanes[name] = &cLane{name: name, surfaces: make([]bool, len(c.surfaces))}
			continue
		}
		ttl := l.TTL
		if ttl == 0 {
			ttl = p.DefaultTTL
		}
		ws := l.Workspace
		if ws == "" {
			ws = p.Workspace
		}
		c.lanes[name] = &cLane{name: name, ttl: int64(ttl), surfaces: set, classes: classes, workspace: ws}
	}
	return ps.err()
}

func (c *compiled) compileWorkers(p *Policy) error {
	var ps problems
	for _, w := range sortedKeys(p.Workers) {
		if err := safeID(w); err != nil {
			ps.add(invalid("workers."+w, "%v", err))
		} else if _, ok := p.Lanes[p.Workers[w]]; !ok {
			ps.add(invalid("workers."+w, "lane %q is not declared in lanes", p.Workers[w]))
		}
	}
	return ps.err()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
