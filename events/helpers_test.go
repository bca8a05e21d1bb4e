package events

import (
	"errors"
	"testing"
)

// normalize maps empty slices to nil so that an event built with []string{}
// compares equal to its decoded form (the wire cannot tell them apart).
func normalize(e Event) Event {
	if len(e.Counters) == 0 {
		e.Counters = nil
	}
	if len(e.Cancelled) == 0 {
		e.Cancelled = nil
	}
	if len(e.Rules) == 0 {
		e.Rules = nil
	}
	if len(e.Policy) == 0 {
		e.Policy = nil
	}
	if len(e.Sources) == 0 {
		e.Sources = nil
	}
	if len(e.Grounds) == 0 {
		e.Grounds = nil
	}
	if len(e.Quotas) == 0 {
		e.Quotas = nil
	}
	if len(e.Origins) == 0 {
		e.Origins = nil
	}
	if len(e.Candidates) == 0 {
		e.Candidates = nil
	}
	if len(e.Routes) == 0 {
		e.Routes = nil
	}
	for _, l := range []*[]string{&e.ScopeTools, &e.ScopeClasses, &e.ScopeTargets, &e.Reviews, &e.Workers} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return e
}

// sealBody appends a correct hash field to body (which starts with the
// version byte), so a test input fails only for the reason it was built for.
func sealBody(body []byte) []byte {
	h := Sum(body)
	w := Writer{buf: append([]byte(nil), body...)}
	w.Raw(tagHash, h[:])
	return w.buf
}

// isOneOf reports whether err matches any of targets.
func isOneOf(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// mustDecode decodes b or fails the test.
func mustDecode(t testing.TB, b []byte) Event {
	t.Helper()
	e, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return e
}
