package policy

import (
	"errors"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/args"
	"github.com/writ-dev/writ/grants"
)

// facts are what the engine extracted from one call.
type facts struct {
	s         *cSurface
	lane      *cLane
	target    CanonTarget
	res       Resolution
	amount    uint64
	hasAmount bool
	bytes     uint64
	sinks     []string // screen forms
	args      []string // screen forms of every string argument, when a shape rule reads them
	screen    string   // the screen form of a shell target
	command   string   // a shell target as given (shellHosts reads its quoting)
	features  Features // the request's Features
	elided    bool     // a sink value was too long to carry
	// A list target (target.list): its elements, and target holds only
	// the emitted form of the set. noTarget: an optional target left out.
	list     bool
	elems    []CanonTarget
	noTarget bool
	one      [1]CanonTarget // targets()'s slice of the one target
	// The files a patch in the sinks names (FeaturePatchPaths, surfaces
	// without a target), canonical; patchOverflow: more than
	// maxPatchFiles.
	patchFiles    []string
	patchOverflow bool
	// Case-folded forms for shape-rule prefilters, filled on first use.
	foldedSinks  []string
	foldedArgs   []string
	targetValue  string
	foldedTarget string
	folded       bool
}

// prepareFolded fills the case-folded forms the prefilters read.
func (f *facts) prepareFolded() {
	if f.folded {
		return
	}
	f.folded = true
	f.foldedSinks = make([]string, len(f.sinks))
	for i, s := range f.sinks {
		f.foldedSinks[i] = fold(s)
	}
	f.foldedArgs = make([]string, len(f.args))
	for i, s := range f.args {
		f.foldedArgs[i] = fold(s)
	}
	if f.s.hasTarget && f.s.canon != CanonShell && !f.list {
		_, f.targetValue, _ = strings.Cut(f.target.Subject, ":")
		f.foldedTarget = fold(f.targetValue)
	}
}

// surfaceOf returns the index of the first surface whose tools match tool
// and, for a surface with verbs, whose verbs hold the tool's verb; or -1.
func (c *compiled) surfaceOf(tool string) int {
	best := len(c.surfaces)
	if i, ok := c.toolExact[tool]; ok {
		best = i
	}
	verb, verbRead := "", false
	for _, tg := range c.toolGlobs {
		if tg.surface >= best {
			break
		}
		if !tg.g.Match(tool) {
			continue
		}
		if vs := c.surfaces[tg.surface].verbs; vs != nil {
			if !verbRead {
				verb, verbRead = c.verbOf(tool), true
			}
			if !vs[verb] {
				continue
			}
		}
		best = tg.surface
		break
	}
	if best == len(c.surfaces) {
		return -1
	}
	return best
}

// extract reads the target, amount, bytes and sinks of a call.
func (c *compiled) extract(s *cSurface, lane *cLane, r *Request) (f facts, reason grants.Reason, missing, detail string) {
	f.s, f.lane, f.features = s, lane, r.Features
	f.res = Resolution{Cwd: r.Cwd, Resolved: r.Resolved, Workspace: workspaceOf(lane.workspace, r.Worker)}
	needArgs := s.hasTarget || len(s.sinks) > 0 || s.amountPtr != "" || s.bytesPtr != "" || s.args
	if needArgs && !r.Args.Carried {
		return f, grants.ReasonInvalidRequest, "args", "the call's arguments were not forwarded to the policy engine"
	}
	if s.hasTarget {
		vals, groups, isList := targetLeaves(s, r.Args)
		switch {
		case len(vals) == 0 && s.x.optional:
			f.noTarget = true
		case len(groups) > 0 && groups[0] != s.targetPtr && !s.x.optional:
			return f, grants.ReasonInvalidRequest, "args" + s.targetPtr, "the target field is missing"
		case isList:
			elems, whole, missing, detail, ok := listTarget(s, vals, groups, f.res)
			if !ok {
				return f, grants.ReasonTargetAmbiguous, missing, detail
			}
			f.list, f.elems, f.target = true, elems, whole
		case len(vals) == 0:
			return f, grants.ReasonInvalidRequest, "args" + s.targetPtr, "the target field is missing"
		case len(vals) > 1 || vals[0].Path != s.targetPtr:
			return f, grants.ReasonTargetAmbiguous, "one target at " + s.targetPtr, "the target field holds several values; one grant binds one target"
		case vals[0].Kind == args.Elided:
			return f, grants.ReasonTargetAmbiguous, "one target at " + s.targetPtr, "the target value is too long"
		case vals[0].Kind != args.String:
			return f, grants.ReasonTargetAmbiguous, "one target at " + s.targetPtr, "the target value is not a string"
		}
		if !f.list && !f.noTarget {
			t, err := Canonicalize(s.canon, vals[0].Value, f.res)
			if err != nil {
				if errors.Is(err, ErrTargetMissing) {
					return f, grants.ReasonInvalidRequest, "args" + s.targetPtr, err.Error()
				}
				return f, grants.ReasonTargetAmbiguous, "one canonical target at " + s.targetPtr, err.Error()
			}
			f.target = t
			if s.canon == CanonShell {
				f.screen, f.command = ScreenText(vals[0].Value), vals[0].Value
			}
		}
	}
	f.amount, f.hasAmount = r.Amount, r.HasAmount
	if s.amountPtr != "" {
		f.amount, f.hasAmount = 0, false
		vals := r.Args.Under(s.amountPtr)
		if len(vals) > 1 || len(vals) == 1 && (vals[0].Kind != args.Number || vals[0].Path != s.amountPtr) {
			return f, grants.ReasonInvalidRequest, "args" + s.amountPtr, "the amount field must be one number"
		}
		if len(vals) == 1 {
			v, err := strconv.ParseUint(vals[0].Value, 10, 64)
			if err != nil {
				return f, grants.ReasonInvalidRequest, "args" + s.amountPtr, "the amount must be a non-negative integer in minor units"
			}
			if r.HasAmount && r.Amount != v {
				return f, grants.ReasonInvalidRequest, "amount", "the request's amount differs from the amount in its arguments"
			}
			f.amount, f.hasAmount = v, true
		}
	}
	f.bytes = r.Bytes
	if s.bytesPtr != "" {
		f.bytes = 0
		for _, v := range r.Args.Under(s.bytesPtr) {
			f.bytes += v.Len
		}
	}
	for _, ptr := range s.sinks {
		for _, v := range r.Args.Under(ptr) {
			switch v.Kind {
			case args.String:
				f.sinks = append(f.sinks, ScreenText(v.Value))
				if r.Features&FeaturePatchPaths != 0 && !s.hasTarget {
					f.addPatchFiles(v.Value)
				}
			case args.Elided:
				f.elided = true
			}
		}
	}
	if s.args {
		f.args, f.elided = screenArgs(r.Args.Leaves, f.elided)
	}
	return f, grants.ReasonNone, "", ""
}

// screenArgs returns the screen form of every string argument, and of
// every array of two or more strings joined by blanks — an argv such as
// ["issuer","approve","rv-1"] reads as the command it runs. elided is set
// when a value was too long to screen.
func screenArgs(leaves []args.Leaf, elided bool) ([]string, bool) {
	var out []string
	var run []string // consecutive string elements of one array
	parent := ""
	flush := func() {
		if len(run) > 1 {
			out = append(out, ScreenText(strings.Join(run, " ")))
		}
		run = run[:0]
	}
	for _, v := range leaves {
		switch v.Kind {
		case args.String:
			out = append(out, ScreenText(v.Value))
			if p, ok := arrayParent(v.Path); ok {
				if p != parent {
					flush()
					parent = p
				}
				run = append(run, v.Value)
				continue
			}
		case args.Elided:
			elided = true
		}
		flush()
		parent = ""
	}
	flush()
	return out, elided
}

// arrayParent returns the pointer of the array holding the element at
// path ("/argv" for "/argv/2"); ok is false when path is not an array
// element.
func arrayParent(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 || i == len(path)-1 {
		return "", false
	}
	for _, c := range path[i+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return path[:i], true
}

// workspaceOf substitutes the worker into a workspace template.
func workspaceOf(template, worker string) string {
	if template == "" || !strings.Contains(template, "{worker}") {
		return template
	}
	return strings.ReplaceAll(template, "{worker}", worker)
}
