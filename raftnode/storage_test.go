package raftnode

import (
	"errors"
	"testing"
)

// A full disk lets some small writes through while every log append
// fails: those successes must not end the failing streak, or a node that
// can store no entry would never be seen as failing. Without a failed
// append, any success ends the streak.
type write struct {
	err      error
	isAppend bool
}

func TestStorageStreakEndsOnlyOnAppendOnceAnAppendFailed(t *testing.T) {
	full := errors.New("no space left on device")
	cases := []struct {
		name    string
		writes  []write
		failing bool
	}{
		{"append fails, a vote write succeeds", []write{{full, true}, {nil, false}}, true},
		{"append fails, a range deletion succeeds, append fails again", []write{{full, true}, {nil, false}, {full, true}}, true},
		{"append fails, then an append succeeds", []write{{full, true}, {nil, false}, {nil, true}}, false},
		{"a vote write fails, then succeeds", []write{{full, false}, {nil, false}}, false},
		{"a vote write fails, an append fails, the vote write succeeds", []write{{full, false}, {full, true}, {nil, false}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchedStore{}
			var first = w.failFrom
			for i, wr := range tc.writes {
				_ = w.note(wr.err, wr.isAppend)
				if i == 0 {
					first = w.failFrom
				}
			}
			n := &Node{wstore: w}
			err, since := n.StorageHealth()
			if got := err != nil; got != tc.failing {
				t.Fatalf("failing = %v (err %v), want %v", got, err, tc.failing)
			}
			if tc.failing && since != first {
				t.Fatalf("the streak restarted: failing since %v, first failure at %v", since, first)
			}
		})
	}
}
