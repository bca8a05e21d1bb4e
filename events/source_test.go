package events

import (
	"slices"
	"testing"
)

// The golden source events, one written before the source fields and one
// with them, give their descriptors through SourceDescriptor.
func TestSourceDescriptorReadsBothForms(t *testing.T) {
	stored := readGolden(t)
	for _, c := range []struct {
		name, id, path string
		origins        []string
		modelMade      bool
	}{
		{"source", "src-3b8e51c0a2d4", "/work/w-billing-1/notes/payees.md", []string{"src-19f0c2aa7e61", "src-77d2e0b4c913"}, false},
		{"source_2", "src-5c0e9d21f4a8", "/work/w-billing-1/notes/refunds.md", []string{"src-19f0c2aa7e61", "src-77d2e0b4c913"}, true},
	} {
		e, err := Decode(stored[c.name])
		if err != nil {
			t.Fatal(err)
		}
		id, origins, path, modelMade := e.SourceDescriptor()
		if id != c.id || path != c.path || !slices.Equal(origins, c.origins) || modelMade != c.modelMade {
			t.Errorf("%s: descriptor %q %v %q %v", c.name, id, origins, path, modelMade)
		}
	}
	packed := Event{Sources: []string{"s1"}, Grounds: []string{"field=x", GroundModelMade}, Target: "tool:Read"}
	if id, origins, path, mm := packed.SourceDescriptor(); id != "s1" || len(origins) != 0 || path != "" || !mm {
		t.Errorf("packed descriptor %q %v %q %v", id, origins, path, mm)
	}
}
