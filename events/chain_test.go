package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestChainAppendLinks: Append numbers events from 1, links each to its
// predecessor's hash, advances the head, and its output decodes to the
// sealed event.
func TestChainAppendLinks(t *testing.T) {
	var c Chain
	var prev Hash
	for i := uint64(1); i <= 5; i++ {
		e := Event{Kind: KindPermit, Time: t0 + int64(i), GrantID: fmt.Sprint("g", i)}
		before := c
		b := c.Append(&e, nil)
		if e.Seq != i || e.Prev != prev {
			t.Fatalf("event %d: seq %d prev %s, want seq %d prev %s", i, e.Seq, e.Prev.Short(), i, prev.Short())
		}
		if c.Seq != i || c.Head != e.Hash || e.Hash.IsZero() {
			t.Fatalf("head after %d: %+v, want seq %d head %s", i, c, i, e.Hash.Short())
		}
		d := mustDecode(t, b)
		if d.Hash != e.Hash || d.Seq != i || d.Prev != prev {
			t.Fatalf("decoded %+v does not match appended %+v", d, e)
		}
		if err := before.Check(d); err != nil {
			t.Fatalf("the pre-append head rejects the appended event: %v", err)
		}
		prev = e.Hash
	}
}

// TestChainCheckRejects: a gap, a repeated sequence and a wrong previous
// hash each fail with ErrChain and an error naming the offending seq; a
// failed Check leaves the head where it was.
func TestChainCheckRejects(t *testing.T) {
	var src Chain
	evs := make([]Event, 4)
	for i := range evs {
		evs[i] = Event{Kind: KindAttempt, Time: t0 + int64(i)}
		src.Append(&evs[i], nil)
	}
	var head Chain // verifier that has seen seq 1 and 2
	for _, e := range evs[:2] {
		if err := head.Check(e); err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
		head.Advance(e)
	}
	wrongPrev := evs[2]
	wrongPrev.Prev = evs[0].Hash
	zeroPrev := evs[2]
	zeroPrev.Prev = Hash{}
	firstWithPrev := evs[0]
	firstWithPrev.Prev = evs[3].Hash

	cases := []struct {
		name string
		head Chain
		e    Event
		want string
	}{
		{"gap", head, evs[3], "seq 4 does not follow seq 2"},
		{"repeat", head, evs[1], "seq 2 does not follow seq 2"},
		{"replay from the start", head, evs[0], "seq 1 does not follow seq 2"},
		{"wrong prev", head, wrongPrev, "seq 3 prev"},
		{"zero prev mid-chain", head, zeroPrev, "seq 3 prev"},
		{"first event with a prev", Chain{}, firstWithPrev, "seq 1 prev"},
		{"seq 0", Chain{}, Event{}, "seq 0 does not follow seq 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.head
			err := h.Check(tc.e)
			if !errors.Is(err, ErrChain) {
				t.Fatalf("got %v, want ErrChain", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if h != tc.head {
				t.Errorf("Check moved the head")
			}
		})
	}
	// Control: the true successor is accepted by the same head.
	if err := head.Check(evs[2]); err != nil {
		t.Fatalf("true successor rejected: %v", err)
	}
}
