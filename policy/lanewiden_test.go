package policy

import "testing"

// LaneWidens names the field of a child lane that allows what its
// parent's lane does not, under version 1 and version 2 documents alike.
func TestLaneWidens(t *testing.T) {
	legacy, rec := LegacyDefault(), Recommended()
	for _, tc := range []struct {
		name          string
		p             *Policy
		child, parent string
		field         string
	}{
		{"v1 narrower", legacy, "isolated", "coordinator", ""},
		{"v1 same", legacy, "specialist", "specialist", ""},
		{"v1 tool outside", legacy, "isolated", "specialist", "lanes.isolated.tools"},
		{"v1 denial dropped", legacy, "coordinator", "specialist", "lanes.coordinator.tools"},
		{"v1 undeclared lane", legacy, "nope", "specialist", ""},
		{"v2 narrower", rec, "specialist", "coordinator", ""},
		{"v2 surface outside", rec, "isolated", "specialist", "lanes.isolated.surfaces"},
		{"v2 wider than narrow", rec, "specialist", "isolated", "lanes.specialist.surfaces"},
		{"no policy", nil, "isolated", "specialist", ""},
	} {
		field, detail := tc.p.LaneWidens(tc.child, tc.parent)
		if field != tc.field || (field != "") != (detail != "") {
			t.Errorf("%s: %q %q, want field %q", tc.name, field, detail, tc.field)
		}
	}
	// A v1 child that keeps every tool but drops a denial widens.
	p := LegacyDefault()
	l := p.Lanes["specialist"]
	l.Deny = nil
	p.Lanes["loose"] = l
	if f, _ := p.LaneWidens("loose", "specialist"); f != "lanes.loose.deny" {
		t.Errorf("dropped denial: %q", f)
	}
	// A v2 child outside its parent's workspace widens.
	q := Recommended()
	s := q.Lanes["isolated"]
	s.Workspace = "/srv/a"
	q.Lanes["isolated"] = s
	c := q.Lanes["isolated"]
	c.Workspace = "/srv"
	q.Lanes["wide"] = c
	if f, _ := q.LaneWidens("wide", "isolated"); f != "lanes.wide.workspace" {
		t.Errorf("workspace: %q", f)
	}
}
