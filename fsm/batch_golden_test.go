package fsm_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/events"
	"github.com/writ-dev/writ/fsm"
	"github.com/writ-dev/writ/policy"
)

// batchGoldenV1 is the committed encoding of goldenBatch: raft log entries
// written by every build so far must decode, so these bytes are kept
// forever. Only -rewrite writes it, and a rewrite that changes it breaks
// the promise: add a new golden file for a new form instead.
var batchGoldenV1 = filepath.Join("testdata", "batch", "v1.hex")

// batchGoldenV2 is the committed encoding of goldenBatchV2, the commands
// added after v1 (receipt format levels): kept forever like v1.
var batchGoldenV2 = filepath.Join("testdata", "batch", "v2.hex")

// batchGoldenV3 is the committed encoding of goldenBatchV3, the commands
// added with refusal summaries: kept forever like v1.
var batchGoldenV3 = filepath.Join("testdata", "batch", "v3.hex")

// batchGoldenV4 is the committed encoding of goldenBatchV4, the commands
// added with reviews as decision records: kept forever like v1.
var batchGoldenV4 = filepath.Join("testdata", "batch", "v4.hex")

// batchGoldenV5 is the committed encoding of goldenBatchV5, the commands
// added with route ownership leases (receipt format level 5).
var batchGoldenV5 = filepath.Join("testdata", "batch", "v5.hex")

// batchGoldenV6 is the committed encoding of goldenBatchV6, the commands
// added with break-glass cases (receipt format level 6): kept forever
// like v1.
var batchGoldenV6 = filepath.Join("testdata", "batch", "v6.hex")

// batchGoldenV8 is the committed encoding of goldenBatchV8, the commands
// added with fleets (receipt format level 8): kept forever like v1.
var batchGoldenV8 = filepath.Join("testdata", "batch", "v8.hex")

// batchGoldenV10 is the committed encoding of goldenBatchV10, the trace
// match fields added with result fields (receipt format level 10): kept
// forever like v1.
var batchGoldenV10 = filepath.Join("testdata", "batch", "v10.hex")

// batchGoldenV12Keys is the committed encoding of goldenBatchV12Keys, a
// spawn naming its child's NATS user key (receipt format level 12).
var batchGoldenV12Keys = filepath.Join("testdata", "batch", "v12-worker-keys.hex")

// goldenBatch is one log entry with every op and every command, trace and
// match field set at least once (TestBatchGoldenCoversEveryField). Never
// edit it: add commands for new fields to a new golden batch.
func goldenBatch() fsm.Batch {
	reqDigest := events.Sum([]byte("writ.request.v1 Bash {\"command\":\"go test ./...\"}"))
	return fsm.Batch{Time: 1767225600000000000, Node: "issuer-a", Commands: []fsm.Command{
		{Op: fsm.OpSetPolicy, Caller: "operator:root",
			Policy: []byte(`{"version":1,"default_ttl":"1m0s","lanes":{"coordinator":{"tools":["*"]}}}`)},
		{Op: fsm.OpRequest, Caller: "w-coder-2", GrantID: "g-01JH6Z3Q8R", Lane: "coordinator", Session: "s-7f3a",
			Tool: "Bash", Digest: reqDigest, IdemKey: "req-42", TTL: 30_000_000_000, Sources: []string{"doc-17", "web-3"},
			Args: policy.Args{Carried: true, Leaves: []policy.Arg{
				{Path: "/command", Kind: policy.ArgString, Value: "go test ./...", Len: 13},
				{Path: "/count", Kind: policy.ArgNumber, Value: "3"},
				{Path: "/dry", Kind: policy.ArgBool, Value: "false"},
				{Path: "/env", Kind: policy.ArgNull},
				{Path: "/stdin", Kind: policy.ArgElided, Value: strings.Repeat("ab", 32), Len: 70000},
			}},
			TargetLabel: "the writ repository", Amount: 150, HasAmount: true, Bytes: 48,
			Cwd: "/work/w-coder-2", Resolved: "/work/w-coder-2/writ",
			Traces: []fsm.Trace{
				{Field: "/command", Covered: true, Matches: []fsm.TraceMatch{
					{Source: "u1", Transform: "raw", Whole: true},
					{Source: "web1", Transform: "base64", Part: "host"},
				}},
				{Field: "/count"},
			}},
		{Op: fsm.OpSpend, Caller: "w-coder-2", GrantID: "g-01JH6Z3Q8R", Digest: reqDigest, IdemKey: "spend-42"},
		{Op: fsm.OpEffect, Caller: "w-coder-2", GrantID: "g-01JH6Z3Q8R", Outcome: "confirmed", Verifier: "ci"},
		{Op: fsm.OpRevoke, Caller: "operator:root", Key: "worker/w-research-1"},
		{Op: fsm.OpReinstate, Caller: "operator:root", Key: "w-research-1"},
		{Op: fsm.OpSource, Caller: "w-coder-2", SourceID: "d1", Session: "s-7f3a", Tool: "WebFetch",
			Channel: "derived", Scope: "task", ContentDigest: events.Sum([]byte("payee notes")),
			Path: "/work/w-coder-2/notes.md", Origins: []string{"u1", "web1"}, ModelMade: true},
		{Op: fsm.OpApprove, Caller: "operator:root", ReviewID: "rv-6f1c2a9b0d3e4f5a6b7c", TTL: 600_000_000_000,
			Note: "confirmed by phone"},
		{Op: fsm.OpPublished, Caller: "publisher", Seq: 41},
		{}, // an all-zero command is kept as an empty element
	}}
}

// goldenBatchV2 holds the commands added after goldenBatch: raising the
// receipt format level. Never edit it either: add a v3.
func goldenBatchV2() fsm.Batch {
	return fsm.Batch{Time: 1767312000000000000, Node: "issuer-b", Commands: []fsm.Command{
		{Op: fsm.OpRaiseFormat, Caller: "issuer:issuer-b", Format: 2},
	}}
}

// goldenBatchV3 holds the commands added after goldenBatchV2: a refusal
// summary (a negative Since pins the signed encoding). Never edit it: add
// a v4.
func goldenBatchV3() fsm.Batch {
	return fsm.Batch{Time: 1767398400000000000, Node: "issuer-c", Commands: []fsm.Command{
		{Op: fsm.OpRefusalSummary, Caller: "issuer:issuer-c", Key: "w-flood-1", Tool: "spend", Amount: 1234,
			Since: -1, Until: 1767398399000000000},
	}}
}

// goldenBatchV4 holds the commands added after goldenBatchV3: an artifact
// review opened, decided by a reviewer holding two roles, a plain-text
// reply relayed by a gateway, and a request naming the approved review.
// Never edit it: add a v5.
func goldenBatchV4() fsm.Batch {
	art := events.Sum([]byte("q3 report v2"))
	return fsm.Batch{Time: 1767398400000000000, Node: "issuer-d", Commands: []fsm.Command{
		{Op: fsm.OpOpenReview, Caller: "w-coord-1", Lane: "coordinator", Session: "s1", Path: "out/q3-report.pdf",
			ContentDigest: art, Caption: "q3-report", Transition: "review_ready->send",
			Destination: "recipient:cfo@example.com", ReviewerRole: "finance"},
		{Op: fsm.OpDecideReview, Caller: "reviewer:dana", Roles: []string{"finance", "legal"},
			ReviewID: "q3-report_v2_review", Outcome: "approve", Note: "figures checked", TTL: 600_000_000_000},
		{Op: fsm.OpReviewReply, Caller: "reviewer:gateway", Roles: []string{"finance"}, Channel: "slack:#finance",
			Sender: "dana", ReplyAt: -5, Text: "q3-report_v2_keep"},
		{Op: fsm.OpRequest, Caller: "w-coord-1", Lane: "coordinator", Tool: "send_email", GrantID: "g-4",
			ReviewID: "q3-report_v2_keep", ContentDigest: art},
	}}
}

// goldenBatchV5 holds the commands added with route ownership leases: the
// four route ops and a grant request bound to a route generation. Never
// edit it.
func goldenBatchV5() fsm.Batch {
	return fsm.Batch{Time: 1767484800000000000, Node: "issuer-c", Commands: []fsm.Command{
		{Op: fsm.OpRouteAcquire, Caller: "w-cron-1", Lane: "isolated", Route: "inbox-triage@acme", TTL: 30_000_000_000},
		{Op: fsm.OpRouteRenew, Caller: "w-cron-1", Lane: "isolated", Route: "inbox-triage@acme", RouteGen: 7, TTL: 30_000_000_000},
		{Op: fsm.OpRouteRelease, Caller: "w-cron-1", Route: "inbox-triage@acme", RouteGen: 7},
		{Op: fsm.OpRouteLapse, Caller: "issuer:issuer-c", Route: "nightly-backup"},
	}}
}

// goldenBatchV6 holds the commands added with break-glass cases. Never
// edit it: add a new golden batch.
func goldenBatchV6() fsm.Batch {
	return fsm.Batch{Time: 1767484800000000000, Node: "issuer-a", Commands: []fsm.Command{
		{Op: fsm.OpBreakGlass, Caller: "operator", CaseID: "inc-2026-0117", GlassScope: "worker:w-coder-2",
			TTL: 1_800_000_000_000, Note: "payment to an unknown payee: need the exact targets"},
	}}
}

// goldenBatchV8 is one log entry with the fleet commands. Never edit it:
// add a new golden batch.
func goldenBatchV8() fsm.Batch {
	return fsm.Batch{Time: 1767484900000000000, Node: "issuer-a", Commands: []fsm.Command{
		{Op: fsm.OpSpawn, Caller: "w-coord-1", Key: "w-coord-1-research", Lane: "isolated", ParentLane: "specialist",
			ScopeTools: []string{"Read", "WebFetch"}, ScopeClasses: []string{"local_read", "remote_query"},
			ScopeTargets: []string{"path:/srv/repo/*"}, TTL: 3_600_000_000_000},
		{Op: fsm.OpRestore, Caller: "w-coord-1-research"},
		{Op: fsm.OpRespawn, Caller: "operator:alice", Key: "w-coord-1-research", Lane: "isolated", Note: "inc-2026-0117"},
		{Op: fsm.OpLift, Caller: "operator:alice", Key: "w-coord-1-research", Note: "incident closed"},
	}}
}

// goldenBatchV10 holds a grant request whose traces name result fields
// (receipt format level 10). Never edit it: add a new golden batch.
func goldenBatchV10() fsm.Batch {
	return fsm.Batch{Time: 1767571200000000000, Node: "issuer-b", Commands: []fsm.Command{
		{Op: fsm.OpRequest, Caller: "w-mail-1", GrantID: "g-10", Lane: "coordinator", Tool: "mcp__chat__send_message",
			Traces: []fsm.Trace{{Field: "/recipient", Covered: true, Matches: []fsm.TraceMatch{
				{Source: "s-chat", Transform: "raw", Whole: true, Field: "/messages/3/sender", FieldWhole: true},
				{Source: "s-chat", Transform: "raw", Whole: true, Field: "/messages/4/body"},
			}}}},
	}}
}

// batchGoldenV11 is the committed encoding of goldenBatchV11, the combined
// ops added with receipt format level 11: kept forever like v1.
var batchGoldenV11 = filepath.Join("testdata", "batch", "v11.hex")

// goldenBatchV11 holds a grant-and-spend with the fields of a hook's grant
// request and an effect-and-source with the fields of a hook's report of a
// tool result (receipt format level 11). Never edit it: add a new golden
// batch.
func goldenBatchV11() fsm.Batch {
	reqDigest := events.Sum([]byte("writ.request.v1 Read {\"file_path\":\"/work/w-coder-2/notes.md\"}"))
	return fsm.Batch{Time: 1767657600000000000, Node: "issuer-c", Commands: []fsm.Command{
		{Op: fsm.OpGrantSpend, Caller: "w-coder-2", GrantID: "g-11", Lane: "coordinator", Session: "s-7f3a",
			Tool: "Read", Digest: reqDigest, IdemKey: "cc:s-7f3a:toolu_01", Sources: []string{"doc-17"},
			Args: policy.Args{Carried: true, Leaves: []policy.Arg{
				{Path: "/file_path", Kind: policy.ArgString, Value: "/work/w-coder-2/notes.md", Len: 24},
			}},
			Cwd: "/work/w-coder-2", Route: "repo/writ", RouteGen: 3,
			Traces: []fsm.Trace{{Field: "/file_path", Covered: true, Matches: []fsm.TraceMatch{
				{Source: "u1", Transform: "raw", Whole: true},
			}}}},
		{Op: fsm.OpEffectSource, Caller: "w-coder-2", GrantID: "g-11", Outcome: "confirmed", Verifier: "claude-code",
			SourceID: "src-cc-toolu_01", Session: "s-7f3a", Tool: "Read", Channel: "tool_result", Scope: "session",
			ContentDigest: events.Sum([]byte("# notes")), Path: "/work/w-coder-2/notes.md", Origins: []string{"u1"}, ModelMade: true},
	}}
}

// goldenBatchV12Keys holds a spawn naming the child's NATS user key
// (receipt format level 12). Never edit it: add a new golden batch.
func goldenBatchV12Keys() fsm.Batch {
	return fsm.Batch{Time: 1767657600000000000, Node: "issuer-a", Commands: []fsm.Command{
		{Op: fsm.OpSpawn, Caller: "w-coord-2", Key: "w-coord-2-build", Lane: "isolated", TTL: 1_800_000_000_000,
			UserKey: "UA5WUJ54Z23KILLCUOUNAKTPBVZWKMQVO4O6EQ5GHLAERIMLLHNCTYM5"},
	}}
}

// batchGoldens pairs each committed golden file with its batch.
var batchGoldens = []struct {
	path  string
	batch func() fsm.Batch
}{
	{batchGoldenV1, goldenBatch},
	{batchGoldenV2, goldenBatchV2},
	{batchGoldenV3, goldenBatchV3},
	{batchGoldenV4, goldenBatchV4},
	{batchGoldenV5, goldenBatchV5},
	{batchGoldenV6, goldenBatchV6},
	{batchGoldenV8, goldenBatchV8},
	{batchGoldenV10, goldenBatchV10},
	{batchGoldenV11, goldenBatchV11},
	{batchGoldenV12Keys, goldenBatchV12Keys},
}

func TestBatchGoldenRewrite(t *testing.T) {
	if !*rewrite {
		t.Skip("run with -rewrite to write the batch golden files")
	}
	if err := os.MkdirAll(filepath.Dir(batchGoldenV1), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, g := range batchGoldens {
		b := g.batch()
		if err := os.WriteFile(g.path, hexLines(b.Encode()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The encoder still writes the committed bytes, and the committed bytes
// decode to the golden batch (and re-encode to themselves), for every
// golden file.
func TestBatchGolden(t *testing.T) {
	if *rewrite {
		t.Skip("rewriting")
	}
	for _, g := range batchGoldens {
		text, err := os.ReadFile(g.path)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
		if err != nil {
			t.Fatal(err)
		}
		want := g.batch()
		if got := want.Encode(); !bytes.Equal(got, stored) {
			t.Errorf("encoding drifted from %s:\n got  %x\n want %x", g.path, got, stored)
		}
		dec, err := fsm.DecodeBatch(stored)
		if err != nil {
			t.Fatalf("the golden entry %s no longer decodes: %v", g.path, err)
		}
		if !reflect.DeepEqual(dec, want) {
			t.Errorf("the golden entry %s decodes to\n%+v\nwant\n%+v", g.path, dec, want)
		}
		if re := dec.Encode(); !bytes.Equal(re, stored) {
			t.Errorf("the decoded golden entry %s re-encodes to other bytes", g.path)
		}
	}
}

// Every field of Command, Trace and TraceMatch is set in some golden
// command (of either golden batch), so the golden bytes pin each field's tag and wire type.
func TestBatchGoldenCoversEveryField(t *testing.T) {
	set := map[string]bool{}
	mark := func(prefix string, v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			if !v.Field(i).IsZero() {
				set[prefix+v.Type().Field(i).Name] = true
			}
		}
	}
	all := append(append(goldenBatch().Commands, goldenBatchV2().Commands...), goldenBatchV3().Commands...)
	all = append(all, goldenBatchV4().Commands...)
	all = append(all, goldenBatchV5().Commands...)
	all = append(all, goldenBatchV6().Commands...)
	all = append(all, goldenBatchV8().Commands...)
	all = append(all, goldenBatchV10().Commands...)
	all = append(all, goldenBatchV11().Commands...)
	all = append(all, goldenBatchV12Keys().Commands...)
	for _, c := range all {
		mark("Command.", reflect.ValueOf(c))
		for _, tr := range c.Traces {
			mark("Trace.", reflect.ValueOf(tr))
			for _, m := range tr.Matches {
				mark("TraceMatch.", reflect.ValueOf(m))
			}
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[fsm.Command](), reflect.TypeFor[fsm.Trace](), reflect.TypeFor[fsm.TraceMatch]()} {
		for i := 0; i < typ.NumField(); i++ {
			if name := typ.Name() + "." + typ.Field(i).Name; !set[name] {
				t.Errorf("%s is never set in goldenBatch", name)
			}
		}
	}
	ops := map[fsm.Op]bool{}
	for _, c := range all {
		ops[c.Op] = true
	}
	for op := fsm.Op(1); !strings.HasPrefix(op.String(), "op("); op++ {
		if !ops[op] {
			t.Errorf("op %s has no golden command", op)
		}
	}
}

// hexLines is b in hex, 64 digits a line.
func hexLines(b []byte) []byte {
	s := hex.EncodeToString(b)
	var out bytes.Buffer
	for len(s) > 64 {
		out.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	out.WriteString(s + "\n")
	return out.Bytes()
}
