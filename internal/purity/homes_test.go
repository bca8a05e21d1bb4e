package purity

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// homes gives each wire name of writ its one home: the package (relative
// to the module root) whose non-test source alone may spell it as a
// string literal. Everyone else uses that package's constant, so a name
// cannot drift between two copies (as the harness's channel list once
// lacked model_output).
var homes = map[string]string{
	"WRIT_EVENTS": "events", // events.StreamName
	"writ.evt.":   "events", // events.SubjectPrefix
	"writ.evt.>":  "events", // events.SubjectAll
	"writ.api.":   "api",    // api.WorkerPrefix
	"writ.op.":    "api",    // api.OperatorPrefix
	"writ.op.>":   "api",    // api.OperatorWildcard
	"rv-":         "api",    // api.ReviewIDPrefix

	"user_prompt":      "authority", // authority.Channels
	"instruction_file": "authority",
	"file_read":        "authority",
	"tool_result":      "authority",
	"web_fetch":        "authority",
	"peer_message":     "authority",
	"model_output":     "authority",
	"derived":          "authority",
}

// pendingHomes are copies known to remain, by package: they are reported
// with t.Log, and go when their package moves to the owner's constant.
var pendingHomes = map[string]string{}

// homeViolation is a literal spelled outside its home.
type homeViolation struct {
	pos   string // file:line
	dir   string // the package directory, relative to the module root
	value string
}

// findCopies parses every non-test Go file below root (skipping testdata,
// hidden directories and nested modules) and returns the string literals
// that spell a name of homes outside its home package.
func findCopies(root string, homes map[string]string) ([]homeViolation, error) {
	var out []homeViolation
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || hasGoMod(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if home, ok := homes[v]; ok && home != dir {
				p := fset.Position(lit.Pos())
				relFile, _ := filepath.Rel(root, p.Filename)
				out = append(out, homeViolation{pos: filepath.ToSlash(relFile) + ":" + strconv.Itoa(p.Line), dir: dir, value: v})
			}
			return true
		})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out, err
}

// hasGoMod reports whether dir is the root of another module.
func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// TestOneHome fails on a wire name spelled outside the package that owns
// it.
func TestOneHome(t *testing.T) {
	copies, err := findCopies(moduleRoot(t), homes)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range copies {
		msg := c.pos + ": " + strconv.Quote(c.value) + " is declared in package " + homes[c.value] + "; use its constant"
		if why, ok := pendingHomes[c.dir]; ok {
			t.Logf("pending (%s): %s", why, msg)
			continue
		}
		t.Error(msg)
	}
}

// TestOneHomeFindsCopies runs the finder on a made-up tree: a copy of a
// channel name in another package is found, the owner's own literal, test
// files, testdata and nested modules are not.
func TestOneHomeFindsCopies(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("authority/channel.go", "package authority\n\nconst ChannelModelOutput = \"model_output\"\n")
	write("harness/sources.go", "package harness\n\nconst (\n\tChannelWebFetch = \"web_fetch\"\n\tother = `model_output`\n)\n")
	write("harness/sources_test.go", "package harness\n\nvar x = \"web_fetch\"\n")
	write("harness/testdata/x.go", "package x\n\nvar x = \"web_fetch\"\n")
	write("bench/go.mod", "module b\n")
	write("bench/b.go", "package b\n\nvar x = \"WRIT_EVENTS\"\n")
	copies, err := findCopies(root, homes)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range copies {
		got = append(got, c.pos+" "+c.value)
	}
	want := []string{"harness/sources.go:4 web_fetch", "harness/sources.go:5 model_output"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("copies %q, want %q", got, want)
	}
}
