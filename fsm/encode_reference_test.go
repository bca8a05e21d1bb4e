package fsm_test

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/policy"
)

// Field tags of the batch and command encodings, as command.go numbers
// them (the encoding is append only).
const (
	refBatchVersion                                         = 1
	refBtTime, refBtNode, refBtCommand                      = 1, 2, 3
	refAtPath, refAtKind, refAtValue, refAtLen              = 1, 2, 3, 4
	refTrField, refTrCovered, refTrMatch                    = 1, 2, 3
	refTmSource, refTmTransform, refTmPart, refTmWhole      = 1, 2, 3, 4
	refCtOp, refCtCaller, refCtGrantID, refCtLane           = 1, 2, 3, 4
	refCtSession, refCtTool, refCtDigest, refCtIdemKey      = 5, 6, 7, 8
	refCtTTL, refCtSources, refCtOutcome, refCtVerifier     = 9, 10, 11, 12
	refCtKey, refCtPolicy, refCtSeq, refCtArgs, refCtArg    = 13, 14, 15, 16, 17
	refCtTargetLabel, refCtAmount, refCtHasAmount           = 18, 19, 20
	refCtBytes, refCtCwd, refCtResolved, refCtSourceID      = 21, 22, 23, 24
	refCtChannel, refCtScope, refCtContentDigest, refCtPath = 25, 26, 27, 28
	refCtOrigin, refCtModelMade, refCtTrace                 = 29, 30, 31
	refCtReviewID, refCtNote                                = 32, 33
	refCtFormat                                             = 34
	refCtSince, refCtUntil                                  = 35, 36
	refCtRoute, refCtRouteGen                               = 50, 51
	refCtScopeTool, refCtScopeClass, refCtScopeTarget       = 52, 53, 54
	refCtParentLane                                         = 55
	refCtCaseID, refCtGlassScope                            = 60, 61
	refCtUserKey                                            = 66
)

// referenceEncode is Batch.Encode written plainly, as it was before the
// encoder shared its scratch buffers: every nested record encoded in a
// buffer of its own and written as a one-element string list. Tests hold
// Batch.Encode to it byte for byte: the raft log keeps these bytes.
func referenceEncode(b fsm.Batch) []byte {
	w := events.NewWriter(nil)
	w.Byte(refBatchVersion)
	w.Int(refBtTime, b.Time)
	w.String(refBtNode, b.Node)
	for i := range b.Commands {
		w.Strings(refBtCommand, []string{string(referenceCommand(&b.Commands[i]))})
	}
	return w.Bytes()
}

func referenceCommand(c *fsm.Command) []byte {
	w := events.NewWriter(nil)
	w.Uint(refCtOp, uint64(c.Op))
	w.String(refCtCaller, c.Caller)
	w.String(refCtGrantID, c.GrantID)
	w.String(refCtLane, c.Lane)
	w.String(refCtSession, c.Session)
	w.String(refCtTool, c.Tool)
	w.Hash(refCtDigest, c.Digest)
	w.String(refCtIdemKey, c.IdemKey)
	w.Int(refCtTTL, c.TTL)
	w.Strings(refCtSources, c.Sources)
	w.String(refCtOutcome, c.Outcome)
	w.String(refCtVerifier, c.Verifier)
	w.String(refCtKey, c.Key)
	w.Raw(refCtPolicy, c.Policy)
	w.Uint(refCtSeq, c.Seq)
	w.Bool(refCtArgs, c.Args.Carried)
	for _, a := range c.Args.Leaves {
		aw := events.NewWriter(nil)
		aw.String(refAtPath, a.Path)
		aw.Uint(refAtKind, uint64(a.Kind))
		aw.String(refAtValue, a.Value)
		aw.Uint(refAtLen, a.Len)
		w.Strings(refCtArg, []string{string(aw.Bytes())})
	}
	w.String(refCtTargetLabel, c.TargetLabel)
	w.Uint(refCtAmount, c.Amount)
	w.Bool(refCtHasAmount, c.HasAmount)
	w.Uint(refCtBytes, c.Bytes)
	w.String(refCtCwd, c.Cwd)
	w.String(refCtResolved, c.Resolved)
	w.String(refCtSourceID, c.SourceID)
	w.String(refCtChannel, c.Channel)
	w.String(refCtScope, c.Scope)
	w.Hash(refCtContentDigest, c.ContentDigest)
	w.String(refCtPath, c.Path)
	w.Strings(refCtOrigin, c.Origins)
	w.Bool(refCtModelMade, c.ModelMade)
	for _, t := range c.Traces {
		tw := events.NewWriter(nil)
		tw.String(refTrField, t.Field)
		tw.Bool(refTrCovered, t.Covered)
		for _, m := range t.Matches {
			mw := events.NewWriter(nil)
			mw.String(refTmSource, m.Source)
			mw.String(refTmTransform, m.Transform)
			mw.String(refTmPart, m.Part)
			mw.Bool(refTmWhole, m.Whole)
			tw.Strings(refTrMatch, []string{string(mw.Bytes())})
		}
		w.Strings(refCtTrace, []string{string(tw.Bytes())})
	}
	w.String(refCtReviewID, c.ReviewID)
	w.String(refCtNote, c.Note)
	w.Uint(refCtFormat, c.Format)
	w.Int(refCtSince, c.Since)
	w.Int(refCtUntil, c.Until)
	w.String(refCtRoute, c.Route)
	w.Uint(refCtRouteGen, c.RouteGen)
	w.Strings(refCtScopeTool, c.ScopeTools)
	w.Strings(refCtScopeClass, c.ScopeClasses)
	w.Strings(refCtScopeTarget, c.ScopeTargets)
	w.String(refCtParentLane, c.ParentLane)
	w.String(refCtCaseID, c.CaseID)
	w.String(refCtGlassScope, c.GlassScope)
	w.String(refCtUserKey, c.UserKey)
	return w.Bytes()
}

// Batch.Encode and AppendEncode write the reference bytes, empty nested
// records (an argument or a trace with nothing set, a match with nothing
// set) and empty commands included.
func TestEncodeMatchesReference(t *testing.T) {
	odd := fsm.Batch{Time: 7, Node: "n1", Commands: []fsm.Command{
		{},
		{Op: fsm.OpRequest, Args: policy.Args{Carried: true, Leaves: []policy.Arg{{}, {Path: "/a", Kind: policy.ArgString, Value: "x"}}},
			Traces: []fsm.Trace{{}, {Field: "/a", Matches: []fsm.TraceMatch{{}, {Source: "s1", Transform: "raw", Whole: true}}}}},
		{},
	}}
	batches := append(append(seedBatches(), seedBatchesV2()...), odd,
		requestSpendBatch(3, 1, 2), requestSpendBatchV2(3, 1))
	for i, b := range batches {
		if got, want := b.Encode(), referenceEncode(b); !bytes.Equal(got, want) {
			t.Errorf("batch %d encodes to\n%x\nwant\n%x", i, got, want)
		}
		for j := range b.Commands {
			c := &b.Commands[j]
			if got, want := c.AppendEncode(nil), referenceCommand(c); !bytes.Equal(got, want) {
				t.Errorf("batch %d command %d encodes to\n%x\nwant\n%x", i, j, got, want)
			}
		}
	}
}

// DecodeBatch gives back what Encode was given, with more distinct short
// strings than its string cache holds (and strings too long for it).
func TestDecodeBatchRoundTrip(t *testing.T) {
	many := fsm.Batch{Time: 9, Node: "n1"}
	for i := range 300 {
		n := strconv.Itoa(i)
		many.Commands = append(many.Commands, fsm.Command{Op: fsm.OpRequest, Caller: "w" + n, Lane: "lane" + strconv.Itoa(i%7),
			Tool: strings.Repeat("t", 60+i%10), Session: "s" + n, GrantID: "g" + n, IdemKey: "k" + n, Sources: []string{"s" + n, "web"}})
	}
	batches := append(append(seedBatches(), seedBatchesV2()...), many, requestSpendBatch(3, 1, 2), requestSpendBatchV2(3, 1))
	for i, b := range batches {
		got, err := fsm.DecodeBatch(b.Encode())
		if err != nil || !reflect.DeepEqual(got, b) {
			t.Fatalf("batch %d: decoded %v\n%#v\nwant\n%#v", i, err, got, b)
		}
	}
}
