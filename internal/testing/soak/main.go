// Command soak runs writ's fault suite (tests/faults, with WRIT_FAULTS=1)
// again and again and prints, per scenario, how often it passed and failed
// and the first error of its first failure. It builds the suite's test
// binary once, with the race detector, so every iteration runs the same
// code; each iteration is bounded by -timeout.
//
//	go run ./internal/testing/soak -n 20            # what `make soak` runs
//	go run ./internal/testing/soak -n 3 -run Stall  # only the stall scenarios
//	go run ./internal/testing/soak -json            # the summary as JSON
//
// Any failure is a bug to find, not a flake to retry: soak exits 1 when
// any scenario failed in any iteration, and keeps the failing iterations'
// full output in -keep (default: a temporary directory it names).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errFailures):
		os.Exit(1)
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
}

var errFailures = errors.New("some scenarios failed")

// config is soak's command line.
type config struct {
	n       int
	run     string
	pkg     string
	timeout time.Duration
	keep    string
	json    bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.n, "n", 20, "iterations of the whole suite")
	fs.StringVar(&c.run, "run", "", "only the scenarios matching this -test.run pattern")
	fs.StringVar(&c.pkg, "pkg", "./tests/faults", "the package holding the suite")
	fs.DurationVar(&c.timeout, "timeout", 20*time.Minute, "limit for one iteration")
	fs.StringVar(&c.keep, "keep", "", "directory for the output of failing iterations (default: a new temporary directory)")
	fs.BoolVar(&c.json, "json", false, "print the summary as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: soak [-n N] [-run PATTERN] [-json] [-keep DIR]")
		fmt.Fprintln(stderr, "Runs writ's fault suite N times and summarises passes and failures per scenario.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	if c.n < 1 {
		return c, fmt.Errorf("-n must be at least 1, got %d", c.n)
	}
	if c.timeout <= 0 {
		return c, fmt.Errorf("-timeout must be positive, got %s", c.timeout)
	}
	return c, nil
}

// tally is one scenario's record over the iterations.
type tally struct {
	Test       string `json:"test"`
	Runs       int    `json:"runs"`
	Passes     int    `json:"passes"`
	Fails      int    `json:"fails"`
	Skips      int    `json:"skips"`
	FirstError string `json:"first_error,omitempty"`
	FirstIter  int    `json:"first_failed_iteration,omitempty"`
}

type summary struct {
	Iterations int      `json:"iterations"`
	Failed     int      `json:"failed_iterations"`
	Elapsed    string   `json:"elapsed"`
	KeptIn     string   `json:"failing_output_dir,omitempty"`
	Tests      []*tally `json:"tests"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "writ-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if c.keep == "" {
		if c.keep, err = os.MkdirTemp("", "writ-soak-failures-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(c.keep, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(work, "faults.test")
	fmt.Fprintf(stderr, "soak: building %s with -race (no time limit on the build)\n", c.pkg)
	build := exec.CommandContext(ctx, "go", "test", "-c", "-race", "-o", bin, c.pkg)
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the suite: %w", err)
	}
	tallies := map[string]*tally{}
	sum := summary{Iterations: c.n}
	start := time.Now()
	for i := 1; i <= c.n; i++ {
		if ctx.Err() != nil {
			sum.Iterations = i - 1
			break
		}
		t0 := time.Now()
		failed, err := iteration(ctx, c, bin, i, tallies)
		if err != nil {
			return err
		}
		status := "ok"
		if failed {
			sum.Failed++
			status = "FAILED"
		}
		fmt.Fprintf(stderr, "soak: iteration %d/%d %s in %s (%d failed so far)\n", i, c.n, status, time.Since(t0).Round(time.Second), sum.Failed)
	}
	sum.Elapsed = time.Since(start).Round(time.Second).String()
	if sum.Failed > 0 {
		sum.KeptIn = c.keep
	} else {
		os.Remove(c.keep) // empty unless a failure was kept
	}
	for _, t := range tallies {
		sum.Tests = append(sum.Tests, t)
	}
	sort.Slice(sum.Tests, func(i, j int) bool { return sum.Tests[i].Test < sum.Tests[j].Test })
	if c.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printTable(stdout, sum)
	}
	if sum.Failed > 0 {
		return errFailures
	}
	return nil
}

// testEvent is one line of `go tool test2json` output.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// iteration runs the suite once through test2json and folds the results
// into tallies. It reports whether anything failed.
func iteration(ctx context.Context, c config, bin string, i int, tallies map[string]*tally) (bool, error) {
	ictx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	targs := []string{"tool", "test2json", "-t", bin, "-test.v=test2json", "-test.count=1", "-test.timeout", c.timeout.String()}
	if c.run != "" {
		targs = append(targs, "-test.run", c.run)
	}
	cmd := exec.CommandContext(ictx, "go", targs...)
	cmd.Dir = c.pkg
	if st, err := os.Stat(c.pkg); err != nil || !st.IsDir() {
		cmd.Dir = ""
	}
	cmd.Env = append(os.Environ(), "WRIT_FAULTS=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("running the suite: %w", err)
	}
	failed, raw := fold(out, i, tallies)
	werr := cmd.Wait()
	if werr != nil && !failed {
		// The binary failed outside any test (a panic in TestMain, the
		// iteration's timeout): that is a failure of the iteration.
		failed = true
		t := tallies["(suite)"]
		if t == nil {
			t = &tally{Test: "(suite)"}
			tallies["(suite)"] = t
		}
		t.Runs++
		t.Fails++
		if t.FirstError == "" {
			t.FirstError, t.FirstIter = werr.Error(), i
		}
	}
	if failed {
		name := filepath.Join(c.keep, fmt.Sprintf("iteration-%02d.log", i))
		if err := os.WriteFile(name, []byte(raw), 0o644); err != nil {
			return failed, err
		}
	}
	return failed, nil
}

// fold reads one iteration's test2json stream into tallies (iteration i)
// and returns whether any test failed and the plain output.
func fold(r io.Reader, i int, tallies map[string]*tally) (bool, string) {
	var raw strings.Builder
	firstErr := map[string]string{}
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev testEvent
		if json.Unmarshal(line, &ev) != nil {
			raw.Write(line)
			raw.WriteByte('\n')
			continue
		}
		raw.WriteString(ev.Output)
		if ev.Test == "" {
			if ev.Action == "fail" {
				failed = true
			}
			continue
		}
		if ev.Action == "output" && firstErr[ev.Test] == "" && looksLikeError(ev.Output) {
			firstErr[ev.Test] = strings.TrimSpace(ev.Output)
		}
		switch ev.Action {
		case "pass", "fail", "skip":
			t := tallies[ev.Test]
			if t == nil {
				t = &tally{Test: ev.Test}
				tallies[ev.Test] = t
			}
			t.Runs++
			switch ev.Action {
			case "pass":
				t.Passes++
			case "skip":
				t.Skips++
			case "fail":
				failed = true
				t.Fails++
				if t.FirstError == "" {
					t.FirstError = firstErr[ev.Test]
					if t.FirstError == "" {
						t.FirstError = "(failed without an error line; see the kept output)"
					}
					t.FirstIter = i
				}
			}
		}
	}
	return failed, raw.String()
}

// looksLikeError picks the lines a failing test prints about its failure:
// t.Errorf/t.Fatalf lines ("file_test.go:123: …") and panics.
func looksLikeError(s string) bool {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "panic:") || strings.Contains(s, "DATA RACE") {
		return true
	}
	if strings.HasPrefix(s, "---") || strings.HasPrefix(s, "===") {
		return false
	}
	i := strings.Index(s, "_test.go:")
	return i > 0 && (strings.Contains(s, "invariant") || strings.Contains(s, "want") ||
		strings.Contains(s, "FAIL") || strings.Contains(s, "error") || strings.Contains(s, "did not") || strings.Contains(s, "not "))
}

func printTable(w io.Writer, s summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\truns\tpass\tfail\tskip\tfirst error (iteration)\n")
	for _, t := range s.Tests {
		fe := ""
		if t.Fails > 0 {
			fe = fmt.Sprintf("%s (%d)", trim(t.FirstError, 140), t.FirstIter)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", t.Test, t.Runs, t.Passes, t.Fails, t.Skips, fe)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d iterations in %s, %d with a failure", s.Iterations, s.Elapsed, s.Failed)
	if s.KeptIn != "" {
		fmt.Fprintf(w, "; their full output is in %s", s.KeptIn)
	}
	fmt.Fprintln(w)
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
