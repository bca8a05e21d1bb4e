package policy

import (
	"slices"
	"testing"

	"github.com/writ-dev/writ/lanes"
)

// TestConsequencesMatchLanes holds the engine's class list to the one the
// worker validates spawn declarations against (lanes.Classes): a class
// known to one and not the other would be refused, or let through, by the
// wrong side.
func TestConsequencesMatchLanes(t *testing.T) {
	if got, want := Consequences, lanes.Classes(); !slices.Equal(got, want) {
		t.Fatalf("policy.Consequences = %v, lanes.Classes() = %v", got, want)
	}
	if len(Consequences) != nClasses {
		t.Fatalf("%d classes, nClasses = %d", len(Consequences), nClasses)
	}
	for _, c := range Consequences {
		if !lanes.IsClass(c) {
			t.Errorf("lanes.IsClass(%q) = false", c)
		}
	}
	if lanes.IsClass("teleport") {
		t.Error("lanes.IsClass accepts an unknown class")
	}
}
