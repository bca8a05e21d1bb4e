package main

import (
	"strings"
	"testing"
)

// A test2json stream folds into per-scenario counts, and a failure keeps
// the first error line the test printed, not a later one.
func TestFoldCountsAndKeepsTheFirstError(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Test":"TestA"}`,
		`{"Action":"output","Test":"TestA","Output":"    a_test.go:10: invariant one key, one answer: k1 twice\n"}`,
		`{"Action":"output","Test":"TestA","Output":"    a_test.go:12: invariant something else failed too\n"}`,
		`{"Action":"fail","Test":"TestA"}`,
		`{"Action":"pass","Test":"TestB"}`,
		`{"Action":"skip","Test":"TestC"}`,
		`not json: a line printed outside test2json`,
		`{"Action":"fail"}`,
	}, "\n")
	tallies := map[string]*tally{}
	failed, raw := fold(strings.NewReader(stream), 3, tallies)
	if !failed {
		t.Fatal("a failing stream folded as passing")
	}
	a := tallies["TestA"]
	if a == nil || a.Fails != 1 || a.Runs != 1 || a.FirstIter != 3 || !strings.Contains(a.FirstError, "k1 twice") {
		t.Fatalf("TestA: %+v", a)
	}
	if b := tallies["TestB"]; b == nil || b.Passes != 1 || b.Fails != 0 {
		t.Fatalf("TestB: %+v", b)
	}
	if c := tallies["TestC"]; c == nil || c.Skips != 1 {
		t.Fatalf("TestC: %+v", c)
	}
	if !strings.Contains(raw, "not json") {
		t.Fatal("plain lines are lost from the kept output")
	}
	// A second iteration that passes adds to the counts and keeps the
	// first failure's error.
	failed, _ = fold(strings.NewReader(`{"Action":"pass","Test":"TestA"}`), 4, tallies)
	if failed || a.Runs != 2 || a.Passes != 1 || a.FirstIter != 3 {
		t.Fatalf("after a passing iteration: failed=%v %+v", failed, a)
	}
}

func TestParseRefusesNonsense(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-timeout", "-1s"}, {"extra"}} {
		if _, err := parse(args, &strings.Builder{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	c, err := parse(nil, &strings.Builder{})
	if err != nil || c.n != 20 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
}
