package fsm_test

import (
	"reflect"
	"testing"

	"github.com/writ-dev/writ/fsm"
)

// TestDowngradeTraces: below ReceiptFormatTypedTraces the issuer rewrites
// what the level would refuse into what it accepts, claiming less (never
// whole, never covering) and still naming every source; at the level it
// leaves traces alone.
func TestDowngradeTraces(t *testing.T) {
	in := func() []fsm.Trace {
		return []fsm.Trace{{Field: "/amount", Covered: true, Matches: []fsm.TraceMatch{
			{Source: "u1", Transform: "number:EUR", Whole: true},
			{Source: "u2", Transform: "ident", Whole: true},
			{Source: "e1", Transform: "hex+base64"},
			{Source: "e2", Transform: "json+base64"},
			{Source: "r1", Transform: "raw", Whole: true},
			{Source: "d1", Transform: "dns_labels+hex", Part: "host"},
		}}}
	}
	got := in()
	fsm.DowngradeTraces(got, fsm.ReceiptFormatBreakGlass)
	want := []fsm.TraceMatch{
		{Source: "u1", Transform: "raw", Part: "token"},
		{Source: "u2", Transform: "raw", Part: "token"},
		{Source: "e1", Transform: "hex"},
		{Source: "e2", Transform: "raw", Part: "token"},
		{Source: "r1", Transform: "raw", Whole: true},
		{Source: "d1", Transform: "dns_labels+hex", Part: "host"},
	}
	if !reflect.DeepEqual(got[0].Matches, want) || !got[0].Covered {
		t.Fatalf("downgraded %+v", got[0])
	}
	if field, detail := fsm.CheckTraces(got); field != "" {
		t.Fatalf("downgraded traces refused: %s %s", field, detail)
	}
	same := in()
	fsm.DowngradeTraces(same, fsm.ReceiptFormatTypedTraces)
	if !reflect.DeepEqual(same, in()) {
		t.Fatalf("traces changed at the level: %+v", same)
	}
}
