package purity

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/writ-dev/writ"

// roots are the packages whose transitive imports must stay pure: the
// state machine, the receipt format, and the request wire format (which
// the state machine is to import).
var roots = []string{"./fsm", "./events", "./api"}

// pureDirs are the packages (relative to the module root) whose non-test
// source must never read the wall clock or draw random numbers.
var pureDirs = []string{"fsm", "events", "grants", "revocation", "policy", "lanes", "authority", "args"}

// forbidden reports whether an import path may not appear anywhere in the
// transitive closure of the roots, standard library included.
func forbidden(path string) bool {
	switch {
	case strings.HasPrefix(path, "github.com/hashicorp/raft"),
		strings.HasPrefix(path, "github.com/nats-io/"),
		path == "net", strings.HasPrefix(path, "net/"),
		path == "os/exec",
		path == "crypto/rand":
		return true
	}
	return false
}

func isRand(path string) bool { return path == "math/rand" || strings.HasPrefix(path, "math/rand/") }

// stdRandImporters are standard-library packages allowed to import
// math/rand: math/big uses it for ProbablyPrime, which writ never calls.
// Any other route for math/rand into the closure fails the test.
var stdRandImporters = map[string]bool{"math/big": true}

type listedPackage struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	Imports    []string
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", dir, err)
	}
	return dir
}

// TestImportClosure runs `go list -deps -json` on the pure roots and fails
// if any package in their transitive closure imports raft, NATS, the
// network, os/exec or crypto/rand, or if math/rand enters the closure other
// than through an allow-listed standard-library package.
func TestImportClosure(t *testing.T) {
	var bad []string
	for _, p := range closure(t) {
		if forbidden(p.ImportPath) {
			bad = append(bad, p.ImportPath+" is in the closure")
		}
		for _, imp := range p.Imports {
			switch {
			case forbidden(imp):
				bad = append(bad, p.ImportPath+" imports "+imp)
			case isRand(imp) && !(p.Standard && stdRandImporters[p.ImportPath]):
				bad = append(bad, p.ImportPath+" imports "+imp)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}

// closure lists the roots and everything they import, non-test files only.
func closure(t *testing.T) []listedPackage {
	t.Helper()
	pkgs := goListDeps(t, roots...)
	if len(pkgs) < len(roots) {
		t.Fatalf("go list returned %d packages", len(pkgs))
	}
	return pkgs
}

// goListDeps runs `go list -deps -json` on patterns in the module root
// and returns the packages it lists: those named and everything they
// import, non-test files only.
func goListDeps(t *testing.T, patterns ...string) []listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go") // go test puts GOROOT/bin on PATH
	if err != nil {
		t.Skipf("go command not available: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list", "-deps", "-json"}, patterns...)...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// clockFuncs are the time package functions that read or wait on the wall
// clock. Durations, constants and parsing stay allowed.
var clockFuncs = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTicker": true, "NewTimer": true,
}

// TestNoClockOrRandomness parses every non-test Go file of the pure
// packages, and of every package of this module in the roots' import
// closure, and fails on any use of time.Now and friends, or of any
// identifier from math/rand, math/rand/v2 or crypto/rand, whatever name the
// file imports them under.
func TestNoClockOrRandomness(t *testing.T) {
	root := moduleRoot(t)
	paths := map[string]bool{}
	for _, dir := range pureDirs {
		matches, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range matches {
			if !strings.HasSuffix(path, "_test.go") {
				paths[path] = true
			}
		}
	}
	for _, p := range closure(t) {
		if p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/") {
			for _, f := range p.GoFiles {
				paths[filepath.Join(p.Dir, f)] = true
			}
		}
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	fset := token.NewFileSet()
	for _, path := range sorted {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, fset, f)
	}
	if len(sorted) == 0 {
		t.Fatal("no files checked")
	}
}

func checkFile(t *testing.T, fset *token.FileSet, f *ast.File) {
	t.Helper()
	timeNames := map[string]bool{}
	randNames := map[string]string{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if path == "math/rand/v2" {
			name = "rand"
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch {
		case name == "_" && (isRand(path) || path == "crypto/rand"):
			t.Errorf("%s: blank import of %s", fset.Position(imp.Pos()), path)
		case name == ".":
			t.Errorf("%s: dot import of %s hides what is used", fset.Position(imp.Pos()), path)
		case path == "time":
			timeNames[name] = true
		case isRand(path) || path == "crypto/rand":
			randNames[name] = path
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		switch {
		case timeNames[id.Name] && clockFuncs[sel.Sel.Name]:
			t.Errorf("%s: %s.%s reads the wall clock", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
		case randNames[id.Name] != "":
			t.Errorf("%s: %s.%s draws from %s", fset.Position(sel.Pos()), id.Name, sel.Sel.Name, randNames[id.Name])
		}
		return true
	})
}
