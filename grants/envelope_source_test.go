package grants_test

import (
	"reflect"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/grants"
)

// A source registration answers the same whether its event keeps the
// descriptor in the source fields or packed it the earlier way (path as a
// "path:" target, model-made as a ground).
func TestSourceAnswerIsTheSameInBothForms(t *testing.T) {
	base := events.Event{Kind: events.KindSource, Seq: 4, Decision: "permit", Authority: "evidence",
		Counters: []events.Counter{{Key: "source/d1", Value: 0}}, Channel: "derived"}
	fields := base
	fields.SourceID, fields.Origins, fields.SourcePath, fields.ModelMade = "d1", []string{"u1"}, "/work/w1/n.md", true
	packed := base
	packed.Sources, packed.Target, packed.Grounds = []string{"d1", "u1"}, "path:/work/w1/n.md", []string{"model_made"}
	got, want := grants.FromEvent(fields), grants.FromEvent(packed)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answers differ:\n fields %+v\n packed %+v", got, want)
	}
	if got.Target != "path:/work/w1/n.md" || len(got.Grounds) != 1 {
		t.Fatalf("answer %+v", got)
	}
}
